"""The plan: the experiment groups expanded into runs (dataset x grid cell x model x method
x seed, plus the runs a fine-tuning method starts from), the constructed feature datasets,
and the runs trained on them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from study.checkpoints import CHECKPOINTS
from study.config.core import ConfigError, deep_merge
from study.config.grid import grid_combinations
from study.config.methods import method_entry, resolve_evaluation, resolve_method
from study.config.protocols import published_selection
from study.config.spec import ConfigSpec, construction_key
from study.config.types import (
    ExperimentGroup,
    Features,
    FeatureTrain,
    MethodEntry,
    OptimizerSettings,
    Params,
    RunConfig,
    Tf32Settings,
    TrainSettings,
    ZooModel,
    ZooRunConfig,
    parse,
)

# Keys that only one optimizer reads; dropped for the other so an Adam run's config does not
# claim an SGD momentum (SGD configs keep exactly their keys, so their run ids are unchanged).
_OPTIMIZER_ONLY = {"sgd": ("betas",), "adam": ("momentum", "nesterov")}


@dataclass
class RunSpec:
    #: a trained run's spec.run_id; a zoo model's its own (study.config.zoo.zoo_run_id)
    run_id: str
    #: the run config, typed (parsed once, where the plan makes it)
    spec: ConfigSpec
    groups: list[str] = field(default_factory=list)
    evaluations: list[str] = field(default_factory=list)
    #: checkpoints to evaluate: `last` (model.pt), for runs with a validation split `best`
    #: (model_best.pt, chosen on validation), for runs that keep one `published`
    #: (model_published.pt, the published protocol on the test subset)
    checkpoints: list[str] = field(default_factory=lambda: ["last"])
    #: the kinds of its experiment groups (`mitigation`: figure 13's runs, checked by default)
    kinds: list[str] = field(default_factory=list)

    @property
    def config(self) -> Mapping:
        """The run config's canonical form (a new dict): its hash is the run id's, config.json holds it.
        Kept for writing it out only (the train and zoo rules pass it to `--run-config`, `study plan
        --json` prints it); a reader of its values reads the typed `run`."""
        return self.spec.identity

    @property
    def run(self) -> RunConfig | ZooRunConfig:
        """The run config, typed."""
        return self.spec.config

    @property
    def trained(self) -> RunConfig | None:
        """The typed run config of a run trained here (None: a zoo model's)."""
        return self.run if isinstance(self.run, RunConfig) else None

    @property
    def zoo(self) -> ZooModel:
        """The model a zoo run evaluates (a run of plan_zoo; a TypeError for a run trained here)."""
        if not isinstance(self.run, ZooRunConfig):
            raise TypeError(f"run {self.run_id} is trained here, not a zoo model")
        return self.run.zoo

    @property
    def init_from(self) -> str | None:
        return self.trained.init_from if self.trained is not None else None

    @property
    def dataset(self) -> str:
        return self.run.dataset

    @property
    def variant(self) -> str:
        return self.run.data_variant


def _resolved_optimizer(raw: Mapping, opt: OptimizerSettings) -> dict:
    """The optimizer as written (a run config records the keys given, so defaults never change
    a run id), lr and weight decay as floats, the other optimizer's keys dropped."""
    out = {**raw, "lr": float(opt.lr), "weight_decay": float(opt.weight_decay)}
    for key in _OPTIMIZER_ONLY[opt.name]:
        out.pop(key, None)
    return out


def _training_attack(params: Params, name: str) -> dict:
    """An evaluation's attack as the engine runs it on the epoch's subsets (no test-set keys)."""
    attack = resolve_evaluation(params, name)
    for key in ("test_per_class", "batch_size", "name"):
        attack.pop(key, None)
    return attack


def _epoch_eval(params: Params, train: TrainSettings, definition: MethodEntry) -> dict:
    """The per-epoch evaluation of a run, its attacks resolved: `attack` on the test subset
    and the validation split, `validation_attack` on the validation split where the method
    names its own (FRL's reference drives its multipliers with PGD-20)."""
    epoch_eval = train.epoch_eval.model_dump(exclude_unset=True)
    if train.epoch_eval.attack:
        epoch_eval["attack"] = _training_attack(params, train.epoch_eval.attack)
    if definition.validation_attack:
        epoch_eval["validation_attack"] = _training_attack(params, definition.validation_attack)
    return epoch_eval


def feature_group(dataset: str, train: FeatureTrain) -> ExperimentGroup:
    """The runs trained on a constructed dataset (features.train), as a group the plan expands."""
    return ExperimentGroup(group="features", dataset=dataset, models=[train.model], methods=[train.method],
                           seeds=list(train.seeds), train=dict(train.train))


def train_settings(params: Params, group: ExperimentGroup, method: str, dataset: str,
                   cell: Mapping | None = None) -> tuple[dict, TrainSettings]:
    """The train section of a run as written (params', the dataset's, the group's, its grid
    cell's, the method's, merged in that order) and as typed: an unknown or bad key of any of
    them fails here, naming the group and method."""
    params = params.for_dataset(dataset)
    definition = method_entry(params, method)
    # the keys set: a run config copies its schedule, augment and optimizer keys (defaults never name a run)
    raw = deep_merge(deep_merge(params.train.set_fields(), group.train), cell or {})
    # A fine-tuning method (FRL) brings its own schedule, over the group's settings.
    raw = deep_merge(raw, definition.train or {})
    return raw, parse(TrainSettings, raw, f"experiment group {group.group!r} on {dataset}, method {method!r}: train")


def run_config(
    params: Params,
    group: ExperimentGroup,
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
    dataset = dataset if dataset is not None else group.dataset_names[0]
    raw, train = train_settings(params, group, method, dataset, cell)
    params = params.for_dataset(dataset)
    definition = method_entry(params, method)
    cfg = {
        "dataset": dataset,
        "data_variant": params.variant(dataset),
        "train_per_class": train.train_per_class,
        "model": model,
        "method": method,
        "method_config": resolve_method(params, method),
        "optimizer": _resolved_optimizer(raw["optimizer"], train.optimizer),
        "schedule": raw["schedule"],
        "epochs": train.epochs,
        "batch_size": train.batch_size,
        "augment": raw["augment"],
        "epoch_eval": _epoch_eval(params, train, definition),
        "seed": int(seed),
    }
    return {**cfg, **_used_only(params, group, model, definition, seed, dataset, cell, train)}


def _used_only(params: Params, group: ExperimentGroup, model: str, definition: MethodEntry, seed: int,
               dataset: str, cell: Mapping | None, train: TrainSettings) -> dict:
    """The keys of a run config that appear only when used, so runs without them keep their run ids."""
    extra: dict = {}
    if dataset == "synthetic":
        extra["synthetic"] = params.data.synthetic.set_fields()
    if train.validation is not None:
        extra["validation"] = train.validation.model_dump()
        # the checkpoint rule is the comparison's (the group's train.selection), the same for
        # every method of the group, baselines included
        extra["selection"] = train.selection.model_dump()
    if (published := published_selection(train, f"experiment group {group.group!r} on {dataset}")) is not None:
        # the published protocol's checkpoint (model_published.pt): only runs that keep one name it
        extra["published_selection"] = published.model_dump()
    if train.precision != "fp32":
        extra["precision"] = train.precision
    # the default (PyTorch's, the references': cuDNN in TF32, matmuls in fp32) goes unnamed: ids kept
    if train.tf32 != Tf32Settings():
        extra["tf32"] = train.tf32.model_dump()
    if train.threads != 1:
        extra["threads"] = train.threads
    if definition.init_from:
        # The parent's run id (slug + hash of its config) is part of the child's config:
        # a changed parent is a new child.
        parent = run_config(params, group, model, definition.init_from, seed, dataset=dataset, cell=cell)
        extra["init_from"] = ConfigSpec.parse(parent, f"run config of method {definition.init_from!r}").run_id
        # FRL's reference fine-tunes its best pre-trained model: the parent's best checkpoint
        # where the parent has a validation split to choose it on, else its last.
        extra["init_checkpoint"] = "best" if "validation" in parent else "last"
    return extra


def _run_chain(params: Params, group: ExperimentGroup, model: str, method: str, seed: int, dataset: str,
               cell: Mapping) -> list[tuple[str, dict]]:
    """(method, config) of a run and of the runs it fine-tunes (its init_from chain), parents first."""
    chain = [method]
    while (parent := method_entry(params, chain[-1]).init_from) is not None:
        if parent in chain:
            raise ConfigError(f"method {method!r}: circular init_from chain {chain + [parent]}")
        chain.append(parent)
    return [(name, run_config(params, group, model, name, seed, dataset=dataset, cell=cell))
            for name in reversed(chain)]


def _group_configs(params: Params, group: ExperimentGroup) -> Iterator[tuple[str, str, dict]]:
    """(dataset, method, run config) of every run a group needs, fine-tuning parents first."""
    cells = grid_combinations(group)
    for dataset in group.dataset_names:
        for cell in cells:
            for model in group.models:
                for method in group.methods:
                    for seed in group.seeds:
                        for name, cfg in _run_chain(params, group, model, method, seed, dataset, cell):
                            yield dataset, name, cfg


#: what a run config needs for each checkpoint it may be evaluated at, and the setting that gives it
_CHECKPOINT_NEEDS = {"best": ("validation", "a validation split (train.validation)"),
                     "published": ("published_selection", "the published protocol (train.published_selection)")}


def _wanted_checkpoints(group: ExperimentGroup, cfg: Mapping) -> list[str]:
    kept = ["last", *(c for c, (key, _) in _CHECKPOINT_NEEDS.items() if key in cfg)]
    wanted = group.checkpoints or kept
    for checkpoint in wanted:
        if checkpoint not in kept:
            raise ConfigError(f"experiment group {group.group!r}: checkpoint {checkpoint!r} "
                              f"needs {_CHECKPOINT_NEEDS[checkpoint][1]}")
    return list(wanted)


def plan_runs(params: Params) -> list[RunSpec]:
    """Expand the experiment groups into runs; a run shared by two groups appears once.

    Order: groups as written, then dataset, grid cell, model, method, seed.
    """
    runs: dict[str, RunSpec] = {}
    checkpoints: dict[str, set[str]] = {}
    defaults = {dataset: entry.evaluate.default for dataset, entry in params.per_dataset.items()
                if entry.evaluate is not None and entry.evaluate.default is not None}
    for group in params.experiments:
        for dataset, method, cfg in _group_configs(params, group):
            evaluations = group.evaluations or defaults.get(dataset) or params.evaluate.default
            parsed = ConfigSpec.parse(cfg, f"experiment group {group.group!r}, method {method!r}: run config")
            rid = parsed.run_id
            spec = runs.setdefault(rid, RunSpec(rid, parsed))
            if method not in group.methods:
                # a parent that the group's methods fine-tune but that it does not list (a
                # fine-tune may start from another group's PGD-AT model): trained, not one of
                # the group's runs (a group compares what it lists: FRL's groups list `at`)
                continue
            if group.group not in spec.groups:
                spec.groups.append(group.group)
            if group.kind not in spec.kinds:
                spec.kinds.append(group.kind)
            for ev in evaluations:
                if ev not in spec.evaluations:
                    spec.evaluations.append(ev)
            checkpoints.setdefault(rid, set()).update(_wanted_checkpoints(group, cfg))
    if params.features is not None:
        _add_feature_runs(params, runs)
    for rid, spec in runs.items():
        spec.checkpoints = [c for c in CHECKPOINTS if c in checkpoints.get(rid, {"last"})]
    return list(runs.values())


def _add_feature_runs(params: Params, runs: dict[str, RunSpec]) -> None:
    base = list(runs.values())
    # The source models are compared with the models trained on their datasets, so they
    # get the same evaluations.
    extra = _features(params).train.evaluations
    for con in constructions(params, base):
        con.source_run.evaluations += [e for e in extra if e not in con.source_run.evaluations]
    for spec in feature_runs(params, base):
        runs.setdefault(spec.run_id, spec)


def _features(params: Params) -> Features:
    features = params.features
    if features is None:
        raise ConfigError("params have no `features` section: no constructed datasets are planned")
    return features


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


def _feature_source(params: Params, runs: list[RunSpec], role: str) -> RunSpec:
    src = getattr(_features(params).sources, role)
    for run in runs:
        c = run.run
        if (src.group in run.groups and c.model == src.model and c.method == src.method
                and c.seed == src.seed and not (isinstance(c, RunConfig) and c.constructed is not None)):
            return run
    raise ConfigError(
        f"features.sources.{role}: no run of group {src.group!r} with model {src.model!r}, "
        f"method {src.method!r} and seed {src.seed}; add it to that experiment group"
    )


def constructions(params: Params, runs: list[RunSpec]) -> list[Construction]:
    """The constructed datasets of the study: D_R from the robust source model, the others
    from the standard one (Ilyas et al. 2019)."""
    feats = _features(params)
    out = []
    for kind in feats.datasets:
        role = "robust" if kind == "d_r" else "standard"
        source = _feature_source(params, runs, role)
        # the settings set (their hash names the constructed file: a default added later renames none)
        settings = feats.construction.set_fields()
        out.append(Construction(kind, construction_key(kind, {role: source.run_id}, settings), source, settings))
    return out


def feature_runs(params: Params, runs: list[RunSpec]) -> list[RunSpec]:
    """Standard training on each constructed dataset, evaluated on the real test set."""
    train = _features(params).train
    specs = []
    for con in constructions(params, runs):
        group = feature_group(con.source_run.dataset, train)
        for seed in train.seeds:
            cfg = {**run_config(params, group, train.model, train.method, seed),
                   "train_per_class": None,  # the constructed set is already the chosen subset
                   "constructed": {"kind": con.kind, "key": con.key, "source_run": con.source_run.run_id}}
            parsed = ConfigSpec.parse(cfg, f"features.train on {con.name}: run config")
            specs.append(RunSpec(parsed.run_id, parsed, ["features"], list(train.evaluations)))
    return specs


def prepared_name(dataset: str, variant: str) -> str:
    return f"{dataset}-{variant}"
