"""The study's configuration: `params.yaml`, preset overlays, validation, and the plan of
runs and evaluations derived from it.

Both front ends (Snakemake and the `study` command) resolve the configuration through
`load_params`, so a preset means the same thing whichever tool selects it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import yaml

DEFAULT_PARAMS = Path("params.yaml")
DEFAULT_PRESETS = Path("workflow/presets")
DEFAULT_SCHEMA = Path("workflow/schemas/params.schema.yaml")

_FRACTION = re.compile(r"^\s*(-?\d+(?:\.\d*)?)\s*/\s*(\d+(?:\.\d*)?)\s*$")


class ConfigError(ValueError):
    """A configuration value is missing, unknown or malformed."""


def parse_fraction(value: float | int | str) -> float:
    """Accept 0.031, 8 or the string '8/255' (how attack budgets are written in papers)."""
    if isinstance(value, bool):
        raise ConfigError(f"expected a number or 'a/b', got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        m = _FRACTION.match(value)
        if m:
            return float(m.group(1)) / float(m.group(2))
        try:
            return float(value)
        except ValueError:
            pass
    raise ConfigError(f"expected a number or a fraction like '8/255', got {value!r}")


def deep_merge(base: Mapping, over: Mapping) -> dict:
    """Recursively merge `over` onto `base`; lists and scalars in `over` replace."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def available_presets(presets_dir: Path = DEFAULT_PRESETS) -> list[str]:
    return sorted(p.stem for p in Path(presets_dir).glob("*.yaml"))


def _read_yaml(path: Path) -> dict:
    try:
        with open(path) as fh:
            data = yaml.safe_load(fh)
    except FileNotFoundError as err:
        raise ConfigError(f"config file not found: {path}") from err
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {err}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping at the top level, got {type(data).__name__}")
    return data


def validate_params(params: Mapping, schema_path: Path = DEFAULT_SCHEMA) -> None:
    schema = _read_yaml(Path(schema_path))
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(params), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for err in errors[:10]:
            where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
            lines.append(f"  {where}: {err.message}")
        raise ConfigError("invalid configuration:\n" + "\n".join(lines))


def load_params(
    params_path: Path | str = DEFAULT_PARAMS,
    overrides: Mapping | None = None,
    presets_dir: Path | str = DEFAULT_PRESETS,
    schema_path: Path | str = DEFAULT_SCHEMA,
    base: Mapping | None = None,
) -> dict:
    """params.yaml, then the preset named by its `preset` key (or by the overrides), then
    the overrides (command-line values win over the preset they select)."""
    overrides = dict(overrides or {})
    params = dict(base) if base is not None else _read_yaml(Path(params_path))
    preset = overrides.get("preset", params.get("preset"))
    if preset is not None:
        preset_file = Path(presets_dir) / f"{preset}.yaml"
        if not preset_file.exists():
            raise ConfigError(
                f"unknown preset {preset!r}; valid presets: {', '.join(available_presets(Path(presets_dir)))}"
            )
        params = deep_merge(params, _read_yaml(preset_file))
    params = deep_merge(params, overrides)
    params["preset"] = preset
    validate_params(params, Path(schema_path))
    for dataset in params.get("per_dataset") or {}:
        # The merged settings of each dataset must be as valid as the global ones.
        try:
            validate_params(dataset_params(params, dataset), Path(schema_path))
        except ConfigError as err:
            raise ConfigError(f"per_dataset.{dataset}: {err}") from None
    _check_references(params)
    _check_features(params)
    return params


def _check_references(params: Mapping) -> None:
    """Names used by experiment groups must be defined, so a typo fails before any job runs."""
    from study.data.registry import DATASETS, check_variant

    for dataset, variant in (params["data"].get("variants") or {}).items():
        if dataset not in DATASETS:
            raise ConfigError(f"data.variants: unknown dataset {dataset!r}; valid: {', '.join(sorted(DATASETS))}")
        check_variant(dataset, variant)
    for dataset in params.get("per_dataset") or {}:
        if dataset not in DATASETS:
            raise ConfigError(f"per_dataset: unknown dataset {dataset!r}; valid: {', '.join(sorted(DATASETS))}")
    for group in params["experiments"]:
        gname = group["group"]
        for dataset in group_datasets(group):
            if dataset not in DATASETS:
                raise ConfigError(
                    f"experiment group {gname!r}: unknown dataset {dataset!r}; "
                    f"valid: {', '.join(sorted(DATASETS))}"
                )
            check_variant(dataset, dataset_variant(params, dataset))
            _check_group_names(dataset_params(params, dataset), group, dataset)
        grid_combinations(group)  # a malformed grid fails here, before any job


