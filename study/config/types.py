"""The types of the study's configuration: params.yaml (merged with a preset) and its parts,
the evaluations, and the run config that `study train --run-config` receives.

Every default of a setting is written here, once; the library reads attributes of these
models instead of string keys. The JSON schema that params.yaml is validated against
(workflow/schemas/params.schema.yaml) is generated from `Params` (tools/params_schema.py).

Sections that presets and per-dataset entries override in part (a method's entry completed by
its `base`, a group's `train` over the train section) are typed where they are complete: a
method once its `base` chain is merged (`Method`), the train settings of a run once the group's
and the method's overrides are merged in (`TrainSettings`). Names of models and datasets are
checked against their registries (study.config.params), not listed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from study.config.core import ConfigError, merge_dataset_sections
from study.config.evaluations import ByKind, Evaluation, EvaluationOverride
from study.config.fields import Checkpoint, Config, EvalBatch, Fraction, Norm, PositiveInt
from study.models.registry import MODELS

# ---------------------------------------------------------------- closed sets of names

BnMode = Literal["train", "eval"]
OptimizerName = Literal["sgd", "adam"]
ScheduleName = Literal["step", "cyclic", "constant"]
SelectionScore = Literal["mean", "mean_plus_worst", "worst"]
Precision = Literal["fp32", "bf16"]
#: `plain`: a comparison of the class-wise figures; `mitigation`: figure 13's methods, checked
#: against false robustness by default and kept out of the other figures
GroupKind = Literal["plain", "mitigation"]
FeatureDataset = Literal["d_r", "d_nr", "d_rand", "d_det"]
ThreatModel = Literal["Linf", "L2", "corruptions"]
Corruption = Literal[
    "gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise", "gaussian_blur", "defocus_blur",
    "zoom_blur", "contrast", "brightness", "saturate", "jpeg_compression", "pixelate", "glass_blur",
    "motion_blur", "snow", "frost", "fog", "spatter", "elastic_transform"]
#: a figure of the catalog (study.figures.catalog.FIGURES): checked against it by the schema, whose
#: enum the schema writer (tools/params_schema.py) takes from the catalog, which this layer cannot read
FigureName = str
BenchTask = Literal["standard_epoch", "pgd10_at_epoch", "trades_epoch", "pgd20_eval", "autoattack_eval"]

NameList = Annotated[list[str], Field(min_length=1)]

# Names and paths that become part of a file name, a Snakemake wildcard or a rule's command line
# have a pattern: the shell commands quote every word anyway (workflow/rules), but a name that
# Snakemake reads as a pattern ({braces}) or a shell as code has no business in a file name.
#: an evaluation's name: its record files (<evaluation>.parquet) and the rules' `evaluation` wildcard
EVALUATION_NAME = r"^[A-Za-z0-9_]+$"
#: a method's name: part of its runs' ids and of the figures' file names, where "__" separates fields
METHOD_NAME = r"^[a-z0-9]+(_[a-z0-9]+)*$"
#: a folder the study writes into or reads from (data.root, the mirror, the weights folder):
#: letters, digits, spaces and _ . , + = @ % : / - (no quotes, $, `, ;, braces, glob characters)
PATH_PATTERN = r"^[A-Za-z0-9_.,+=@%:/ -]+$"
EvaluationName = Annotated[str, Field(pattern=EVALUATION_NAME)]
MethodName = Annotated[str, Field(pattern=METHOD_NAME)]
PathName = Annotated[str, Field(pattern=PATH_PATTERN)]
Share = Annotated[float, Field(ge=0, lt=1)]
#: a class index, or `weakest` (lowest robust accuracy in the previous epoch)
ClassChoice = Annotated[int, Field(ge=0)] | Literal["weakest"]
#: CFA (PKU-ML/CFA train.py, --begin 10) calibrates class-wise eps and beta only after 10 of
#: its 200 epochs; as a share of the run, short presets keep a calibrated phase.
CFA_WARMUP = 0.05
#: DAFA (rucy74/DAFA train.py, --dafa_warmup 70) computes its class weights once, after its
#: 70th epoch of 110 (30 epochs before the first decay at lr 0.1); under the protocol's 200
#: epochs (decays at 100 and 150) the same 70th epoch, 30 before the first decay: 0.35.
DAFA_WARMUP = 0.35


# ---------------------------------------------------------------- evaluations

class EvaluateSettings(Config):
    """Defaults of every evaluation (params `evaluate`)."""

    #: the evaluations of every run whose group lists none of its own
    default: NameList
    test_per_class: PositiveInt | None = None
    batch_size: EvalBatch = "auto"
    seed: int = 0


# ---------------------------------------------------------------- methods and their policies

class AdversaryOverride(Config):
    """A method's training attack, in part (a derived method's entry completes its `base`'s)."""

    type: Literal["pgd", "fat"] | None = None
    norm: Norm | None = None
    eps: Fraction | None = None
    alpha: Fraction | None = None
    steps: Annotated[int, Field(ge=0)] | None = None
    restarts: PositiveInt | None = None
    random_start: bool | None = None
    bn_mode: BnMode | None = None
    #: FAT's extra steps after the first misclassification
    tau: Annotated[int, Field(ge=0)] | None = None
    #: start from x + start_std * N(0, 1) (TRADES' 0.001) instead of uniform in the eps-ball
    start_std: Annotated[float, Field(ge=0)] | None = None
    #: FAT's omega: N(0, 1) noise of this scale added every step
    step_noise: Annotated[float, Field(ge=0)] | None = None
    #: the train-mode forwards of a step after the attack, in the order of the method's reference
    #: loop (study/train/step.py:bn_forwards); default: the loss's forwards, [adv] or [adv, clean]
    bn_stats: Annotated[list[Literal["adv", "clean", "step"]], Field(min_length=1)] | None = None
    #: step size under class-wise eps: fixed alpha (CFA, FAIR-TAT), alpha * eps_i / eps per
    #: sample, or alpha * max(eps_i) / eps for the batch (FRL reweight+remargin)
    alpha_scaling: Literal["fixed", "sample", "batch_max"] | None = None


