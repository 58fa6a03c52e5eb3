"""The head shared by plain feed-forward models: global average pooling, then `fc`."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class PooledBody(nn.Module):
    """Subclasses set `normalize`, `body` (a module ending before pooling), `feature_dim`
    and `fc`; this gives them the registry contract's `features` and `forward`. Global
    pooling is what lets one architecture take 28, 32 or 64 px inputs."""

    normalize: nn.Module
    body: nn.Module
    fc: nn.Linear

    def features(self, x: Tensor) -> Tensor:
        z = self.body(self.normalize(x))
        return torch.flatten(nn.functional.adaptive_avg_pool2d(z, 1), 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.features(x))
