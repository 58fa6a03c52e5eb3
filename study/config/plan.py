"""The plan: the experiment groups expanded into runs (dataset x grid cell x model x method
x seed, plus the runs a fine-tuning method starts from), the constructed feature datasets,
and the runs trained on them."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field

from study.config.core import ConfigError, dataset_params, dataset_variant, deep_merge, group_datasets
from study.config.grid import grid_combinations
from study.config.methods import method_definition, resolve_evaluation, resolve_method
from study.runs import construction_key, run_id

# Keys that only one optimizer reads; dropped for the other so an Adam run's config does not
# claim an SGD momentum (SGD configs keep exactly their keys, so their run ids are unchanged).
_OPTIMIZER_ONLY = {"sgd": ("betas",), "adam": ("momentum", "nesterov")}
#: how model_best.pt is chosen on the validation split (train.selection.score)
SELECTION_SCORES = ("mean", "mean_plus_worst")
#: TF32 on a GPU as PyTorch sets it by default (torch 1.12-2.13) and the references ran:
#: cuDNN convolutions in TF32, matmuls in fp32; a run config names `tf32` only where it differs
DEFAULT_TF32 = {"cudnn": True, "matmul": False}


@dataclass
class RunSpec:
    run_id: str
    config: dict
    groups: list[str] = field(default_factory=list)
    evaluations: list[str] = field(default_factory=list)
    #: checkpoints to evaluate: `last` (model.pt) and, for runs with a validation split,
    #: `best` (model_best.pt, chosen on validation robust accuracy)
    checkpoints: list[str] = field(default_factory=lambda: ["last"])

    @property
    def init_from(self) -> str | None:
        return self.config.get("init_from")

    @property
    def dataset(self) -> str:
        return self.config["dataset"]

    @property
    def variant(self) -> str:
        return self.config["data_variant"]


def _validation_setting(setting: Mapping) -> dict:
    """A group's `train.validation` as the run config records it: {fraction} or {per_class}."""
    if setting.get("per_class") is not None:
        return {"per_class": int(setting["per_class"])}
    return {"fraction": float(setting["fraction"])}


def selection_setting(setting: Mapping | None) -> dict:
    """A comparison's checkpoint rule with its defaults: score `mean` (Rice et al. 2020) or
    `mean_plus_worst` (CFA's index), eligible from the first epoch after `from_epoch` x epochs."""
    out = {"score": "mean", "from_epoch": 0.0, **dict(setting or {})}
    if out["score"] not in SELECTION_SCORES:
        raise ConfigError(f"train.selection.score {out['score']!r} is not one of {', '.join(SELECTION_SCORES)}")
    out["from_epoch"] = float(out["from_epoch"])
    return out


def _resolved_optimizer(opt: Mapping) -> dict:
    out = {**opt, "lr": float(opt["lr"]), "weight_decay": float(opt["weight_decay"])}
    for key in _OPTIMIZER_ONLY.get(out["name"], ()):
        out.pop(key, None)
    return out


def _training_attack(params: Mapping, name: str) -> dict:
    """An evaluation's attack as the engine runs it on the epoch's subsets (no test-set keys)."""
    attack = resolve_evaluation(params, name)
    for key in ("test_per_class", "batch_size", "name"):
        attack.pop(key, None)
    return attack


def _epoch_eval(params: Mapping, train: Mapping, definition: Mapping) -> dict:
    """The per-epoch evaluation of a run, its attacks resolved: `attack` on the test subset
    and the validation split, `validation_attack` on the validation split where the method
    names its own (FRL's reference drives its multipliers with PGD-20)."""
    epoch_eval = copy.deepcopy(train["epoch_eval"])
    if epoch_eval.get("attack"):
        epoch_eval["attack"] = _training_attack(params, epoch_eval["attack"])
    if definition.get("validation_attack"):
        epoch_eval["validation_attack"] = _training_attack(params, definition["validation_attack"])
    return epoch_eval


