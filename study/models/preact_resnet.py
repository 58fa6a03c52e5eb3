"""Pre-activation ResNet (He et al. 2016, "Identity Mappings in Deep Residual Networks"),
in the CIFAR form used by Madry-style adversarial-training code (e.g. Rice et al. 2020):
3x3 stem conv without BN/ReLU, BN-ReLU before every conv, and a final BN-ReLU before pooling.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from study.models.normalize import Normalize


class PreActBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_channels)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, padding=1, bias=False)
        self.shortcut: nn.Module | None = None
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Conv2d(in_channels, out_channels, 1, stride, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        out = torch.relu(self.bn1(x))
        # A projection shortcut reads the pre-activated input, as in the original design;
        # an identity shortcut carries the raw input so the residual path stays clean.
        shortcut = x if self.shortcut is None else self.shortcut(out)
        out = self.conv1(out)
        out = self.conv2(torch.relu(self.bn2(out)))
        return out + shortcut


class PreActResNet(nn.Module):
    """Stem conv, four stages of ``PreActBlock`` (widths 64..512), final BN-ReLU, global
    average pooling and linear layer ``fc``. ``features(x)`` is the pooled 512-d vector."""

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
        self.stem = nn.Conv2d(in_channels, self.widths[0], 3, 1, padding=1, bias=False)
        stages: list[nn.Module] = []
        prev = self.widths[0]
        for i, (width, n_blocks) in enumerate(zip(self.widths, blocks_per_stage, strict=True)):
            first_stride = 1 if i == 0 else 2
            blocks = []
            for j in range(n_blocks):
                blocks.append(PreActBlock(prev, width, first_stride if j == 0 else 1))
                prev = width
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.bn = nn.BatchNorm2d(prev)
        self.feature_dim = prev
        self.fc = nn.Linear(prev, num_classes)

    def features(self, x: Tensor) -> Tensor:
        z = torch.relu(self.bn(self.stages(self.stem(self.normalize(x)))))
        return torch.flatten(nn.functional.adaptive_avg_pool2d(z, 1), 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.features(x))


def preact_resnet18(num_classes: int, in_channels: int, normalize: Normalize) -> PreActResNet:
    return PreActResNet((2, 2, 2, 2), num_classes, in_channels, normalize)
