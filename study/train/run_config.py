"""Checking a run config (what `study train --run-config` gets) before anything is written
to the run directory: one line naming every bad key path, its value and what is valid."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from study.config.params import non_finite_paths
from study.data.registry import DATASETS
from study.models.registry import MODEL_NAMES
from study.train.optim import OPTIMIZERS, SCHEDULES

REQUIRED_KEYS = ("dataset", "data_variant", "model", "method", "method_config", "optimizer", "schedule",
                 "epochs", "batch_size", "epoch_eval", "seed")
_POSITIVE_INTS = ("epochs", "batch_size", "epoch_eval.per_class")
# radii and step sizes of the training adversary and of the per-epoch attack
_RADII = ("eps", "alpha", "step_size")
_WHAT = "a run config is the `config` of one run of `study plan --json`"
_MISSING = object()


def _get(cfg: Mapping, path: str) -> Any:
    value: Any = cfg
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return _MISSING
        value = value[key]
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _radii(value: Any, where: str) -> list[str]:
    """`eps`, `alpha` and `step_size` anywhere below `where` must be numbers >= 0."""
    if isinstance(value, Mapping):
        problems = []
        for key, item in value.items():
            path = f"{where}.{key}"
            non_finite = isinstance(item, float) and not math.isfinite(item)  # named by non_finite_paths
            if key in _RADII and not non_finite and not (_is_number(item) and item >= 0):
                problems.append(f"{path}: {item!r} is not a number >= 0")
            else:
                problems += _radii(item, path)
        return problems
    return []


def _numbers(cfg: Mapping) -> list[str]:
    problems = []
    for path in _POSITIVE_INTS:
        value = _get(cfg, path)
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            problems.append(f"{path}: {'missing' if value is _MISSING else repr(value)} is not an integer >= 1")
    lr = _get(cfg, "optimizer.lr")
    if not (_is_number(lr) and lr > 0):
        problems.append(f"optimizer.lr: {'missing' if lr is _MISSING else repr(lr)} is not a number > 0")
    wd = _get(cfg, "optimizer.weight_decay")
    if wd is not _MISSING and not (_is_number(wd) and wd >= 0):
        problems.append(f"optimizer.weight_decay: {wd!r} is not a number >= 0")
    return problems + _radii(cfg["method_config"], "method_config") + _radii(cfg["epoch_eval"], "epoch_eval")


def _names(cfg: Mapping) -> list[str]:
    tables = (("dataset", DATASETS), ("model", MODEL_NAMES), ("optimizer.name", OPTIMIZERS),
              ("schedule.name", SCHEDULES))
    problems = []
    for path, valid in tables:
        value = _get(cfg, path)
        if not isinstance(value, str) or value not in valid:
            problems.append(f"{path}: {'missing' if value is _MISSING else repr(value)} is not one of "
                            f"{', '.join(valid)}")
    info = DATASETS.get(cfg["dataset"]) if isinstance(cfg["dataset"], str) else None
    if info is not None and cfg["data_variant"] not in info.variants:
        problems.append(f"data_variant: {cfg['data_variant']!r} is not one of {', '.join(info.variants)}")
    return problems


def check_run_config(cfg: Any) -> None:
    """ValueError naming every problem of `cfg` at once (nothing is written before this)."""
    if not isinstance(cfg, Mapping):
        raise ValueError(f"run config: expected a JSON object, got {type(cfg).__name__}; {_WHAT}")
    missing = [k for k in REQUIRED_KEYS if k not in cfg]
    if missing:
        raise ValueError(f"run config: missing key(s) {', '.join(missing)}; {_WHAT}")
    for key in ("method_config", "optimizer", "schedule", "epoch_eval"):
        if not isinstance(cfg[key], Mapping):
            raise ValueError(f"run config: {key}: {cfg[key]!r} is not a mapping; {_WHAT}")
    problems = non_finite_paths(cfg) + _names(cfg) + _numbers(cfg)
    if problems:
        raise ValueError("run config: " + "; ".join(dict.fromkeys(problems)))
