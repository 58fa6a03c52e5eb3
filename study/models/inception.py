"""GoogLeNet (Szegedy et al. 2015) and Inception-v3 (Szegedy et al. 2016), in CIFAR-size
variants: the ImageNet stems (stride-2 convs and max-pools taking 299 px down to 35) are
replaced by stride-1 3x3 convs, so 28-64 px inputs enter the inception blocks at full
resolution. Batch norm follows every conv; the auxiliary classifiers are left out (they
only serve ImageNet training), so ``fc`` is the one classifier."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from study.models.normalize import Normalize

Kernel = int | tuple[int, int]


class ConvBN(nn.Sequential):
    """conv (no bias) - BN - ReLU, with "same" padding unless told otherwise."""

    def __init__(
        self, in_channels: int, out_channels: int, kernel: Kernel, stride: int = 1,
        padding: Kernel | None = None,
    ) -> None:
        k = (kernel, kernel) if isinstance(kernel, int) else kernel
        pad = (k[0] // 2, k[1] // 2) if padding is None else padding
        super().__init__(
            nn.Conv2d(in_channels, out_channels, k, stride, padding=pad, bias=False),
            nn.BatchNorm2d(out_channels, eps=1e-3),
            nn.ReLU(inplace=True),
        )


class Branches(nn.Module):
    """Runs each branch on the input and concatenates the results along channels."""

    def __init__(self, *branches: nn.Module) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([branch(x) for branch in self.branches], 1)


def _seq(*modules: nn.Module) -> nn.Sequential:
    return nn.Sequential(*modules)


# --- GoogLeNet -------------------------------------------------------------------------

def googlenet_block(
    in_channels: int, n1: int, n3_reduce: int, n3: int, n5_reduce: int, n5: int, pool_proj: int
) -> Branches:
    """1x1 | 1x1-3x3 | 1x1-5x5 | maxpool-1x1, as in the original inception module."""
    return Branches(
        ConvBN(in_channels, n1, 1),
        _seq(ConvBN(in_channels, n3_reduce, 1), ConvBN(n3_reduce, n3, 3)),
        _seq(ConvBN(in_channels, n5_reduce, 1), ConvBN(n5_reduce, n5, 5)),
        _seq(nn.MaxPool2d(3, 1, padding=1), ConvBN(in_channels, pool_proj, 1)),
    )


# (n1, n3_reduce, n3, n5_reduce, n5, pool_proj) of blocks 3a..5b, from the paper's Table 1;
# "pool" marks the stride-2 max-pools between groups.
_GOOGLENET: Sequence[tuple[int, ...] | str] = (
    (64, 96, 128, 16, 32, 32), (128, 128, 192, 32, 96, 64), "pool",
    (192, 96, 208, 16, 48, 64), (160, 112, 224, 24, 64, 64), (128, 128, 256, 24, 64, 64),
    (112, 144, 288, 32, 64, 64), (256, 160, 320, 32, 128, 128), "pool",
    (256, 160, 320, 32, 128, 128), (384, 192, 384, 48, 128, 128),
)


class GoogLeNet(nn.Module):
    def __init__(self, num_classes: int, in_channels: int, normalize: Normalize) -> None:
        super().__init__()
        self.normalize = normalize
        layers: list[nn.Module] = [ConvBN(in_channels, 192, 3)]
        prev = 192
        for spec in _GOOGLENET:
            if isinstance(spec, str):  # "pool"
                layers.append(nn.MaxPool2d(3, 2, padding=1))
                continue
            layers.append(googlenet_block(prev, *spec))
            n1, _, n3, _, n5, pool_proj = spec
            prev = n1 + n3 + n5 + pool_proj
        self.body = nn.Sequential(*layers)
        self.dropout = nn.Dropout(0.4)
        self.feature_dim = prev
        self.fc = nn.Linear(prev, num_classes)

    def features(self, x: Tensor) -> Tensor:
        z = self.body(self.normalize(x))
        return self.dropout(torch.flatten(nn.functional.adaptive_avg_pool2d(z, 1), 1))

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.features(x))


# --- Inception-v3 ----------------------------------------------------------------------

def _avg_pool_proj(in_channels: int, out_channels: int) -> nn.Sequential:
    return _seq(nn.AvgPool2d(3, 1, padding=1), ConvBN(in_channels, out_channels, 1))


def inception_a(in_channels: int, pool_features: int) -> Branches:
    """35x35 module (paper Fig. 5): 1x1 | 1x1-5x5 | 1x1-3x3-3x3 | avgpool-1x1."""
    return Branches(
        ConvBN(in_channels, 64, 1),
        _seq(ConvBN(in_channels, 48, 1), ConvBN(48, 64, 5)),
        _seq(ConvBN(in_channels, 64, 1), ConvBN(64, 96, 3), ConvBN(96, 96, 3)),
        _avg_pool_proj(in_channels, pool_features),
    )


def reduction_b(in_channels: int) -> Branches:
    """Grid reduction to half size: strided 3x3 | 1x1-3x3-strided 3x3 | max-pool."""
    return Branches(
        ConvBN(in_channels, 384, 3, stride=2, padding=0),
        _seq(ConvBN(in_channels, 64, 1), ConvBN(64, 96, 3), ConvBN(96, 96, 3, stride=2, padding=0)),
        nn.MaxPool2d(3, 2),
    )


def inception_c(in_channels: int, c7: int) -> Branches:
    """17x17 module with 7x7 convs factorized into 1x7 and 7x1 (paper Fig. 6)."""
    return Branches(
        ConvBN(in_channels, 192, 1),
        _seq(ConvBN(in_channels, c7, 1), ConvBN(c7, c7, (1, 7)), ConvBN(c7, 192, (7, 1))),
        _seq(
            ConvBN(in_channels, c7, 1), ConvBN(c7, c7, (7, 1)), ConvBN(c7, c7, (1, 7)),
            ConvBN(c7, c7, (7, 1)), ConvBN(c7, 192, (1, 7)),
        ),
        _avg_pool_proj(in_channels, 192),
    )


def reduction_d(in_channels: int) -> Branches:
    return Branches(
        _seq(ConvBN(in_channels, 192, 1), ConvBN(192, 320, 3, stride=2, padding=0)),
        _seq(
            ConvBN(in_channels, 192, 1), ConvBN(192, 192, (1, 7)), ConvBN(192, 192, (7, 1)),
            ConvBN(192, 192, 3, stride=2, padding=0),
        ),
        nn.MaxPool2d(3, 2),
    )


def _split_1x3_3x1(in_channels: int, out_channels: int) -> Branches:
    return Branches(ConvBN(in_channels, out_channels, (1, 3)), ConvBN(in_channels, out_channels, (3, 1)))


def inception_e(in_channels: int) -> Branches:
    """8x8 module with expanded filter banks (paper Fig. 7)."""
    return Branches(
        ConvBN(in_channels, 320, 1),
        _seq(ConvBN(in_channels, 384, 1), _split_1x3_3x1(384, 384)),
        _seq(ConvBN(in_channels, 448, 1), ConvBN(448, 384, 3), _split_1x3_3x1(384, 384)),
        _avg_pool_proj(in_channels, 192),
    )


class InceptionV3(nn.Module):
    def __init__(self, num_classes: int, in_channels: int, normalize: Normalize) -> None:
        super().__init__()
        self.normalize = normalize
        self.body = nn.Sequential(
            # CIFAR stem: the ImageNet stem's layers without its strides and pools.
            ConvBN(in_channels, 32, 3), ConvBN(32, 32, 3), ConvBN(32, 64, 3),
            ConvBN(64, 80, 1), ConvBN(80, 192, 3),
            inception_a(192, 32), inception_a(256, 64), inception_a(288, 64),
            reduction_b(288),
            inception_c(768, 128), inception_c(768, 160), inception_c(768, 160),
            inception_c(768, 192),
            reduction_d(768),
            inception_e(1280), inception_e(2048),
        )
        self.dropout = nn.Dropout(0.5)
        self.feature_dim = 2048
        self.fc = nn.Linear(2048, num_classes)

    def features(self, x: Tensor) -> Tensor:
        z = self.body(self.normalize(x))
        return self.dropout(torch.flatten(nn.functional.adaptive_avg_pool2d(z, 1), 1))

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.features(x))
