"""The evaluation kinds: one table (`EVALUATION_KINDS`), one row per `type` an evaluation of
params.yaml may name. A row holds the kind's typed settings (a `Config` class whose `type` is
the row's name), its display label, its cost (forward-backward steps per image, for the
scheduler's estimates) and the function that attacks a batch. Everything else that names the
kinds is derived from it: the params types and their schema (`Evaluation`, `EvaluationJob`,
`EvaluationOverride`), the job estimates (study.resources), the labels (study.labels) and the
dispatch of study.predict.

Adding an evaluation type is one `EvaluationKind` row here, plus the code of its settings
class and of its attack function.

The attack function is named ("module:function"), not imported: planning (the params check,
Snakemake's DAG, `study plan`) reads this table without importing torch. It is called as
`attack(model, x, y, settings, generator)` and returns (inputs to classify, per-sample name of
the attack that broke each sample, or None).

`Evaluation` and `EvaluationJob` look their row up when they validate, not when they are
defined, so a row added to the table (a test's, in-process) is parsed, checked and written into
the schema like the study's own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional, Union, get_args

from pydantic import Field, TypeAdapter, create_model
from pydantic_core import PydanticCustomError, core_schema

from study.config.fields import Checkpoint, Config, EvalBatch, Fraction, Norm, PositiveInt

AutoAttackName = Literal["apgd-ce", "apgd-dlr", "apgd-t", "fab", "fab-t", "square"]


class AnyEvaluation(Config):
    """What every evaluation kind's settings hold; each row's class extends it with its `type`
    (a Literal of the row's name) and its own settings."""

    if TYPE_CHECKING:  # (declared by each kind's class: a field here would be one of every override)
        type: str

    #: test images per class (None: the whole test set)
    test_per_class: PositiveInt | None = None
    batch_size: EvalBatch = "auto"
    #: seed of the attack's random starts
    seed: int = 0
    #: the test set split into this many shards, run as separate jobs and merged
    shards: PositiveInt = 1

    @property
    def kind(self) -> EvaluationKind:
        """Its row of the table (`EVALUATION_KINDS`), which its `type` names: parsed, so present."""
        return EVALUATION_KINDS[self.type]


class CleanEvaluation(AnyEvaluation):
    type: Literal["clean"]


class PgdEvaluation(AnyEvaluation):
    type: Literal["pgd"]
    norm: Norm
    eps: Fraction
    alpha: Fraction
    steps: PositiveInt
    restarts: PositiveInt = 1
    random_start: bool = True


class AutoAttackEvaluation(AnyEvaluation):
    """pyautoattack: the standard version (APGD-CE, APGD-T, FAB-T, Square) or a custom list."""

    type: Literal["autoattack"]
    norm: Norm
    eps: Fraction
    version: Literal["standard", "custom"] = "standard"
    attacks: Annotated[list[AutoAttackName], Field(min_length=1)] | None = None
    #: APGD and FAB iterations (100 in the standard version)
    iterations: PositiveInt = 100
    #: target classes of APGD-T and FAB-T (9 in the standard version)
    targets: PositiveInt = 9
    #: Square's queries (5000 in the standard version)
    queries: PositiveInt = 5000


class SquareEvaluation(AnyEvaluation):
    type: Literal["square"]
    norm: Norm
    eps: Fraction
    queries: PositiveInt = 5000


def _no_steps(ev: AnyEvaluation) -> int:
    return 0


def _pgd_steps(ev: PgdEvaluation) -> int:
    return ev.steps * ev.restarts


def _square_steps(ev: SquareEvaluation | AutoAttackEvaluation) -> int:
    # forward only: a query counted as a third of a step
    return ev.queries // 3


def _autoattack_steps(ev: AutoAttackEvaluation) -> int:
    # the standard version: APGD-CE (100), APGD-T (9 targets x 100), FAB-T (9 x 100), Square
    iters = ev.iterations
    per = {"apgd-ce": iters, "apgd-dlr": iters, "apgd-t": iters * ev.targets, "fab": iters,
           "fab-t": iters * ev.targets, "square": _square_steps(ev)}
    return sum(per[a] for a in ev.attacks or ["apgd-ce", "apgd-t", "fab-t", "square"])


class _Named(Config):
    #: the evaluation's name in params 'evaluations' (`<name>@best` for the best checkpoint)
    name: str
    checkpoint: Checkpoint = "last"


@dataclass(frozen=True)
class EvaluationKind:
    """An evaluation type: `settings` parses its entries (its `type` field is `Literal[name]`),
    `label` is what readers see (study.labels), `steps` its gradient (or query) steps per
    image, an upper bound for the scheduler (study.resources), `attack` the "module:function"
    that attacks a batch (study.predict), `whole_set` whether that function takes the whole
    test set as one batch (batching inside the attack library)."""

    name: str
    settings: type[AnyEvaluation]
    label: str
    steps: Callable[[Any], int]
    attack: str
    whole_set: bool = False

    def __post_init__(self) -> None:
        field = self.settings.model_fields.get("type")
        if field is None or get_args(field.annotation) != (self.name,):
            raise ValueError(f"evaluation kind {self.name}: its settings class {self.settings.__name__} needs "
                             f"`type: Literal[{self.name!r}]`")

    @property
    def job(self) -> type[AnyEvaluation]:
        """The settings of one job of this kind: named, and the checkpoint it evaluates."""
        return _job(self.settings)

    @property
    def run(self) -> Callable[..., Any]:
        """The attack function, imported on first use."""
        module, _, function = self.attack.partition(":")
        return getattr(importlib.import_module(module), function)


@cache
def _job(settings: type[AnyEvaluation]) -> type[AnyEvaluation]:
    name = settings.__name__.removesuffix("Evaluation") + "Job"
    # (pydantic's stubs bind every base to one model type; a job is both its settings and _Named)
    return create_model(name, __base__=(settings, _Named), __module__=__name__)  # type: ignore[arg-type]


_ROWS = (
    EvaluationKind("clean", CleanEvaluation, "Clean", _no_steps, "study.attacks.configured:attack_clean"),
    EvaluationKind("pgd", PgdEvaluation, "PGD", _pgd_steps, "study.attacks.configured:attack_pgd"),
    EvaluationKind("autoattack", AutoAttackEvaluation, "AutoAttack", _autoattack_steps,
                   "study.attacks.configured:attack_autoattack", whole_set=True),
    EvaluationKind("square", SquareEvaluation, "Square", _square_steps,
                   "study.attacks.configured:attack_autoattack", whole_set=True),
)
#: the evaluation kinds, by their `type`
EVALUATION_KINDS: dict[str, EvaluationKind] = {kind.name: kind for kind in _ROWS}


def evaluation_kind(name: str) -> EvaluationKind:
    """The row of `name`; ValueError naming the valid types otherwise."""
    if name not in EVALUATION_KINDS:
        raise ValueError(f"unknown evaluation type {name!r}; valid: {', '.join(EVALUATION_KINDS)}")
    return EVALUATION_KINDS[name]


# ---------------------------------------------------------------- the types derived from the table

@dataclass(frozen=True)
class ByKind:
    """The annotation of an evaluation (`Evaluation`) or an evaluation job (`EvaluationJob`):
    validated by the class of the row its `type` names, written into the JSON schema as the
    discriminated union of the rows' classes."""

    jobs: bool

    def classes(self) -> tuple[type[AnyEvaluation], ...]:
        return tuple(kind.job if self.jobs else kind.settings for kind in EVALUATION_KINDS.values())

    def _validate(self, value: Any) -> AnyEvaluation:
        tag = value.get("type") if isinstance(value, Mapping) else getattr(value, "type", None)
        if tag is None:
            raise PydanticCustomError("union_tag_not_found", "Unable to extract tag using discriminator 'type'")
        if not isinstance(tag, str) or tag not in EVALUATION_KINDS:
            raise PydanticCustomError("union_tag_invalid", "Input tag {tag!r} found using 'type' does not match "
                                      "any of the expected tags: {expected}",
                                      {"tag": tag, "expected": ", ".join(EVALUATION_KINDS)})
        kind = EVALUATION_KINDS[tag]
        return (kind.job if self.jobs else kind.settings).model_validate(value)

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(self._validate)

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> Any:
        # a union of the table's classes, built at run time (a type to pydantic, a value to mypy)
        union: Any = Annotated[Union[self.classes()], Field(discriminator="type")]  # noqa: UP007 (a tuple of classes)
        return handler(TypeAdapter[Any](union).core_schema)


#: an evaluation of params 'evaluations' (an entry, or a run's epoch_eval attack)
Evaluation = Annotated[AnyEvaluation, ByKind(jobs=False)]
#: an evaluation as `study evaluate --evaluation` receives it (resolved: named, fractions as numbers)
EvaluationJob = Annotated[AnyEvaluation, ByKind(jobs=True)]
#: the job of a PGD evaluation: what `study robustness` takes as its reference attack
PgdJob = EVALUATION_KINDS["pgd"].job


def _optional(field: Any) -> Any:
    annotation = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
    return Optional[annotation]  # noqa: UP045 (built at run time from a field)


def _override_fields() -> dict[str, Any]:
    # the kinds' own settings in the order of the table, then those every kind holds
    fields: dict[str, Any] = {"type": (Optional[Literal[tuple(EVALUATION_KINDS)]], None)}  # noqa: UP045
    for kind in EVALUATION_KINDS.values():
        for name, field in kind.settings.model_fields.items():
            if name not in fields and name not in AnyEvaluation.model_fields:
                fields[name] = (_optional(field), None)
    fields.update({name: (_optional(field), None) for name, field in AnyEvaluation.model_fields.items()})
    return fields


#: an evaluation's settings, all optional (per_dataset: merged over the evaluation of the same name);
#: its fields come from the table, so mypy sees a Config
if TYPE_CHECKING:
    class EvaluationOverride(Config): ...
else:
    EvaluationOverride = create_model("EvaluationOverride", __base__=Config, __module__=__name__,
                                      __doc__="An evaluation's settings, all optional (per_dataset: merged over the "
                                              "evaluation of the same name).", **_override_fields())
