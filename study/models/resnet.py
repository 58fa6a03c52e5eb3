"""ResNets (He et al. 2016), CIFAR variant: a 3x3 stride-1 stem and no max-pool, so small
inputs keep their resolution through the first stage.

`residual_stages` is the stage builder shared by every residual family here (basic and
bottleneck ResNets, pre-activation ResNets, wide ResNets): stage i has `blocks[i]` blocks
of width `widths[i]`, its first block strided (except in stage 0) to halve the resolution."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from study.models.normalize import Normalize

# block(in_channels, width, stride) -> module whose output has width * expansion channels.
BlockFactory = Callable[[int, int, int], nn.Module]


def residual_stages(
    block: BlockFactory,
    in_channels: int,
    widths: Sequence[int],
    blocks: Sequence[int],
    expansion: int = 1,
) -> tuple[nn.Sequential, int]:
    """The stages as ``nn.Sequential`` of ``nn.Sequential``s, and the output channel count."""
    stages: list[nn.Module] = []
    prev = in_channels
    for i, (width, n_blocks) in enumerate(zip(widths, blocks, strict=True)):
        first_stride = 1 if i == 0 else 2
        stage = []
        for j in range(n_blocks):
            stage.append(block(prev, width, first_stride if j == 0 else 1))
            prev = width * expansion
        stages.append(nn.Sequential(*stage))
    return nn.Sequential(*stages), prev


class BasicBlock(nn.Module):
    expansion = 1

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


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided, as in "ResNet v1.5"), 1x1 expand by 4. Attribute names
    follow torchvision (conv1..3, bn1..3, downsample), so ImageNet weights load by name."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int) -> None:
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: Tensor) -> Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = torch.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return torch.relu(out + shortcut)


class ResNet(nn.Module):
    """Stem conv-BN-ReLU, four stages (widths 64, 128, 256, 512 times the block's expansion;
    the last three halve the resolution), global average pooling, linear layer ``fc``.

    ``features(x)`` returns the pooled ``feature_dim``-wide representation."""

    widths = (64, 128, 256, 512)

    def __init__(
        self,
        blocks_per_stage: tuple[int, int, int, int],
        num_classes: int,
        in_channels: int,
        normalize: Normalize,
        block: type[BasicBlock] | type[Bottleneck] = BasicBlock,
    ) -> None:
        super().__init__()
        self.normalize = normalize
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, self.widths[0], 3, 1, padding=1, bias=False),
            nn.BatchNorm2d(self.widths[0]),
            nn.ReLU(inplace=True),
        )
        self.stages, self.feature_dim = residual_stages(
            block, self.widths[0], self.widths, blocks_per_stage, block.expansion
        )
        self.fc = nn.Linear(self.feature_dim, num_classes)

    def features(self, x: Tensor) -> Tensor:
        z = self.stages(self.stem(self.normalize(x)))
        return torch.flatten(nn.functional.adaptive_avg_pool2d(z, 1), 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.features(x))


def resnet18(num_classes: int, in_channels: int, normalize: Normalize) -> ResNet:
    return ResNet((2, 2, 2, 2), num_classes, in_channels, normalize)


def resnet50(num_classes: int, in_channels: int, normalize: Normalize) -> ResNet:
    return ResNet((3, 4, 6, 3), num_classes, in_channels, normalize, block=Bottleneck)