class Adversary(Config):
    """A method's training attack, complete (its `base` chain merged)."""

    type: Literal["pgd", "fat"] = "pgd"
    norm: Norm = "linf"
    eps: Fraction
    alpha: Fraction
    steps: Annotated[int, Field(ge=0)]
    restarts: PositiveInt = 1
    random_start: bool = True
    bn_mode: BnMode = "train"
    tau: Annotated[int, Field(ge=0)] | None = None
    start_std: Annotated[float, Field(ge=0)] | None = None
    step_noise: Annotated[float, Field(ge=0)] = 0.0
    bn_stats: Annotated[list[Literal["adv", "clean", "step"]], Field(min_length=1)] | None = None
    alpha_scaling: Literal["fixed", "sample", "batch_max"] = "fixed"


# The policies' defaults: each setting is read by one policy type of its kind (study/train/policies).

class TargetsPolicy(Config):
    type: Literal["untargeted", "uniform", "cfp", "fixed", "trix"] = "untargeted"
    #: cfp: softmax temperature over the confusion counts
    temperature: Annotated[float, Field(ge=0)] = 2.0
    #: fixed: the target class
    class_: ClassChoice = Field("weakest", alias="class")
    #: trix: DAFA's lambda in the per-batch split into targeted and untargeted samples
    lambda_: Annotated[float, Field(ge=0)] = Field(1.0, alias="lambda")


class EpsilonPolicy(Config):
    type: Literal["fixed", "cfa", "remargin", "dafa"] = "fixed"
    #: cfa: weight of the class's own accuracy in its eps
    lambda_: float = Field(0.5, alias="lambda")
    #: cfa: share of the epochs run at the base eps before calibrating (at least one epoch)
    warmup: Share = CFA_WARMUP
    #: remargin: rate, threshold, scale and bounds of the eps multipliers
    rate: Annotated[float, Field(ge=0)] = 0.1
    tau: float = 0.05
    scale: float = 2.0
    low: Annotated[float, Field(gt=0)] = 0.98
    high: Annotated[float, Field(gt=0)] = 2.5


class LossPolicy(Config):
    type: Literal["ce", "trades", "mixed"] = "ce"
    beta: Annotated[float, Field(ge=0)] = 6.0
    #: trades: CFA's class-wise beta calibration (None: a fixed beta)
    lambda2: float | None = None
    #: trades: CE / (1 + beta) + beta / (1 + beta) KL, as CFA's code (None: true with lambda2, else false)
    normalize: bool | None = None
    #: trades with lambda2: share of the epochs run with the base beta before calibrating
    warmup: Share = CFA_WARMUP
    #: mixed: weight of the adversarial term
    adv_weight: Annotated[float, Field(ge=0, le=1)] = 0.5


class WeightsPolicy(Config):
    type: Literal["none", "balanced", "static", "boost", "frl", "dafa", "faal", "wat"] = "none"
    #: static: the class costs (required there)
    values: list[Annotated[float, Field(gt=0)]] | None = None
    #: boost: the boosted class and its factor
    class_: ClassChoice = Field("weakest", alias="class")
    factor: Annotated[float, Field(gt=0)] = 2.0
    #: frl: rate of the natural multipliers, halved every `halve_every` epochs
    rate: Annotated[float, Field(ge=0)] = 0.05
    halve_every: PositiveInt = 40
    #: frl: rate of the boundary multipliers (None: 2 x rate)
    boundary_rate: Annotated[float, Field(ge=0)] | None = None
    #: frl: each weighted loss term over its batch weight sum, or both over the sum of both
    normalize: Literal["separate", "joint"] = "separate"
    #: frl: the fairness tolerance and the multipliers' bound
    tau: float = 0.05
    bound: Annotated[float, Field(ge=0)] = 0.5
    #: dafa: the scale of the weight moved between two classes (DAFA's 1.0 on CIFAR-10, 1.5 on CIFAR-100)
    lambda_: Annotated[float, Field(ge=0)] = Field(1.0, alias="lambda")
    #: dafa: the weights come from the training outputs of the epoch that ends this share of the run
    warmup: Share = DAFA_WARMUP
    #: dafa: that epoch as a count (DAFA's --dafa_warmup 70), over `warmup`: a recipe that follows the
    #: reference at its own length (110 epochs in DAFA's scripts, 150 in TRIX's) keeps the same epoch
    warmup_epoch: PositiveInt | None = None
    #: faal: the radius of the KL ball around the uniform class distribution (FAAL's --scale 0.5)
    radius: Annotated[float, Field(ge=0)] = 0.5
    #: wat: the Hedge learning rate on the cumulative validation losses
    eta: Annotated[float, Field(ge=0)] = 0.1