def _check_group_names(params: Mapping, group: Mapping, dataset: str) -> None:
    """Models, methods and evaluations of one group on one dataset (settings resolved for it)."""
    from study.models.registry import MODEL_NAMES

    gname = group["group"]
    methods = params["methods"]
    evaluations = params["evaluations"]
    for name, ev in evaluations.items():
        if "type" not in ev:
            raise ConfigError(
                f"evaluation {name!r} on {dataset!r} has no 'type'; a per_dataset evaluation that is not "
                "defined in 'evaluations' must give its full settings"
            )
    for model in group["models"]:
        if model not in MODEL_NAMES:
            raise ConfigError(
                f"experiment group {gname!r}: unknown model {model!r}; valid: {', '.join(MODEL_NAMES)}"
            )
    for method in group["methods"]:
        if method not in methods:
            raise ConfigError(
                f"experiment group {gname!r}: unknown method {method!r}; "
                f"defined in params 'methods': {', '.join(sorted(methods))}"
            )
        _check_method(params, method)
    for ev in group.get("evaluations", params["evaluate"]["default"]):
        if ev not in evaluations:
            raise ConfigError(
                f"experiment group {gname!r}: unknown evaluation {ev!r} on {dataset!r}; "
                f"defined in params 'evaluations' (and per_dataset.{dataset}): {', '.join(sorted(evaluations))}"
            )


# ------------------------------------------------------------ per-dataset settings and grids
# Sections of params that `per_dataset.<name>` may override for runs on that dataset
# (MNIST's PGD-AT budget eps 0.3, 40 steps of 0.01, differs from CIFAR's 8/255).
PER_DATASET_SECTIONS = ("methods", "evaluations", "evaluate", "train")


def group_datasets(group: Mapping) -> list[str]:
    """A group names one `dataset` or a list of `datasets` (each dataset x model x method x seed is a run)."""
    if "datasets" in group:
        return list(group["datasets"])
    return [group["dataset"]]


def dataset_params(params: Mapping, dataset: str) -> dict:
    """params with `per_dataset[dataset]` merged over its sections; unchanged for other datasets.

    Precedence, lowest first: params.yaml, preset, per_dataset entry (params.yaml's, then the
    preset's, merged key by key), an experiment group's own `train` and `grid`.
    """
    over = (params.get("per_dataset") or {}).get(dataset)
    if not over:
        return dict(params)
    out = dict(params)
    for section in PER_DATASET_SECTIONS:
        if section in over:
            out[section] = deep_merge(params[section], over[section])
    return out


def _set_dotted(tree: dict, path: str, value) -> dict:
    """Return `tree` with `value` merged at the dotted `path` (mappings merge, other values replace)."""
    keys = path.split(".")
    patch = value
    for key in reversed(keys):
        patch = {key: patch}
    return deep_merge(tree, patch)


def grid_combinations(group: Mapping) -> list[dict]:
    """The train overrides of every cell of a group's `grid` (one empty override without a grid).

    `grid` maps dotted paths of the train section to lists of values, e.g.
    {optimizer: [{name: sgd, lr: 0.1}, {name: adam, lr: 0.001}], optimizer.weight_decay: [0, 5e-4]};
    every combination is one setting (Cartesian product, in the order the keys are written),
    applied over the group's `train`; a mapping value merges into the section at its path.
    """
    grid = group.get("grid") or {}
    cells: list[dict] = [{}]
    for path, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(
                f"experiment group {group.get('group')!r}: grid {path!r} needs a non-empty list of values, "
                f"got {values!r}"
            )
        cells = [_set_dotted(cell, path, v) for cell in cells for v in values]
    return cells


