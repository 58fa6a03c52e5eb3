"""Parsing a run config (what `study train --run-config` gets) into its type before anything is
written to the run directory: one line naming every bad key path, its value and what is valid.

The structure, the closed sets of names and the bounds are study.config.types.RunConfig's; the
model, dataset and variant names are checked against their registries here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from study.config.core import ConfigError
from study.config.params import non_finite_paths
from study.config.types import RunConfig, parse
from study.data.registry import DATASETS
from study.models.registry import MODELS

_WHAT = "a run config is the `config` of one run of `study plan --json`"
REQUIRED_KEYS = tuple(name for name, field in RunConfig.model_fields.items() if field.is_required())


def _names(run: RunConfig) -> list[str]:
    problems = []
    if run.dataset not in DATASETS:
        problems.append(f"dataset: {run.dataset!r} is not one of {', '.join(DATASETS)}")
    elif run.data_variant not in DATASETS[run.dataset].variants:
        problems.append(f"data_variant: {run.data_variant!r} is not one of "
                        f"{', '.join(DATASETS[run.dataset].variants)}")
    if run.model not in MODELS:
        problems.append(f"model: {run.model!r} is not one of {', '.join(MODELS)}")
    return problems


def _protocols(run: RunConfig) -> list[str]:
    # the published protocol's index is robust accuracy on the test subset: without an epoch
    # attack the records hold none, and the run would fail after its first epoch
    if run.published_selection is not None and run.epoch_eval.attack is None:
        return ["published_selection: needs epoch_eval.attack (robust accuracy on the test subset)"]
    return []


def parse_run_config(cfg: Any) -> RunConfig:
    """The run config as its type; ValueError naming every problem of `cfg` at once."""
    if not isinstance(cfg, Mapping):
        raise ValueError(f"run config: expected a JSON object, got {type(cfg).__name__}; {_WHAT}")
    missing = [k for k in REQUIRED_KEYS if k not in cfg]
    if missing:
        raise ValueError(f"run config: missing key(s) {', '.join(missing)}; {_WHAT}")
    # NaN passes a JSON schema's bounds; named first, in the words of the params check
    problems = non_finite_paths(cfg)
    try:
        run = parse(RunConfig, cfg, "run config")
    except ConfigError as err:
        raise ValueError("; ".join(["run config: " + "; ".join(problems), str(err).removeprefix("run config: ")])
                         if problems else str(err)) from None
    problems += _names(run) + _protocols(run)
    if problems:
        raise ValueError("run config: " + "; ".join(dict.fromkeys(problems)))
    return run


def check_run_config(cfg: Any) -> RunConfig:
    """`parse_run_config`: the train command's check, before anything is written."""
    return parse_run_config(cfg)
