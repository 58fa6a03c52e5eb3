"""The held-out validation split of the one training protocol (CFA, FRL: 2% of each class).

Deterministic and independent of the seed: the last ceil(fraction * n_c) samples of each
class (at least one), in dataset order, of the training samples the run would use. The
indices are recorded in the run directory (validation.json)."""

from __future__ import annotations

import math

import torch


def validation_split(
    train_idx: torch.Tensor, labels: torch.Tensor, fraction: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(kept training indices, validation indices), both sorted, from `train_idx` into `labels`."""
    if not 0 < fraction < 1:
        raise ValueError(f"validation fraction must be in (0, 1), got {fraction}")
    train_idx = torch.sort(train_idx).values
    y = labels[train_idx]
    held = torch.zeros(train_idx.shape[0], dtype=torch.bool)
    for c in torch.unique(y).tolist():
        pos = torch.nonzero(y == c).flatten()
        k = max(1, math.ceil(fraction * pos.numel()))
        if k >= pos.numel():
            raise ValueError(f"class {c} has {pos.numel()} training samples; a validation fraction of {fraction} "
                             "would leave none to train on")
        held[pos[-k:]] = True
    return train_idx[~held], train_idx[held]
