"""Evaluate a pretrained ImageNet model (see `study.models.pretrained`) class-wise, writing
the same per-sample records as trained runs, so `study tables` aggregates both alike."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from study.data.download import file_checksums
from study.data.splits import Splits
from study.device import select_device
from study.evaluate.run import evaluate_model
from study.models.pretrained import get_pretrained_spec, load_pretrained, weights_path


def pretrained_run_config(name: str, weights: Path, splits: Splits) -> dict:
    """A run config in the shape of trained runs' (the tables read these fields). The model
    was trained elsewhere: the training fields say `pretrained`, with zero epochs, and the
    weights file is identified by its SHA-256."""
    spec = get_pretrained_spec(name)
    return {
        "dataset": splits.meta.get("dataset"),
        "data_variant": splits.meta.get("variant"),
        "train_per_class": None,
        "model": f"{spec.arch}_imagenet",
        "method": name,
        "seed": 0,
        "optimizer": {"name": "pretrained", "lr": 0.0, "weight_decay": 0.0},
        "schedule": {"name": "pretrained"},
        "epochs": 0,
        "pretrained": {
            "name": name,
            "training": spec.training,
            "layout": spec.layout,
            "file": spec.file,
            "sha256": file_checksums(weights, ["sha256"])["sha256"],
            "source": spec.source,
        },
    }


def evaluate_pretrained(
    name: str,
    splits: Splits,
    evaluation: Mapping,
    out: str | Path,
    *,
    weights_dir: str | os.PathLike | None = None,
    device: str = "auto",
    progress: bool = True,
) -> Path:
    if splits.meta.get("dataset") != "imagenet":
        raise ValueError(
            f"pretrained model {name} classifies ImageNet; the data given is "
            f"{splits.meta.get('dataset')} ({splits.meta.get('variant')})"
        )
    dev = select_device(device)
    model = load_pretrained(name, weights_dir, dev)  # first: its error names a missing file best
    weights = weights_path(get_pretrained_spec(name), weights_dir)
    return evaluate_model(
        model, splits, evaluation, out, run_id=f"pretrained-{name}",
        run_config=pretrained_run_config(name, weights, splits), device=dev, progress=progress,
    )