class AveragingPolicy(Config):
    type: Literal["none", "ema", "fawa"] = "none"
    decay: Share = 0.85
    #: first averaged epoch as a fraction of the epochs
    start: Annotated[float, Field(ge=0, le=1)] = 0.25
    #: fawa: the worst-class accuracy an epoch needs to be averaged (CFA's 0.2)
    threshold: Annotated[float, Field(ge=0, le=1)] = 0.2


class RegularizerPolicy(Config):
    type: Literal["none", "cosine"] = "none"
    coef: Annotated[float, Field(ge=0)] = 0.1


class _Policies(Config):
    targets: TargetsPolicy | None = None
    epsilon: EpsilonPolicy | None = None
    loss: LossPolicy | None = None
    weights: WeightsPolicy | None = None
    averaging: AveragingPolicy | None = None
    regularizer: RegularizerPolicy | None = None


class MethodEntry(_Policies):
    """A method as params 'methods' writes it: its policies (study/train/policies), in part
    when it extends a `base` method."""

    adversary: AdversaryOverride | None = None
    #: the method whose entry this one extends (deep merge, this entry wins)
    base: str | None = None
    #: the method whose run (same group, model, seed) this one fine-tunes
    init_from: str | None = None
    #: the evaluation run on the validation split each epoch (default: train.epoch_eval.attack)
    validation_attack: str | None = None
    #: overrides of the train section for this method
    train: dict[str, Any] | None = None
    #: the method it is compared with in figure 13 and the reproduction report (default: the
    #: nearest plain method of its base chain)
    compare_with: str | None = None
    #: what differs between this method's runs and those of the method it is compared with:
    #: policies, policy fields (`adversary.bn_stats`), `init_from`, `validation_attack`,
    #: `train.<setting>` (study.config.comparisons checks it against the run configs)
    differs_in: Annotated[list[str], Field(min_length=1)] | None = None


class Method(_Policies):
    """A method's policies as a run config holds them (`method_config`): its `base` chain
    merged, fractions resolved, the run-level keys moved into the run."""

    adversary: Adversary | None = None


# ---------------------------------------------------------------- training

class OptimizerSettings(Config):
    name: OptimizerName
    lr: Annotated[float, Field(gt=0)]
    weight_decay: Annotated[float, Field(ge=0)]
    momentum: Annotated[float, Field(ge=0, le=1)] = 0.9
    nesterov: bool = False
    betas: Annotated[tuple[float, float], Field()] = (0.9, 0.999)


class ScheduleSettings(Config):
    """step: lr x gamma at each milestone (a fraction of the epochs); cyclic: one linear
    up-and-down cycle peaking at `peak` of the run; constant."""

    name: ScheduleName
    milestones: list[Annotated[float, Field(gt=0, lt=1)]] = [0.5, 0.75]
    gamma: Annotated[float, Field(gt=0)] = 0.1
    peak: Annotated[float, Field(gt=0, lt=1)] = 0.4


class AugmentSettings(Config):
    #: random crop with this zero padding (0: no crop)
    crop_padding: Annotated[int, Field(ge=0)] = 0
    flip: bool = False


class EpochEvalSettings(Config):
    """The class-wise records after every epoch, on a fixed test subset (params form)."""

    per_class: PositiveInt
    #: the evaluation (of params 'evaluations') run on the subset and the validation split
    attack: str | None = None


class Tf32Settings(Config):
    cudnn: bool = True
    matmul: bool = False


class SelectionSettings(Config):
    """How model_best.pt is chosen on the validation split: one rule per comparison."""

    #: mean robust accuracy, or mean plus worst-class (CFA's index)
    score: SelectionScore = "mean"
    #: eligible epochs: epoch > from_epoch * epochs (CFA: 101 of 200 is the first at 0.5)
    from_epoch: Annotated[float, Field(ge=0, le=1)] = 0.0