def _check_features(params: Mapping) -> None:
    feats = params.get("features")
    if not feats:
        return
    methods, evaluations = params["methods"], params["evaluations"]
    for role in ("standard", "robust"):
        if feats["sources"][role]["method"] not in methods:
            raise ConfigError(f"features.sources.{role}: unknown method {feats['sources'][role]['method']!r}; "
                              f"defined in params 'methods': {', '.join(sorted(methods))}")
    if feats["train"]["method"] not in methods:
        raise ConfigError(f"features.train.method: unknown method {feats['train']['method']!r}")
    for ev in feats["train"]["evaluations"]:
        if ev not in evaluations:
            raise ConfigError(f"features.train.evaluations: unknown evaluation {ev!r}; "
                              f"defined in params 'evaluations': {', '.join(sorted(evaluations))}")


def _check_method(params: Mapping, name: str) -> None:
    """A method's `base` and `init_from` names exist and its policies can be built."""
    from study.train.adversary import Adversary
    from study.train.policies import build_policies

    definition = method_definition(params, name)
    parent = definition.get("init_from")
    if parent is not None and parent not in params["methods"]:
        raise ConfigError(f"method {name!r}: init_from names unknown method {parent!r}; "
                          f"defined: {', '.join(sorted(params['methods']))}")
    method = resolve_method(params, name)
    try:
        Adversary(method.get("adversary"))
        build_policies(method, 10, 10, [1] * 10)
    except (ValueError, KeyError) as err:
        raise ConfigError(f"method {name!r}: {err}") from err


def dataset_variant(params: Mapping, dataset: str) -> str:
    from study.data.registry import get_dataset_info

    variants = params.get("data", {}).get("variants", {}) or {}
    return variants.get(dataset, get_dataset_info(dataset).variants[0])


# --------------------------------------------------------------------------- the plan


def _slug_number(x: float) -> str:
    return f"{x:g}".replace("-", "m").replace("+", "")


def run_key(cfg: Mapping) -> str:
    """Short hash of everything that determines a run's result."""
    blob = json.dumps(cfg, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def run_id(cfg: Mapping) -> str:
    opt, sched = cfg["optimizer"], cfg["schedule"]
    slug = "-".join(
        [
            cfg["dataset"]
            + ("" if cfg["data_variant"] in ("official", "default") else f"_{cfg['data_variant']}")
            + (f"_{cfg['constructed']['kind']}" if cfg.get("constructed") else ""),
            cfg["model"],
            cfg["method"],
            f"{opt['name']}{_slug_number(opt['lr'])}",
            sched["name"],
            f"wd{_slug_number(opt['weight_decay'])}",
            f"e{cfg['epochs']}",
            f"s{cfg['seed']}",
        ]
    )
    return f"{slug}-{run_key(cfg)}"


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


def method_definition(params: Mapping, name: str, _seen: tuple[str, ...] = ()) -> dict:
    """A method's params entry with its `base` chain merged in (the derived method wins)."""
    methods = params["methods"]
    if name not in methods:
        raise ConfigError(f"unknown method {name!r}; defined in params 'methods': {', '.join(sorted(methods))}")
    if name in _seen:
        raise ConfigError(f"method {name!r}: circular `base` chain {' -> '.join([*_seen, name])}")
    method = copy.deepcopy(dict(methods[name] or {}))
    base = method.pop("base", None)
    if base is None:
        return method
    return deep_merge(method_definition(params, base, (*_seen, name)), method)


def resolve_method(params: Mapping, name: str) -> dict:
    """The policies of a method (study.train.policies), fractions resolved; without the
    run-level keys `train` and `init_from` (run_config puts those into the run)."""
    method = method_definition(params, name)
    method.pop("train", None)
    method.pop("init_from", None)
    adv = method.get("adversary")
    if adv:
        for key in ("eps", "alpha"):
            adv[key] = parse_fraction(adv[key])
    return method


def resolve_evaluation(params: Mapping, name: str, dataset: str | None = None) -> dict:
    """One evaluation's settings, with `per_dataset[dataset]` applied when a dataset is given."""
    if dataset is not None:
        params = dataset_params(params, dataset)
    if name not in params["evaluations"]:
        raise ConfigError(f"unknown evaluation {name!r}; defined: {', '.join(sorted(params['evaluations']))}")
    ev = copy.deepcopy(dict(params["evaluations"][name]))
    for key in ("eps", "alpha"):
        if key in ev:
            ev[key] = parse_fraction(ev[key])
    ev["name"] = name
    ev.setdefault("test_per_class", params["evaluate"].get("test_per_class"))
    ev.setdefault("batch_size", params["evaluate"].get("batch_size", 256))
    ev.setdefault("seed", params["evaluate"].get("seed", 0))
    return ev


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
    epoch_eval = copy.deepcopy(train["epoch_eval"])
    if epoch_eval.get("attack"):
        epoch_eval["attack"] = resolve_evaluation(params, epoch_eval["attack"])
        for key in ("test_per_class", "batch_size", "name"):
            epoch_eval["attack"].pop(key, None)
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
        "epoch_eval": epoch_eval,
        "seed": int(seed),
    }
    if dataset == "synthetic":
        cfg["synthetic"] = params["data"]["synthetic"]
    # Keys below appear only when used, so runs without them keep their run ids.
    if train.get("validation"):
        cfg["validation"] = {"fraction": float(train["validation"]["fraction"])}
    if definition.get("init_from"):
        # The parent's run id (slug + hash of its config) is part of the child's config:
        # a changed parent is a new child.
        cfg["init_from"] = run_id(run_config(params, group, model, definition["init_from"], seed,
                                             dataset=dataset, cell=cell))
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


