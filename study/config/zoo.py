"""The RobustBench zoo of the configured study (params `zoo`): one run-like entry per model.

A zoo model is evaluated, never trained. It becomes a `RunSpec` whose config has the shape
of a trained run's (the tables read the same fields; the training fields say `pretrained`,
zero epochs) plus `zoo` (RobustBench's dataset, threat model and model ID). Its run id is
`zoo-<dataset>-<threat model>-<name>`, so its records, checks and CIFAR-10-C records sit
beside the trained runs' and every rule that evaluates a run evaluates it alike.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from study.config.core import ConfigError, dataset_variant
from study.config.plan import RunSpec

ZOO_PREFIX = "zoo-"
ZOO_GROUP = "zoo"


def zoo_weights_dir(params: Mapping) -> str | None:
    """The weights folder the zoo reads (the pretrained models' one): the config key, else the env."""
    from study.models.weights import WEIGHTS_ENV

    return (params.get("pretrained") or {}).get("weights_dir") or os.environ.get(WEIGHTS_ENV) or None


def zoo_run_config(entry: Mapping) -> dict:
    """The run config of one zoo entry; `data` (default: RobustBench's dataset) is what it is evaluated on."""
    from study.data.registry import get_dataset_info

    data = entry.get("data", entry["dataset"])
    return {
        "dataset": data,
        "data_variant": entry.get("variant") or get_dataset_info(data).variants[0],
        "train_per_class": None,
        "model": entry["name"],
        "method": "robustbench",
        "seed": 0,
        "optimizer": {"name": "pretrained", "lr": 0.0, "weight_decay": 0.0},
        "schedule": {"name": "pretrained"},
        "epochs": 0,
        "zoo": {"dataset": entry["dataset"], "threat_model": entry["threat_model"], "name": entry["name"]},
    }


def zoo_run_id(entry: Mapping) -> str:
    data = entry.get("data", entry["dataset"])
    on = "" if data == entry["dataset"] else f"-on-{data}"
    return f"{ZOO_PREFIX}{entry['dataset']}-{entry['threat_model']}-{entry['name']}{on}"


def _weights_present(entry: Mapping, weights_dir: str | None) -> bool:
    return weights_dir is not None and (
        Path(weights_dir).expanduser() / entry["dataset"] / entry["threat_model"] / f"{entry['name']}.pt").is_file()


def _check_image_size(params: Mapping, entry: Mapping) -> None:
    """RobustBench's architectures take their dataset's image size (CIFAR's 32 px: a fixed
    final pooling); evaluated on other data, that data must have the same size."""
    from study.data.registry import get_dataset_info

    data = entry.get("data", entry["dataset"])
    wanted, size = get_dataset_info(entry["dataset"]).image_size, get_dataset_info(data).image_size
    if data == "synthetic":  # generated at the size the params give (as plan.run_config passes them)
        size = params["data"]["synthetic"].get("image_size", size)
    if size != wanted:
        raise ConfigError(f"zoo entry {entry['name']}: RobustBench's {entry['dataset']} models take {wanted}x{wanted} "
                          f"images, its data {data} has {size}x{size}"
                          + (f" (set data.synthetic.image_size: {wanted})" if data == "synthetic" else ""))


def plan_zoo(params: Mapping) -> list[RunSpec]:
    """The zoo's runs; with `require_weights` only those whose weights file is in the folder
    (a preset that must not grow when no weights are placed, such as the demo)."""
    zoo = params.get("zoo") or {}
    weights_dir = zoo_weights_dir(params)
    runs = []
    for entry in zoo.get("models") or []:
        if zoo.get("require_weights") and not _weights_present(entry, weights_dir):
            continue
        evaluations = entry.get("evaluations") or (zoo.get("evaluations") or {}).get(entry["threat_model"])
        if not evaluations:
            raise ConfigError(f"zoo entry {entry['name']}: no evaluations (give `evaluations`, or "
                              f"zoo.evaluations.{entry['threat_model']})")
        _check_image_size(params, entry)
        for ev in evaluations:
            if ev not in params["evaluations"]:
                raise ConfigError(f"zoo entry {entry['name']}: unknown evaluation {ev!r}; "
                                  f"defined in params 'evaluations': {', '.join(sorted(params['evaluations']))}")
        # An entry without its own variant takes the study's (data.variants, "auto" resolved).
        variant = entry.get("variant") or dataset_variant(params, entry.get("data", entry["dataset"]))
        runs.append(RunSpec(zoo_run_id(entry), zoo_run_config({**entry, "variant": variant}), [ZOO_GROUP],
                            list(evaluations)))
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"zoo.models lists a model twice: {sorted({i for i in ids if ids.count(i) > 1})}")
    return runs


def zoo_checked(params: Mapping, runs: list[RunSpec]) -> list[RunSpec]:
    """Zoo runs that get the checks against false robustness (zoo.checks: threat models)."""
    wanted = set((params.get("zoo") or {}).get("checks") or [])
    return [r for r in runs if r.config["zoo"]["threat_model"] in wanted]


def zoo_corrupted(params: Mapping, runs: list[RunSpec]) -> list[RunSpec]:
    """Zoo runs evaluated on CIFAR-10-C (zoo.corruptions, on the datasets robustness.corruptions corrupts)."""
    if not (params.get("zoo") or {}).get("corruptions"):
        return []
    datasets = ((params.get("robustness") or {}).get("corruptions") or {}).get("datasets") or []
    return [r for r in runs if r.dataset in datasets]
