"""DenseNet-BC (Huang et al. 2017), growth rate 32, bottleneck width 4k, compression 0.5,
in the CIFAR form: a 3x3 stride-1 stem of 2k channels and no max-pool; the three
transitions halve the resolution (32 -> 4 px before the final pooling)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from study.models.normalize import Normalize
from study.models.pooled import PooledBody


def _bn_relu_conv(in_channels: int, out_channels: int, kernel: int) -> list[nn.Module]:
    return [
        nn.BatchNorm2d(in_channels),
        nn.ReLU(inplace=True),
        nn.Conv2d(in_channels, out_channels, kernel, padding=kernel // 2, bias=False),
    ]


class DenseLayer(nn.Module):
    """BN-ReLU-conv1x1(4k)-BN-ReLU-conv3x3(k); its k new maps are appended to the input."""

    def __init__(self, in_channels: int, growth: int, bottleneck: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            *_bn_relu_conv(in_channels, bottleneck * growth, 1),
            *_bn_relu_conv(bottleneck * growth, growth, 3),
        )

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([x, self.body(x)], 1)


class DenseNet(PooledBody):
    def __init__(
        self,
        layers_per_block: Sequence[int],
        num_classes: int,
        in_channels: int,
        normalize: Normalize,
        growth: int = 32,
        bottleneck: int = 4,
        compression: float = 0.5,
    ) -> None:
        super().__init__()
        self.normalize = normalize
        prev = 2 * growth
        body: list[nn.Module] = [nn.Conv2d(in_channels, prev, 3, padding=1, bias=False)]
        for i, n_layers in enumerate(layers_per_block):
            for _ in range(n_layers):
                body.append(DenseLayer(prev, growth, bottleneck))
                prev += growth
            if i < len(layers_per_block) - 1:
                out = int(prev * compression)
                body += [*_bn_relu_conv(prev, out, 1), nn.AvgPool2d(2)]
                prev = out
        body += [nn.BatchNorm2d(prev), nn.ReLU(inplace=True)]
        self.body = nn.Sequential(*body)
        self.feature_dim = prev
        self.fc = nn.Linear(prev, num_classes)



def densenet121(num_classes: int, in_channels: int, normalize: Normalize) -> DenseNet:
    return DenseNet((6, 12, 24, 16), num_classes, in_channels, normalize)


def densenet169(num_classes: int, in_channels: int, normalize: Normalize) -> DenseNet:
    return DenseNet((6, 12, 32, 32), num_classes, in_channels, normalize)
