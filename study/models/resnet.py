"""ResNet with basic blocks (He et al. 2016), CIFAR variant: a 3x3 stride-1 stem and no
max-pool, so 32x32 inputs keep their resolution through the first stage."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from study.models.normalize import Normalize


class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            # Projection shortcut (option B) wherever the residual changes shape.
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: Tensor) -> Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """Stem conv-BN-ReLU, four stages of ``BasicBlock`` (widths 64, 128, 256, 512; the last
    three halve the resolution), global average pooling, linear layer ``fc``.

    ``features(x)`` returns the pooled ``feature_dim``-wide (512) representation.
    """

    widths = (64, 128, 256, 512)

    def __init__(
        self,
        blocks_per_stage: tuple[int, int, int, int],
        num_classes: int,
        in_channels: int,
        normalize: Normalize,
    ) -> None:
        super().__init__()
        self.normalize = normalize
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, self.widths[0], 3, 1, padding=1, bias=False),
            nn.BatchNorm2d(self.widths[0]),
            nn.ReLU(inplace=True),
        )
        stages: list[nn.Module] = []
        prev = self.widths[0]
        for i, (width, n_blocks) in enumerate(zip(self.widths, blocks_per_stage, strict=True)):
            first_stride = 1 if i == 0 else 2
            blocks = []
            for j in range(n_blocks):
                blocks.append(BasicBlock(prev, width, first_stride if j == 0 else 1))
                prev = width
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.feature_dim = prev
        self.fc = nn.Linear(prev, num_classes)

    def features(self, x: Tensor) -> Tensor:
        z = self.stages(self.stem(self.normalize(x)))
        return torch.flatten(nn.functional.adaptive_avg_pool2d(z, 1), 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.features(x))


def resnet18(num_classes: int, in_channels: int, normalize: Normalize) -> ResNet:
    return ResNet((2, 2, 2, 2), num_classes, in_channels, normalize)
