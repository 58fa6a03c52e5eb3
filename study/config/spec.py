"""A run config and an evaluation as they enter the study: parsed once, where they are read
(the plan, the command line, a run's config.json, a record's metadata), into a typed value.

The typed value is the identity: its canonical form (`canonical`: the fields that were set,
dumped with sorted keys and compact separators) is what config.json and a record's metadata
keep, and its hash is the run key (and the run id's tail); a type's defaults are no part of
it, and an integer written where a float belongs is the float. Parsing what was written and
dumping it again gives the same bytes. Below these boundaries the library takes the typed
values only (mypy holds its callers to them: `make lint`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from study.config.core import ConfigError
from study.config.evaluations import EvaluationJob
from study.config.requirements import run_problems
from study.config.types import RunConfig, ZooRunConfig, parse

# ---------------------------------------------------------------- identities


def _short_hash(blob: str) -> str:
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def run_key(raw: object) -> str | None:
    """The run key of a run config as read back (a config.json, a record's `run_config`): the
    key of what it parses to, whatever its keys' order or layout; None where it does not parse."""
    try:
        return ConfigSpec.parse(raw).key
    except ConfigError:
        return None


def construction_key(kind: str, source_runs: Mapping[str, str], settings: Mapping) -> str:
    """Short hash naming a constructed dataset: what it is built from and how."""
    blob = json.dumps({"kind": kind, "sources": dict(source_runs), "settings": dict(settings)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def _slug_number(x: float) -> str:
    return f"{x:g}".replace("-", "m").replace("+", "")


def canonical(value: BaseModel) -> dict:
    """A typed value's identity: the fields that were set (a type's defaults are no part of
    it), recursively, as JSON values under their written names (`lambda`, not `lambda_`)."""
    return value.model_dump(mode="json", exclude_unset=True, by_alias=True)


def canonical_json(value: BaseModel) -> str:
    """`canonical(value)` as the one string that is hashed and written (sorted keys, compact)."""
    return json.dumps(canonical(value), sort_keys=True, separators=(",", ":"))


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
    # and what training needs of it beyond the types: refused here, where the plan makes every run's
    # config, rather than by the train job after the jobs before it ran
    problems += _names(run) + _protocols(run) + run_problems(run)
    if problems:
        raise ConfigError(f"{where}: " + "; ".join(dict.fromkeys(problems)))
    return run


@dataclass(frozen=True)
class ConfigSpec:
    """One run's configuration, typed: its canonical form (`identity`) is what config.json
    holds, and its hash the run key."""

    config: RunConfig | ZooRunConfig

    @classmethod
    def parse(cls, raw: Any, where: str = "run config") -> ConfigSpec:
        """The one place a run config (a plan's, `--run-config`, a config.json, a record's
        `run_config`) becomes typed: a zoo model's where it names one, else a trained run's
        (checked against the model and dataset registries, and for what its training needs:
        study.config.requirements.run_problems); ConfigError of one line otherwise."""
        if isinstance(raw, Mapping) and "zoo" in raw:
            config: RunConfig | ZooRunConfig = parse(ZooRunConfig, raw, f"zoo {where}")
        else:
            config = _trained(raw, where)
        return cls(config)

    @property
    def identity(self) -> dict:
        """The canonical form (a new dict each time): what config.json and a record's
        `run_config` hold."""
        return canonical(self.config)

    @property
    def json(self) -> str:
        """The canonical form as config.json holds it (one line, sorted keys, compact)."""
        return canonical_json(self.config) + "\n"

    @property
    def key(self) -> str:
        """The run key: the short hash of the canonical form."""
        return _short_hash(canonical_json(self.config))

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
        # the hash is of the canonical form: a type's defaults are no part of a run's identity
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
    """One evaluation job, typed and named (`EvaluationJob`); its canonical form (`identity`)
    is what a record's metadata keeps as its `evaluation`."""

    config: Any  # EvaluationJob: CleanJob | PgdJob | AutoAttackJob | SquareJob

    @classmethod
    def parse(cls, raw: Any, where: str = "evaluation", tp: Any = EvaluationJob) -> EvaluationSpec:
        """The one place an evaluation job (`--evaluation`, a params evaluation resolved by
        study.config.methods.resolve_evaluation) becomes typed; `tp` narrows it (`PgdJob`)."""
        return cls(parse(tp, raw, where))

    @property
    def identity(self) -> dict:
        """The canonical form (a new dict each time): a record's `evaluation`."""
        return canonical(self.config)

    @property
    def name(self) -> str:
        return self.config.name

    def at(self, checkpoint: str, record: str) -> EvaluationSpec:
        """The job on a checkpoint's model, its records named `record` (study.record_names.record_name:
        `<name>@best`), as a typed copy; this one is unchanged."""
        # model_copy counts the updated fields as set: the record's identity names them
        return EvaluationSpec(self.config.model_copy(update={"name": record, "checkpoint": checkpoint}))
