"""Run ids: a readable slug plus a short hash of the resolved run config, so presets never
collide and a changed hyperparameter is a new run; and a run config (a plan's, or one read
back from config.json or a record's meta) as its type."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from study.config.types import RunConfig, ZooRunConfig, parse


def _short_hash(obj: object) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def run_key(cfg: Mapping) -> str:
    """Short hash of everything that determines a run's result."""
    return _short_hash(cfg)


def construction_key(kind: str, source_runs: Mapping[str, str], settings: Mapping) -> str:
    """Short hash naming a constructed dataset: what it is built from and how."""
    blob = json.dumps({"kind": kind, "sources": dict(source_runs), "settings": dict(settings)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def _slug_number(x: float) -> str:
    return f"{x:g}".replace("-", "m").replace("+", "")


def typed_run(cfg: Mapping) -> RunConfig | ZooRunConfig:
    """A run config (a plan's, or one read back from config.json or a record's meta) as its
    type: a zoo model's where it names one, else a trained run's."""
    if "zoo" in cfg:
        return parse(ZooRunConfig, cfg, "zoo run config")
    return parse(RunConfig, cfg, "run config")


def run_id(cfg: Mapping) -> str:
    """`<dataset>-<model>-<method>-<optimizer+lr>-<schedule>-wd<wd>-e<epochs>-s<seed>-<hash>`."""
    run = typed_run(cfg)
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
    return f"{slug}-{run_key(cfg)}"
