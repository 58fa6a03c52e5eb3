"""Per-channel input normalization as a model layer.

Keeping the dataset statistics inside the model means every caller (training, attacks,
evaluation) feeds raw [0, 1] pixels, so perturbation budgets are always in pixel units.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn


class Normalize(nn.Module):
    """Compute ``(x - mean) / std`` per channel for inputs of shape (B, C, H, W).

    ``mean`` and ``std`` are buffers, so they move with ``.to()`` and are saved in the
    state dict but are never trained.
    """

    mean: Tensor  # (1, C, 1, 1) buffers: register_buffer below
    std: Tensor

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        super().__init__()
        mean, std = [float(m) for m in mean], [float(s) for s in std]
        if len(mean) == 0 or len(mean) != len(std):
            raise ValueError(
                f"mean and std need one value per channel and the same length; "
                f"got mean={mean} (length {len(mean)}) and std={std} (length {len(std)})"
            )
        if not all(math.isfinite(m) for m in mean):
            raise ValueError(f"mean must be finite, got {mean}")
        if not all(math.isfinite(s) and s > 0 for s in std):
            raise ValueError(f"std must be finite and > 0 for every channel, got {std}")
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1))

    @classmethod
    def identity(cls, channels: int) -> Normalize:
        return cls([0.0] * channels, [1.0] * channels)

    @property
    def channels(self) -> int:
        return self.mean.shape[1]

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4 or x.shape[1] != self.channels:
            raise ValueError(
                f"Normalize expects (B, {self.channels}, H, W) inputs, got shape {tuple(x.shape)}"
            )
        return (x - self.mean) / self.std

    def extra_repr(self) -> str:
        return f"mean={self.mean.flatten().tolist()}, std={self.std.flatten().tolist()}"
