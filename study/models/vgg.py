"""VGG-16/19 (Simonyan & Zisserman 2015) with batch norm, in the CIFAR form: the five conv
blocks end in 2x2 max-pools and a single linear layer ``fc`` replaces the 4096-wide
classifier. The pools round up (``ceil_mode``) so 28 px inputs (28-14-7-4-2-1) pass as
well as 32 and 64 px; a global average pool makes the 512-d features size-independent."""

from __future__ import annotations

from torch import nn

from study.models.normalize import Normalize
from study.models.pooled import PooledBody

# Conv widths per block; each block is followed by a max-pool.
_BLOCKS = {
    "vgg16": ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512), (512, 512, 512)),
    "vgg19": ((64, 64), (128, 128), (256,) * 4, (512,) * 4, (512,) * 4),
}


class VGG(PooledBody):
    def __init__(self, config: str, num_classes: int, in_channels: int, normalize: Normalize) -> None:
        super().__init__()
        self.normalize = normalize
        layers: list[nn.Module] = []
        prev = in_channels
        for block in _BLOCKS[config]:
            for width in block:
                layers += [
                    nn.Conv2d(prev, width, 3, padding=1, bias=False),
                    nn.BatchNorm2d(width),
                    nn.ReLU(inplace=True),
                ]
                prev = width
            layers.append(nn.MaxPool2d(2, ceil_mode=True))
        self.body = nn.Sequential(*layers)
        self.feature_dim = prev
        self.fc = nn.Linear(prev, num_classes)



def vgg16(num_classes: int, in_channels: int, normalize: Normalize) -> VGG:
    return VGG("vgg16", num_classes, in_channels, normalize)


def vgg19(num_classes: int, in_channels: int, normalize: Normalize) -> VGG:
    return VGG("vgg19", num_classes, in_channels, normalize)