class PublishedSelection(Config):
    """The published protocol: how CFA's code (Wei et al. 2023, PKU-ML/CFA train.py) chose the
    checkpoints behind its Table 1, kept as model_published.pt beside the study's own best. It
    reads the TEST subset's per-epoch records (robust accuracy under train.epoch_eval.attack),
    so a value it picks is biased upwards and is only ever set beside a published best value,
    never compared as equal with a value chosen on validation (docs/methods.md)."""

    #: CFA's index: mean plus worst-class robust accuracy (or the mean alone; `worst`: the worst class
    #: alone, TRIX's "best worse robust class accuracy" checkpoint)
    index: SelectionScore = "mean_plus_worst"
    #: candidates: eligible epochs whose index is within `band` of the best index so far
    #: (CFA saves each as a file; the highest index is the one chosen)
    band: Annotated[float, Field(ge=0, le=1)] = 0.02
    #: eligible epochs: epoch > from_epoch * epochs (CFA's `epoch >= 0.5 * args.epochs`, 0-based);
    #: below 1, so the last epoch is always eligible
    from_epoch: Annotated[float, Field(ge=0, lt=1)] = 0.5


class ValidationFraction(Config):
    fraction: Annotated[float, Field(gt=0, lt=1)]


class ValidationPerClass(Config):
    #: images held out per class (CFA: 25 on CIFAR-100)
    per_class: PositiveInt


Validation = ValidationFraction | ValidationPerClass


class TrainSettings(Config):
    """The train section (params.yaml's, merged with the dataset's, the group's and the method's)."""

    #: None: the whole training set
    train_per_class: PositiveInt | None = None
    epochs: PositiveInt
    batch_size: PositiveInt
    #: training arithmetic on a GPU: fp32 as the reference codes, or bf16 autocast
    precision: Precision = "fp32"
    #: TF32 on a GPU (Ampere+), set for every run
    tf32: Tf32Settings = Tf32Settings()
    #: CPU threads of a run's arithmetic on a CPU (training, and every evaluation of its model):
    #: a parallel reduction sums in another order on another count, so the count is the run's,
    #: never the job's cores; a run config names it only where it differs from 1
    threads: PositiveInt = 1
    selection: SelectionSettings = SelectionSettings()
    #: the published protocol's settings: runs that keep model_published.pt (None: none)
    published_selection: PublishedSelection | None = None
    optimizer: OptimizerSettings
    schedule: ScheduleSettings
    augment: AugmentSettings
    epoch_eval: EpochEvalSettings
    #: held-out validation split (per class): best checkpoint and FRL/FAWA statistics
    validation: Validation | None = None


# ---------------------------------------------------------------- data, groups, per dataset

class SyntheticData(Config):
    """Deterministic class-structured images, for tests."""

    train_per_class: PositiveInt = 200
    test_per_class: PositiveInt = 100
    image_size: Literal[16, 28, 32, 64] = 32
    seed: int = 0


class DataSettings(Config):
    root: PathName
    #: local folder searched before any download ($STUDY_DATA_MIRROR wins over it)
    mirror: PathName | None = None
    #: dataset -> variant (auto: the one the raw folder or the mirror holds)
    variants: dict[str, str] = {}
    synthetic: SyntheticData = SyntheticData()


_GROUP_NAME = r"^[A-Za-z0-9_]+$"
_DOTTED = r"^[A-Za-z_]+(\.[A-Za-z_]+)*$"


class DeclaredPair(Config):
    """A comparison a group declares beyond its methods' own (`compare_with`, the base chain): a
    method of the group against `control`, a method of the group or, where `control_group` names
    another group, of that group's runs (a cross-group pair: the report states what the arms'
    configs differ in). The reproduction report compares a claim's method with its control only
    along a declared pair (study.config.comparisons)."""

    method: Annotated[str, Field(pattern=METHOD_NAME)]
    control: Annotated[str, Field(pattern=METHOD_NAME)]
    control_group: Annotated[str, Field(pattern=_GROUP_NAME)] | None = None
    differs_in: Annotated[list[str], Field(min_length=1)]


class ExperimentGroup(Config):
    """An experiment group: every dataset x grid cell x model x method x seed is a run."""

    # one dataset, or a list of them (the group is run on each)
    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["dataset"]}, {"required": ["datasets"]}]})

    group: Annotated[str, Field(pattern=_GROUP_NAME)]
    kind: GroupKind = "plain"
    dataset: str | None = None
    datasets: NameList | None = None
    models: NameList
    methods: NameList
    seeds: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]
    #: default: evaluate.default
    evaluations: NameList | None = None
    #: overrides of the train section for this group
    train: dict[str, Any] = {}
    #: dotted path of the train section -> list of values; every combination is one setting
    #: (mapping values merge at their path)
    grid: Annotated[dict[Annotated[str, Field(pattern=_DOTTED)], Annotated[list, Field(min_length=1)]],
                    Field(min_length=1)] | None = None
    #: the checkpoints to evaluate (default: last, best where the runs have a validation split,
    #: published where they keep one, train.published_selection)
    checkpoints: Annotated[list[Checkpoint], Field(min_length=1)] | None = None
    #: pairs the group declares beyond its methods' own comparisons (DeclaredPair)
    compare: list[DeclaredPair] | None = None

    def model_post_init(self, context: Any) -> None:
        if (self.dataset is None) == (self.datasets is None):
            raise ValueError("give one `dataset` or a list of `datasets`")

    @property
    def dataset_names(self) -> list[str]:
        return list(self.datasets) if self.datasets is not None else [str(self.dataset)]


