"""Pre-activation ResNets (He et al. 2016, "Identity Mappings in Deep Residual Networks"),
in the CIFAR form used by Madry-style adversarial-training code (e.g. Rice et al. 2020):
3x3 stem conv without BN/ReLU, BN-ReLU before every conv, and a final BN-ReLU before
pooling. Wide ResNets (Zagoruyko & Komodakis 2016) are the same network with three wider
stages, which is how WRN-28-10 is built here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import torch
from torch import Tensor, nn

from study.models.normalize import Normalize
from study.models.resnet import residual_stages


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
    """Stem conv (``stem_width``), stages of ``PreActBlock`` (default widths 64..512), final
    BN-ReLU, global average pooling and linear layer ``fc``. ``features(x)`` is the pooled
    vector of the last stage's width."""

    widths = (64, 128, 256, 512)

    def __init__(
        self,
        blocks_per_stage: Sequence[int],
        num_classes: int,
        in_channels: int,
        normalize: Normalize,
        widths: Sequence[int] | None = None,
        stem_width: int | None = None,
    ) -> None:
        super().__init__()
        widths = tuple(self.widths if widths is None else widths)
        stem_width = widths[0] if stem_width is None else stem_width
        self.normalize = normalize
        self.stem = nn.Conv2d(in_channels, stem_width, 3, 1, padding=1, bias=False)
        self.stages, prev = residual_stages(PreActBlock, stem_width, widths, blocks_per_stage)
        self.bn = nn.BatchNorm2d(prev)
        self.feature_dim = prev
        self.fc = nn.Linear(prev, num_classes)

    def features(self, x: Tensor) -> Tensor:
        z = torch.relu(self.bn(self.stages(self.stem(self.normalize(x)))))
        return torch.flatten(nn.functional.adaptive_avg_pool2d(z, 1), 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.features(x))


ModelT = TypeVar("ModelT", bound=nn.Module)


def preact_resnet18(num_classes: int, in_channels: int, normalize: Normalize) -> PreActResNet:
    return PreActResNet((2, 2, 2, 2), num_classes, in_channels, normalize)


def wide_resnet_init(model: ModelT) -> ModelT:
    """The initialization of the wide ResNets of the reference codes (yaodongyu/TRADES
    models/wideresnet.py, locuslab/robust_overfitting wideresnet.py): convolutions He-normal
    over fan_out (std sqrt(2 / (k * k * out_channels))), BatchNorm weight 1 and bias 0, the
    linear layer's bias 0 (its weight keeps PyTorch's default)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)
    return model


def wide_resnet(
    depth: int, widen: int, num_classes: int, in_channels: int, normalize: Normalize
) -> PreActResNet:
    """WRN-depth-widen: three stages of (depth - 4) / 6 blocks, widths 16k, 32k, 64k,
    initialized as the reference codes' wide ResNets (`wide_resnet_init`)."""
    if (depth - 4) % 6:
        raise ValueError(f"wide ResNet depth must be 6n + 4, got {depth}")
    n = (depth - 4) // 6
    return wide_resnet_init(PreActResNet(
        (n, n, n), num_classes, in_channels, normalize,
        widths=(16 * widen, 32 * widen, 64 * widen), stem_width=16,
    ))


def wrn_28_10(num_classes: int, in_channels: int, normalize: Normalize) -> PreActResNet:
    return wide_resnet(28, 10, num_classes, in_channels, normalize)