def run_config(
    params: Mapping,
    group: Mapping,
    model: str,
    method: str,
    seed: int,
    dataset: str | None = None,
    cell: Mapping | None = None,
) -> dict:
    """The resolved, self-contained configuration of one training run.

    `dataset` picks one of a group's `datasets` (default: its only one); `cell` is one of
    `grid_combinations(group)`, applied over the group's `train`.
    """
    dataset = dataset if dataset is not None else group_datasets(group)[0]
    params = dataset_params(params, dataset)
    definition = method_definition(params, method)
    train = deep_merge(deep_merge(params["train"], group.get("train", {})), cell or {})
    # A fine-tuning method (FRL) brings its own schedule, over the group's settings.
    train = deep_merge(train, definition.get("train", {}))
    cfg = {
        "dataset": dataset,
        "data_variant": dataset_variant(params, dataset),
        "train_per_class": train.get("train_per_class"),
        "model": model,
        "method": method,
        "method_config": resolve_method(params, method),
        "optimizer": _resolved_optimizer(train["optimizer"]),
        "schedule": train["schedule"],
        "epochs": int(train["epochs"]),
        "batch_size": int(train["batch_size"]),
        "augment": train["augment"],
        "epoch_eval": _epoch_eval(params, train, definition),
        "seed": int(seed),
    }
    if dataset == "synthetic":
        cfg["synthetic"] = params["data"]["synthetic"]
    # Keys below appear only when used, so runs without them keep their run ids.
    if train.get("validation"):
        cfg["validation"] = _validation_setting(train["validation"])
        # the checkpoint rule is the comparison's (the group's train.selection), the same for
        # every method of the group, baselines included
        cfg["selection"] = selection_setting(train.get("selection"))
    if train.get("precision", "fp32") != "fp32":
        cfg["precision"] = train["precision"]
    tf32 = {**DEFAULT_TF32, **(train.get("tf32") or {})}
    if tf32 != DEFAULT_TF32:
        cfg["tf32"] = tf32
    if definition.get("init_from"):
        # The parent's run id (slug + hash of its config) is part of the child's config:
        # a changed parent is a new child.
        parent = run_config(params, group, model, definition["init_from"], seed, dataset=dataset, cell=cell)
        cfg["init_from"] = run_id(parent)
        # FRL's reference fine-tunes its best pre-trained model: the parent's best checkpoint
        # where the parent has a validation split to choose it on, else its last.
        cfg["init_checkpoint"] = "best" if parent.get("validation") else "last"
    return cfg


def _run_chain(params: Mapping, group: Mapping, model: str, method: str, seed: int, dataset: str,
               cell: Mapping) -> list[dict]:
    """The configs of a run and of the runs it fine-tunes (its init_from chain), parents first."""
    chain = [method]
    while (parent := method_definition(params, chain[-1]).get("init_from")) is not None:
        if parent in chain:
            raise ConfigError(f"method {method!r}: circular init_from chain {chain + [parent]}")
        chain.append(parent)
    return [run_config(params, group, model, name, seed, dataset=dataset, cell=cell) for name in reversed(chain)]


def _group_configs(params: Mapping, group: Mapping):
    """(dataset, run config) of every run a group needs, fine-tuning parents first."""
    cells = grid_combinations(group)
    for dataset in group_datasets(group):
        for cell in cells:
            for model in group["models"]:
                for method in group["methods"]:
                    for seed in group["seeds"]:
                        for cfg in _run_chain(params, group, model, method, seed, dataset, cell):
                            yield dataset, cfg


def _wanted_checkpoints(group: Mapping, cfg: Mapping) -> list[str]:
    has_val = bool(cfg.get("validation"))
    wanted = group.get("checkpoints", ["last", "best"] if has_val else ["last"])
    if "best" in wanted and not has_val:
        raise ConfigError(f"experiment group {group['group']!r}: checkpoint 'best' "
                          "needs a validation split (train.validation)")
    return wanted