class DatasetMethodOverride(Config):
    adversary: AdversaryOverride | None = None
    #: a weight policy's settings on this dataset (DAFA's lambda: 1.0 on CIFAR-10, 1.5 on CIFAR-100),
    #: merged over the method's entry
    weights: WeightsPolicy | None = None


class DatasetEvaluateOverride(Config):
    default: NameList | None = None
    test_per_class: PositiveInt | None = None
    batch_size: PositiveInt | None = None


class DatasetSettings(Config):
    """Per-dataset settings (e.g. MNIST's PGD budget), merged over the named sections for every
    run on that dataset; an experiment group's own train/grid still win."""

    methods: dict[MethodName, DatasetMethodOverride] = {}
    evaluations: dict[EvaluationName, EvaluationOverride] = {}
    evaluate: DatasetEvaluateOverride | None = None
    #: overrides of the train section for runs on this dataset
    train: dict[str, Any] = {}


# ---------------------------------------------------------------- features

class SourceRun(Config):
    group: str
    model: str
    method: str
    seed: int


class FeatureSources(Config):
    """The runs the datasets are built with (standard -> D_NR, D_rand, D_det; robust -> D_R)."""

    standard: SourceRun
    robust: SourceRun


class Representation(Config):
    steps: Annotated[int, Field(ge=0)]
    step_size: Annotated[float, Field(gt=0)]


class Relabel(Config):
    eps: Annotated[float, Field(gt=0)]
    step_size: Annotated[float, Field(gt=0)]
    steps: Annotated[int, Field(ge=0)]


class Construct(Config):
    per_class: PositiveInt | None
    chunk_size: PositiveInt
    seed: int
    representation: Representation
    relabel: Relabel


class FeatureTrain(Config):
    model: str
    method: str
    seeds: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]
    evaluations: NameList
    #: overrides of the train section for these runs
    train: dict[str, Any] = {}


class Features(Config):
    """Robust / non-robust feature datasets (Ilyas et al. 2019) and the models trained on them."""

    sources: FeatureSources
    datasets: Annotated[list[FeatureDataset], Field(min_length=1)]
    construction: Construct = Field(alias="construct")
    train: FeatureTrain


# ---------------------------------------------------------------- robustness, zoo, speed, bench

class StrongPgd(Config):
    """The much stronger PGD of the more-steps check."""

    steps: PositiveInt = 100
    restarts: PositiveInt = 2


class Checks(Config):
    #: a PGD evaluation of 'evaluations' whose eps is swept
    reference: str
    per_class: PositiveInt
    eps_factors: Annotated[list[Annotated[float, Field(gt=0)]], Field(min_length=1)]
    #: a failed check fails the job
    strict: bool = True
    strong: StrongPgd = StrongPgd()
    #: groups whose runs are checked (default: the robustness groups and every mitigation group)
    groups: NameList | None = None


class Corruptions(Config):
    """CIFAR-10-C: the official archive if found, else regenerated (study/data/corruptions.py)."""

    #: groups evaluated (default: robustness.groups)
    groups: NameList | None = None
    datasets: NameList
    names: Annotated[list[Corruption], Field(min_length=1)]
    severities: Annotated[list[Literal[1, 2, 3, 4, 5]], Field(min_length=1)]
    #: None: the whole test set
    per_class: PositiveInt | None = None
    seed: int
    source: Literal["auto", "official", "regenerated"] = "auto"


class Robustness(Config):
    """Checks against false robustness, and CIFAR-10-C."""

    groups: NameList
    checks: Checks
    corruptions: Corruptions | None


class ZooEvaluations(Config):
    Linf: NameList | None = None
    L2: NameList | None = None
    corruptions: NameList | None = None


class ZooFigureEvaluations(Config):
    Linf: str | None = None
    L2: str | None = None
    corruptions: str | None = None


class ZooImageNet(Config):
    """The prepared ImageNet validation subset the ImageNet entries are evaluated on."""

    per_class: Annotated[int, Field(ge=1, le=50)] | None = None
    image_size: Annotated[int, Field(ge=32)] = 224


class ZooEntry(Config):
    #: the leaderboard's dataset
    dataset: Literal["cifar10", "cifar100", "imagenet"]
    threat_model: ThreatModel
    #: RobustBench's model ID, or torchvision's model builder (source torchvision)
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]+$")]
    #: who builds the network
    source: Literal["robustbench", "torchvision"] = "robustbench"
    #: source torchvision only (required there): its state dict's file in the weights folder
    file: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-/]+$")] | None = None
    #: the dataset it is evaluated on (default: its own; tests: synthetic)
    data: str | None = None
    variant: str | None = None
    evaluations: NameList | None = None