# Keys that only one optimizer reads; dropped for the other so an Adam run's config does not
# claim an SGD momentum (SGD configs keep exactly their keys, so their run ids are unchanged).
_OPTIMIZER_ONLY = {"sgd": ("betas",), "adam": ("momentum", "nesterov")}


def _resolved_optimizer(opt: Mapping) -> dict:
    out = {**opt, "lr": float(opt["lr"]), "weight_decay": float(opt["weight_decay"])}
    for key in _OPTIMIZER_ONLY.get(out["name"], ()):
        out.pop(key, None)
    return out


def plan_runs(params: Mapping) -> list[RunSpec]:
    """Expand the experiment groups into runs; a run shared by two groups appears once.

    Order: groups as written, then dataset, grid cell, model, method, seed.
    """
    runs: dict[str, RunSpec] = {}
    checkpoints: dict[str, set[str]] = {}
    for group in params["experiments"]:
        cells = grid_combinations(group)
        for dataset in group_datasets(group):
            dparams = dataset_params(params, dataset)
            evaluations = list(group.get("evaluations", dparams["evaluate"]["default"]))
            for cell in cells:
                for model in group["models"]:
                    for method in group["methods"]:
                        for seed in group["seeds"]:
                            for cfg in _run_chain(params, group, model, method, seed, dataset, cell):
                                rid = run_id(cfg)
                                spec = runs.setdefault(rid, RunSpec(rid, cfg))
                                if group["group"] not in spec.groups:
                                    spec.groups.append(group["group"])
                                for ev in evaluations:
                                    if ev not in spec.evaluations:
                                        spec.evaluations.append(ev)
                                has_val = bool(cfg.get("validation"))
                                wanted = group.get("checkpoints", ["last", "best"] if has_val else ["last"])
                                if "best" in wanted and not has_val:
                                    raise ConfigError(f"experiment group {group['group']!r}: checkpoint 'best' "
                                                      "needs a validation split (train.validation)")
                                checkpoints.setdefault(rid, set()).update(wanted)
    if params.get("features"):
        base = list(runs.values())
        # The source models are compared with the models trained on their datasets, so they
        # get the same evaluations.
        extra = params["features"]["train"]["evaluations"]
        for con in constructions(params, base):
            con.source_run.evaluations += [e for e in extra if e not in con.source_run.evaluations]
        for spec in feature_runs(params, base):
            runs.setdefault(spec.run_id, spec)
    for rid, spec in runs.items():
        spec.checkpoints = [c for c in ("last", "best") if c in checkpoints.get(rid, {"last"})]
    return list(runs.values())


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
    from the standard one (Ilyas et al. 2019)."""
    from study.features.build import settings_key
    from study.features.construct import KINDS

    feats = params["features"]
    out = []
    for kind in feats["datasets"]:
        if kind not in KINDS:
            raise ConfigError(f"features.datasets: unknown {kind!r}; valid: {', '.join(KINDS)}")
        role = "robust" if kind == "d_r" else "standard"
        source = _feature_source(params, runs, role)
        settings = copy.deepcopy(dict(feats["construct"]))
        out.append(Construction(kind, settings_key(kind, {role: source.run_id}, settings), source, settings))
    return out


def feature_runs(params: Mapping, runs: list[RunSpec]) -> list[RunSpec]:
    """Standard training on each constructed dataset, evaluated on the real test set."""
    feats = params["features"]
    train = feats["train"]
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
