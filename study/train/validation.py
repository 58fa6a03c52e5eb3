"""The held-out validation split of the one training protocol.

Either a share of each class (`fraction`: CFA and FRL hold out 2% of CIFAR-10's classes, 100
images each) or a number of images per class (`per_class`: CFA's generate_validation.py holds
out 25 per class on CIFAR-100, where 2% would be 10). Deterministic and independent of the
seed: the last k_c samples of each class (at least one), in dataset order, of the training
samples the run would use. The indices are recorded in the run directory (validation.json)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch


def held_per_class(setting: Mapping, n_class: int) -> int:
    """How many of a class's `n_class` training samples the split `setting` holds out."""
    if "per_class" in setting:
        k = int(setting["per_class"])
        if k < 1:
            raise ValueError(f"validation per_class must be >= 1, got {k}")
        return k
    fraction = float(setting["fraction"])
    if not 0 < fraction < 1:
        raise ValueError(f"validation fraction must be in (0, 1), got {fraction}")
    return max(1, math.ceil(fraction * n_class))


def validation_split(
    train_idx: torch.Tensor, labels: torch.Tensor, setting: Mapping | float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(kept training indices, validation indices), both sorted, from `train_idx` into `labels`.
    `setting`: {fraction: f} or {per_class: k} (a bare number is a fraction)."""
    if not isinstance(setting, Mapping):
        setting = {"fraction": setting}
    train_idx = torch.sort(train_idx).values
    y = labels[train_idx]
    held = torch.zeros(train_idx.shape[0], dtype=torch.bool)
    for c in torch.unique(y).tolist():
        pos = torch.nonzero(y == c).flatten()
        k = held_per_class(setting, pos.numel())
        if k >= pos.numel():
            raise ValueError(f"class {c} has {pos.numel()} training samples; a validation split of {dict(setting)} "
                             "would leave none to train on")
        held[pos[-k:]] = True
    return train_idx[~held], train_idx[held]