class Zoo(Config):
    """Models trained elsewhere (RobustBench's zoo, torchvision's ImageNet models), evaluated class-wise."""

    #: the weights folder (else $STUDY_WEIGHTS_DIR)
    weights_dir: PathName | None = None
    #: only the entries whose weights file is in the folder (a preset that must not grow)
    require_weights: bool = False
    imagenet: ZooImageNet = ZooImageNet()
    #: per threat model, for every entry that lists none of its own
    evaluations: ZooEvaluations = ZooEvaluations()
    #: the robust evaluation figures 15-17 draw, per threat model
    figure_evaluations: ZooFigureEvaluations = ZooFigureEvaluations()
    #: CIFAR-10-C for every entry evaluated on a dataset robustness.corruptions corrupts
    corruptions: bool = False
    #: the checks against false robustness for these threat models
    checks: list[ThreatModel] = []
    models: list[ZooEntry]


def _yaml11_off(value: Any) -> Any:
    # YAML 1.1 (PyYAML, hence params.yaml, Snakemake's --config and a value DVC's -S writes, as
    # this project reads them) reads an unquoted `off` as false: the same "off"
    return "off" if value is False else value


#: torch.compile of the training step: off (or YAML 1.1's false, an unquoted `off`), default, auto
CompileMode = Annotated[
    Literal["off", "default", "auto"], BeforeValidator(_yaml11_off),
    WithJsonSchema({"description": "off, default or auto (an unquoted `off`, which YAML 1.1 reads as false, is off)",
                    "enum": ["off", "default", "auto", False]}),
]


class Speed(Config):
    """How fast, never what: no setting here changes a run's id."""

    #: torch.compile of the training step
    compile: CompileMode = "auto"


class BenchSetting(Config):
    device: Literal["auto", "cpu", "cuda"]
    model: str
    #: prepared dataset file (default: synthetic data)
    data: PathName | None = None
    images: PositiveInt
    test_images: PositiveInt
    tasks: Annotated[list[BenchTask], Field(min_length=1)] | None = None
    batch_size: PositiveInt | None = None
    accuracy_epochs: Annotated[int, Field(ge=2)] | None = None
    seed: int | None = None


class Bench(Config):
    """`study bench` settings of the bench rules (results/bench/<name>.json)."""

    #: settings written by bench_all
    default: NameList
    settings: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9_]+$")], BenchSetting]


# ---------------------------------------------------------------- the whole

class Params(Config):
    """Configuration of the class-wise robustness study (params.yaml merged with a preset)."""

    preset: Annotated[str, Field(pattern=r"^[A-Za-z0-9_\-]+$")] | None
    data: DataSettings
    train: TrainSettings
    methods: Annotated[dict[MethodName, MethodEntry | None], Field(min_length=1)]
    evaluations: Annotated[dict[EvaluationName, Evaluation], Field(min_length=1)]
    evaluate: EvaluateSettings
    experiments: Annotated[list[ExperimentGroup], Field(min_length=1)]
    per_dataset: dict[str, DatasetSettings] = {}
    figures: list[FigureName]
    features: Features | None = None
    robustness: Robustness
    zoo: Zoo | None = None
    speed: Speed = Speed()
    bench: Bench | None = None
    #: run a plan whose estimated price on this machine exceeds the preflight's limit (a week:
    #: study.preflight.PRICE_LIMIT_HOURS) anyway; given on the command line, `--config confirm_price=true`
    confirm_price: bool = False

    #: the per-dataset views already parsed (`for_dataset`), so each is parsed once per process
    _views: dict[str, Params] = PrivateAttr(default_factory=dict)
    #: a per-dataset view's params (None: these are the params as loaded)
    _loaded: Params | None = PrivateAttr(default=None)

    def for_dataset(self, dataset: str) -> Params:
        """The params of runs on `dataset`: its `per_dataset` entry merged over the methods,
        evaluations, evaluate and train sections (self where it has none), parsed once. A view's
        view is the loaded params' view (an entry is merged once)."""
        loaded = self._loaded or self
        if dataset not in loaded.per_dataset:
            return loaded
        if dataset not in loaded._views:
            view: Params = parse(Params, merge_dataset_sections(loaded.set_fields(), dataset), "invalid configuration")
            view._loaded = loaded
            loaded._views[dataset] = view
        return loaded._views[dataset]

    def variant(self, dataset: str) -> str:
        """The variant of `dataset` the study uses (data.variants, else the registry's first)."""
        from study.data.registry import get_dataset_info

        return self.data.variants[dataset] if dataset in self.data.variants else get_dataset_info(dataset).variants[0]

    def group(self, name: str) -> ExperimentGroup:
        for group in self.experiments:
            if group.group == name:
                return group
        raise KeyError(f"unknown experiment group {name!r}; defined: {', '.join(g.group for g in self.experiments)}")

    def groups_of_kind(self, kind: GroupKind) -> list[str]:
        return [g.group for g in self.experiments if g.kind == kind]


