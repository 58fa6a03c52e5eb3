"""A small VGG-style CNN for CPU presets: useful CIFAR-10 accuracy in a few CPU epochs,
cheap enough (about 20 MFLOPs per 32x32 image) for adversarial training on 2 cores."""

from __future__ import annotations

from torch import nn

from study.models.normalize import Normalize
from study.models.pooled import PooledBody


def _conv_bn_relu(in_channels: int, out_channels: int) -> list[nn.Module]:
    return [
        nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    ]


class SmallCNN(PooledBody):
    """Three stages (32, 64, 128 channels) of one conv-BN-ReLU layer and a 2x2 max-pool,
    then global average pooling and one linear layer (``fc``).

    ``features(x)`` returns the pooled 128-d representation; ``feature_dim`` holds that width.
    Global pooling makes any input of at least 8x8 pixels work (28, 32, 64, ...).
    """

    widths = (32, 64, 128)

    def __init__(self, num_classes: int, in_channels: int, normalize: Normalize) -> None:
        super().__init__()
        self.normalize = normalize
        layers: list[nn.Module] = []
        prev = in_channels
        for width in self.widths:
            layers += _conv_bn_relu(prev, width)
            layers.append(nn.MaxPool2d(2))
            prev = width
        self.body = nn.Sequential(*layers)
        self.feature_dim = prev
        self.fc = nn.Linear(prev, num_classes)

