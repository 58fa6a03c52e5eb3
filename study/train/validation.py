"""The held-out validation split of the one training protocol.

Either a share of each class (`fraction`: CFA and FRL hold out 2% of CIFAR-10's classes, 100
images each) or a number of images per class (`per_class`: CFA's generate_validation.py holds
out 25 per class on CIFAR-100, where 2% would be 10). Deterministic and independent of the
seed: the last k_c samples of each class (at least one), in dataset order, of the training
samples the run would use. The indices are recorded in the run directory (validation.json)."""

from __future__ import annotations

from collections.abc import Mapping

import torch

# the size of the split: the plan checks it against the images per class where the config tells them
from study.config.requirements import held_per_class

__all__ = ["held_per_class", "validation_split"]


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