# ---------------------------------------------------------------- the run config

class EpochEval(Config):
    """The per-epoch evaluation of a run, its attacks resolved."""

    per_class: PositiveInt
    attack: Evaluation | None = None
    #: the method's own attack on the validation split (FRL's PGD-20)
    validation_attack: Evaluation | None = None


class Constructed(Config):
    kind: FeatureDataset
    key: str
    source_run: str


def _known_model(name: str) -> str:
    if name not in MODELS:
        raise PydanticCustomError("unknown_model", "{name} is not one of {valid}",
                                  {"name": repr(name), "valid": ", ".join(MODELS)})
    return name


#: a model with a row in the model table (study.models.registry.MODELS): a trained run's price,
#: its job requests and its build read that row, so a run config cannot name a model without one
ModelName = Annotated[str, AfterValidator(_known_model)]


class RunConfig(Config):
    """The resolved, self-contained configuration of one training run (`study plan --json`'s
    `config`, `study train --run-config`, a run's config.json)."""

    dataset: str
    data_variant: str
    train_per_class: PositiveInt | None = None
    model: ModelName
    method: str
    method_config: Method
    optimizer: OptimizerSettings
    schedule: ScheduleSettings
    epochs: PositiveInt
    batch_size: PositiveInt
    augment: AugmentSettings = AugmentSettings()
    epoch_eval: EpochEval
    seed: int
    synthetic: SyntheticData | None = None
    validation: Validation | None = None
    selection: SelectionSettings = SelectionSettings()
    #: keep model_published.pt by the published protocol (absent: the run keeps none)
    published_selection: PublishedSelection | None = None
    precision: Precision = "fp32"
    tf32: Tf32Settings = Tf32Settings()
    #: CPU threads of the run's arithmetic on a CPU (TrainSettings.threads)
    threads: PositiveInt = 1
    #: the run id of the run this one fine-tunes, and which of its checkpoints
    init_from: str | None = None
    init_checkpoint: Checkpoint = "last"
    constructed: Constructed | None = None


class ZooModel(Config):
    """The model a zoo run evaluates (study.config.zoo.zoo_run_config's `zoo`)."""

    dataset: Literal["cifar10", "cifar100", "imagenet"]
    threat_model: ThreatModel
    name: str
    source: Literal["robustbench", "torchvision"] = "robustbench"
    file: str | None = None


class PretrainedOptimizer(Config):
    name: Literal["pretrained"]
    lr: float
    weight_decay: float


class PretrainedSchedule(Config):
    name: Literal["pretrained"]


class ZooRunConfig(Config):
    """The run config of a model trained elsewhere (study.config.zoo): a trained run's identity
    fields, its training ones saying `pretrained`, and the model it names."""

    dataset: str
    data_variant: str
    train_per_class: None = None
    model: str
    method: str
    seed: int
    optimizer: PretrainedOptimizer
    schedule: PretrainedSchedule
    epochs: Literal[0]
    zoo: ZooModel


# ---------------------------------------------------------------- one line per bad input

_MISSING = object()


def _unwrap(tp: Any) -> list[Any]:
    """The types an annotation may hold (Optional, unions and Annotated taken apart)."""
    origin = get_origin(tp)
    if origin is Annotated:
        # an evaluation: the classes of the evaluation kinds' rows (study.config.evaluations)
        by_kind = [m for m in get_args(tp)[1:] if isinstance(m, ByKind)]
        return list(by_kind[0].classes()) if by_kind else _unwrap(get_args(tp)[0])
    if origin in (Union, UnionType):
        return [t for arg in get_args(tp) for t in _unwrap(arg)]
    return [tp]


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _models_at(tp: Any, loc: tuple, parent: Any) -> list[type[BaseModel]]:
    """The model(s) that hold the key at `loc` (its parent), the union member `type` names."""
    candidates = _unwrap(tp)
    for part in loc[:-1]:
        nxt: list[Any] = []
        for t in candidates:
            if _is_model(t):
                field = next((f for n, f in t.model_fields.items() if (f.alias or n) == part), None)
                nxt += _unwrap(field.annotation) if field is not None else []
            elif get_origin(t) in (dict, list):
                nxt += _unwrap(get_args(t)[-1])
        candidates = nxt or candidates  # a union member's tag in `loc` is no field: stay
    models = [t for t in candidates if _is_model(t)]
    if isinstance(parent, Mapping) and "type" in parent:
        models = [m for m in models if "type" in m.model_fields
                  and parent["type"] in get_args(m.model_fields["type"].annotation)] or models
    return models


def _valid_keys(tp: Any, loc: tuple, parent: Any) -> list[str]:
    return sorted({f.alias or n for m in _models_at(tp, loc, parent) for n, f in m.model_fields.items()})


_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("pattern", "matching"))


