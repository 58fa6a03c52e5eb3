"""A run config and an evaluation as they enter the study: parsed once, where they are read
(the plan, the command line, a run's config.json, a record's metadata), into a value that
holds both the typed settings and the mapping as written.

The mapping as written is the identity: its hash is the run key (and the run id's tail), it
is what config.json and a record's metadata keep, and a type's defaults are no part of it.
Below these boundaries the library takes the typed values only (mypy holds its callers to them: `make lint`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from study.config.core import ConfigError
from study.config.evaluations import EvaluationJob
from study.config.types import RunConfig, ZooRunConfig, parse

# ---------------------------------------------------------------- identities


def _short_hash(obj: object) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def run_key(cfg: Mapping) -> str:
    """Short hash of everything that determines a run's result (a run config as written)."""
    return _short_hash(cfg)


def construction_key(kind: str, source_runs: Mapping[str, str], settings: Mapping) -> str:
    """Short hash naming a constructed dataset: what it is built from and how."""
    blob = json.dumps({"kind": kind, "sources": dict(source_runs), "settings": dict(settings)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def _slug_number(x: float) -> str:
    return f"{x:g}".replace("-", "m").replace("+", "")


class Frozen(dict):
    """A read-only mapping that is still a dict: json writes it as it writes the mapping it
    was copied from (key order included), and nothing below the boundary can change an
    identity that names files already written."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("an identity as written is read-only; build a new mapping ({**identity, ...})")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        return Frozen, (dict(self),)

    def __copy__(self) -> dict:
        return dict(self)

    def __deepcopy__(self, memo: dict) -> dict:
        # a deep copy is taken to be edited: a plain one, as written
        return as_written(self)


class FrozenList(list):
    """A read-only list that is still a list (equal to the list read back from JSON)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("an identity as written is read-only; build a new list")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse  # type: ignore[assignment]
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        return FrozenList, (list(self),)

    def __copy__(self) -> list:
        return list(self)

    def __deepcopy__(self, memo: dict) -> list:
        return as_written(self)


def frozen(value: Any) -> Any:
    """A read-only deep copy of a JSON-like value: mappings as `Frozen`, lists as `FrozenList`."""
    if isinstance(value, Mapping):
        return Frozen({k: frozen(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList(frozen(v) for v in value)
    return value


def as_written(value: Any) -> Any:
    """A mutable deep copy of an identity (plain dicts and lists), to build a new one from."""
    if isinstance(value, Mapping):
        return {k: as_written(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_written(v) for v in value]
    return value


# ---------------------------------------------------------------- a run config

_WHAT = "a run config is the `config` of one run of `study plan --json`"
REQUIRED_KEYS = tuple(name for name, field in RunConfig.model_fields.items() if field.is_required())


def _names(run: RunConfig) -> list[str]:
    from study.data.registry import DATASETS

    # the model is its type's (types.ModelName): a row of the model table
    problems = []
    if run.dataset not in DATASETS:
        problems.append(f"dataset: {run.dataset!r} is not one of {', '.join(DATASETS)}")
    elif run.data_variant not in DATASETS[run.dataset].variants:
        problems.append(f"data_variant: {run.data_variant!r} is not one of "
                        f"{', '.join(DATASETS[run.dataset].variants)}")
    return problems


def _protocols(run: RunConfig) -> list[str]:
    # the published protocol's index is robust accuracy on the test subset: without an epoch
    # attack the records hold none, and the run would fail after its first epoch
    if run.published_selection is not None and run.epoch_eval.attack is None:
        return ["published_selection: needs epoch_eval.attack (robust accuracy on the test subset)"]
    return []


def _trained(cfg: Any, where: str) -> RunConfig:
    """A trained run's config as its type; ConfigError naming every problem of `cfg` at once."""
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"{where}: expected a JSON object, got {type(cfg).__name__}; {_WHAT}")
    missing = [k for k in REQUIRED_KEYS if k not in cfg]
    if missing:
        raise ConfigError(f"{where}: missing key(s) {', '.join(missing)}; {_WHAT}")
    from study.config.params import non_finite_paths

    # NaN passes a JSON schema's bounds; named first, in the words of the params check
    problems = non_finite_paths(cfg)
    try:
        run = parse(RunConfig, cfg, where)
    except ConfigError as err:
        raise ConfigError("; ".join([f"{where}: " + "; ".join(problems), str(err).removeprefix(f"{where}: ")])
                          if problems else str(err)) from None
    problems += _names(run) + _protocols(run)
    if problems:
        raise ConfigError(f"{where}: " + "; ".join(dict.fromkeys(problems)))
    return run


@dataclass(frozen=True)
class ConfigSpec:
    """One run's configuration: `config` typed (what the library reads), `identity` the
    mapping as written (read-only; its hash is the run key, config.json holds it)."""

    config: RunConfig | ZooRunConfig
    identity: Mapping

    @classmethod
    def parse(cls, raw: Any, where: str = "run config") -> ConfigSpec:
        """The one place a run config (a plan's, `--run-config`, a config.json, a record's
        `run_config`) becomes typed: a zoo model's where it names one, else a trained run's
        (checked against the model and dataset registries); ConfigError of one line otherwise."""
        if isinstance(raw, Mapping) and "zoo" in raw:
            config: RunConfig | ZooRunConfig = parse(ZooRunConfig, raw, f"zoo {where}")
        else:
            config = _trained(raw, where)
        return cls(config, frozen(raw))

    @property
    def key(self) -> str:
        """The run key: the short hash of the config as written."""
        return run_key(self.identity)

    @property
    def run_id(self) -> str:
        """`<dataset>-<model>-<method>-<optimizer+lr>-<schedule>-wd<wd>-e<epochs>-s<seed>-<hash>`."""
        run = self.config
        constructed = run.constructed if isinstance(run, RunConfig) else None
        slug = "-".join(
            [
                run.dataset
                + ("" if run.data_variant in ("official", "default") else f"_{run.data_variant}")
                + (f"_{constructed.kind}" if constructed else ""),
                run.model,
                run.method,
                f"{run.optimizer.name}{_slug_number(run.optimizer.lr)}",
                run.schedule.name,
                f"wd{_slug_number(run.optimizer.weight_decay)}",
                f"e{run.epochs}",
                f"s{run.seed}",
            ]
        )
        # the hash is of the config as written: a type's defaults are no part of a run's identity
        return f"{slug}-{self.key}"

    @property
    def trained(self) -> RunConfig:
        """The config of a run this study trains (TypeError for a zoo model's)."""
        if not isinstance(self.config, RunConfig):
            raise TypeError(f"run {self.run_id}: a zoo model's config is no trained run's")
        return self.config


# ---------------------------------------------------------------- an evaluation


@dataclass(frozen=True)
class EvaluationSpec:
    """One evaluation job: `config` typed and named (`EvaluationJob`), `identity` the mapping
    as written (read-only), which a record's metadata keeps as its `evaluation`."""

    config: Any  # EvaluationJob: CleanJob | PgdJob | AutoAttackJob | SquareJob
    identity: Mapping

    @classmethod
    def parse(cls, raw: Any, where: str = "evaluation", tp: Any = EvaluationJob) -> EvaluationSpec:
        """The one place an evaluation job (`--evaluation`, a params evaluation resolved by
        study.config.methods.resolve_evaluation) becomes typed; `tp` narrows it (`PgdJob`)."""
        return cls(parse(tp, raw, where), frozen(raw))

    @property
    def name(self) -> str:
        return self.config.name

    def at(self, checkpoint: str, record: str) -> EvaluationSpec:
        """The job on a checkpoint's model, its records named `record` (study.record_names.record_name:
        `<name>@best`), as a typed copy; this one is unchanged."""
        update = {"name": record, "checkpoint": checkpoint}
        # the identity keeps the keys' order as written, a new `checkpoint` last
        return EvaluationSpec(self.config.model_copy(update=update), frozen({**self.identity, **update}))