def plan_runs(params: Mapping) -> list[RunSpec]:
    """Expand the experiment groups into runs; a run shared by two groups appears once.

    Order: groups as written, then dataset, grid cell, model, method, seed.
    """
    runs: dict[str, RunSpec] = {}
    checkpoints: dict[str, set[str]] = {}
    for group in params["experiments"]:
        for dataset, cfg in _group_configs(params, group):
            evaluations = group.get("evaluations", dataset_params(params, dataset)["evaluate"]["default"])
            rid = run_id(cfg)
            spec = runs.setdefault(rid, RunSpec(rid, cfg))
            if group["group"] not in spec.groups:
                spec.groups.append(group["group"])
            for ev in evaluations:
                if ev not in spec.evaluations:
                    spec.evaluations.append(ev)
            checkpoints.setdefault(rid, set()).update(_wanted_checkpoints(group, cfg))
    if params.get("features"):
        _add_feature_runs(params, runs)
    for rid, spec in runs.items():
        spec.checkpoints = [c for c in ("last", "best") if c in checkpoints.get(rid, {"last"})]
    return list(runs.values())


def _add_feature_runs(params: Mapping, runs: dict[str, RunSpec]) -> None:
    base = list(runs.values())
    # The source models are compared with the models trained on their datasets, so they
    # get the same evaluations.
    extra = params["features"]["train"]["evaluations"]
    for con in constructions(params, base):
        con.source_run.evaluations += [e for e in extra if e not in con.source_run.evaluations]
    for spec in feature_runs(params, base):
        runs.setdefault(spec.run_id, spec)


# ------------------------------------------------------------- constructed datasets


@dataclass
class Construction:
    """One constructed training set (D_R, D_NR, D_rand or D_det) and where it comes from."""

    kind: str
    key: str
    source_run: RunSpec
    settings: dict

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.key}"


def _feature_source(params: Mapping, runs: list[RunSpec], role: str) -> RunSpec:
    src = params["features"]["sources"][role]
    for run in runs:
        c = run.config
        if (src["group"] in run.groups and c["model"] == src["model"] and c["method"] == src["method"]
                and c["seed"] == src["seed"] and not c.get("constructed")):
            return run
    raise ConfigError(
        f"features.sources.{role}: no run of group {src['group']!r} with model {src['model']!r}, "
        f"method {src['method']!r} and seed {src['seed']}; add it to that experiment group"
    )


def constructions(params: Mapping, runs: list[RunSpec]) -> list[Construction]:
    """The constructed datasets of the study: D_R from the robust source model, the others
    from the standard one (Ilyas et al. 2019). The kinds are checked by the params schema."""
    feats = params["features"]
    out = []
    for kind in feats["datasets"]:
        role = "robust" if kind == "d_r" else "standard"
        source = _feature_source(params, runs, role)
        settings = copy.deepcopy(dict(feats["construct"]))
        out.append(Construction(kind, construction_key(kind, {role: source.run_id}, settings), source, settings))
    return out


def feature_runs(params: Mapping, runs: list[RunSpec]) -> list[RunSpec]:
    """Standard training on each constructed dataset, evaluated on the real test set."""
    train = params["features"]["train"]
    specs = []
    for con in constructions(params, runs):
        group = {"dataset": con.source_run.dataset, "train": train.get("train", {})}
        for seed in train["seeds"]:
            cfg = run_config(params, group, train["model"], train["method"], seed)
            cfg["train_per_class"] = None  # the constructed set is already the chosen subset
            cfg["constructed"] = {"kind": con.kind, "key": con.key, "source_run": con.source_run.run_id}
            specs.append(RunSpec(run_id(cfg), cfg, ["features"], list(train["evaluations"])))
    return specs


def prepared_name(dataset: str, variant: str) -> str:
    return f"{dataset}-{variant}"