def _expected(tp: Any, loc: tuple, parent: Any) -> str:
    """What the key at `loc` takes, e.g. `an integer >= 1`, from its field's annotation."""
    for model in _models_at(tp, loc, parent):
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == loc[-1]), None)
        if field is None:
            continue
        words = []
        for t in _unwrap(field.annotation):
            if get_origin(t) is Literal:
                words.append("one of " + ", ".join(map(str, get_args(t))))
            elif t is type(None):
                words.append("null")
            elif isinstance(t, type):
                words.append({int: "an integer", float: "a number", str: "a string", bool: "true or false"}
                             .get(t, t.__name__))
        metadata = [*field.metadata, *(m for a in _annotated(field.annotation) for m in a)]
        metadata += [x for m in metadata if isinstance(m, FieldInfo) for x in m.metadata]
        bounds = [f"{sign} {getattr(m, attr)}" for m in metadata for attr, sign in _BOUNDS
                  if getattr(m, attr, None) is not None]
        return " or ".join(dict.fromkeys(words)) + (" " + " and ".join(bounds) if bounds else "")
    return ""


def _annotated(tp: Any) -> list[tuple]:
    """The metadata of every Annotated inside an annotation (a field's bounds)."""
    if get_origin(tp) is Annotated:
        return [get_args(tp)[1:], *_annotated(get_args(tp)[0])]
    if get_origin(tp) in (Union, UnionType):
        return [m for arg in get_args(tp) for m in _annotated(arg)]
    return []


def _where(data: Any, loc: tuple) -> tuple[tuple, Any, Any]:
    """The key path of an error, the value there and the mapping that holds it. Pydantic's
    `loc` also names the union member it tried (`pgd`, `int`): those are no keys of the data."""
    path: tuple = ()
    value = data
    parent: Mapping | list | None = None
    for i, part in enumerate(loc):
        if isinstance(value, Mapping) and part in value:
            parent, value = value, value[part]
            path += (part,)
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            parent, value = value, value[part]
            path += (part,)
        elif isinstance(value, Mapping) and i == len(loc) - 1:
            parent, value = value, _MISSING
            path += (part,)
    return path, value, parent


def _dotted(path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "(top level)"


def describe_errors(err: ValidationError, data: Any, tp: Any) -> str:
    """Pydantic's errors as one line: each key path, the bad value and what is valid there."""
    problems: dict[str, list[str]] = {}
    for e in err.errors(include_url=False):
        path, value, parent = _where(data, tuple(e["loc"]))
        if e["loc"][-1:] == ("[key]",):  # a mapping's key (a name it defines): named at the mapping
            path, value, _ = _where(data, tuple(e["loc"][:-2]))
            name = e["loc"][-2]
            pattern = (e.get("ctx") or {}).get("pattern")
            text = f"the name {name!r} is not valid; " + (f"expected a name matching {pattern}" if pattern else
                                                          f"{e['msg'][0].lower()}{e['msg'][1:]}")
        elif e["type"] in ("union_tag_invalid", "union_tag_not_found"):
            types = [t for m in _models_at(tp, (*path, "type"), None) if "type" in m.model_fields
                     for t in get_args(m.model_fields["type"].annotation)]
            value = value.get("type", _MISSING) if isinstance(value, Mapping) else value
            path = (*path, "type")
            text = ("missing (required)" if value is _MISSING else f"{value!r} is not valid") + \
                f"; valid: {', '.join(dict.fromkeys(types))}"
        elif e["type"] == "unknown_model":  # a name the model table holds no row of; the valid ones
            text = e["msg"]
        elif e["type"] == "extra_forbidden":
            valid = _valid_keys(tp, path, parent)
            text = "unknown key" + (f" (valid keys: {', '.join(valid)})" if valid else "")
        else:
            expected = _expected(tp, path, parent) if path and isinstance(path[-1], str) else ""
            text = "missing (required)" if value is _MISSING else f"{value!r} is not valid"
            text += f"; expected {expected}" if expected else f": {e['msg'][0].lower()}{e['msg'][1:]}"
        where = _dotted(path)
        if text not in problems.setdefault(where, []):
            problems[where].append(text)
    return "; ".join(f"{where}: {' or '.join(texts)}" for where, texts in problems.items())


def parse(tp: Any, data: Any, what: str) -> Any:
    """`data` as the type `tp` (a model or a union of models), or a ConfigError of one line
    naming `what` and every bad key path, its value and what is valid there."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{what}: expected a mapping (a JSON object), got {type(data).__name__} {data!r:.80}")
    try:
        return _adapter(tp).validate_python(data)
    except ValidationError as err:
        raise ConfigError(f"{what}: {describe_errors(err, data, tp)}") from None


_ADAPTERS: dict[Any, TypeAdapter] = {}


def _adapter(tp: Any) -> TypeAdapter:
    # building a union's validator costs milliseconds; the plan parses hundreds of runs
    if tp not in _ADAPTERS:
        _ADAPTERS[tp] = TypeAdapter(tp)
    return _ADAPTERS[tp]
