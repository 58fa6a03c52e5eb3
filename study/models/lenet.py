"""LeNet-5 (LeCun et al. 1998) with ReLU and max-pooling, the common modern reading.

The first conv pads by 2 so 28x28 MNIST digits keep the classic 32x32 geometry; an adaptive
average pool before the classifier makes the 5x5 map of the original independent of the
input size, so the same network serves 28, 32 and 64 px inputs."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from study.models.normalize import Normalize


class LeNet(nn.Module):
    """conv(6,5x5)-pool-conv(16,5x5)-pool-fc120-fc84 and linear ``fc``; features are 84-d."""

    def __init__(self, num_classes: int, in_channels: int, normalize: Normalize) -> None:
        super().__init__()
        self.normalize = normalize
        self.conv = nn.Sequential(
            nn.Conv2d(in_channels, 6, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(5),
        )
        self.hidden = nn.Sequential(
            nn.Linear(16 * 5 * 5, 120), nn.ReLU(inplace=True), nn.Linear(120, 84), nn.ReLU(inplace=True)
        )
        self.feature_dim = 84
        self.fc = nn.Linear(84, num_classes)

    def features(self, x: Tensor) -> Tensor:
        return self.hidden(torch.flatten(self.conv(self.normalize(x)), 1))

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.features(x))
