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

    widths: tuple[int, ...] = (32, 64, 128)
    #: width of a stride-2 3x3 conv-BN-ReLU stem before the stages; None: no stem
    stem: int | None = None

    def __init__(self, num_classes: int, in_channels: int, normalize: Normalize) -> None:
        super().__init__()
        self.normalize = normalize
        layers: list[nn.Module] = []
        prev = in_channels
        if self.stem is not None:
            layers += [nn.Conv2d(prev, self.stem, 3, stride=2, padding=1, bias=False),
                       nn.BatchNorm2d(self.stem), nn.ReLU(inplace=True)]
            prev = self.stem
        for width in self.widths:
            layers += _conv_bn_relu(prev, width)
            layers.append(nn.MaxPool2d(2))
            prev = width
        self.body = nn.Sequential(*layers)
        self.feature_dim = prev
        self.fc = nn.Linear(prev, num_classes)




class StridedSmallCNN(SmallCNN):
    """A CIFAR-10 model for CPU-scale runs: a stride-2 stem (32 channels) that halves the image at once,
    then three stages of 64, 128 and 256 channels. About 29 MFLOPs per 32x32 image against
    the small CNN's 21, yet faster on a CPU: the small CNN spends most of its time on its
    first stage, 32 channels of 32x32 pixels through BatchNorm, ReLU and pooling, which are
    memory-bound; here the widest maps are 16x16. Twice the final width gives adversarial
    training more capacity (docs/methods.md, "The demo's recipe", has the measurements)."""

    widths = (64, 128, 256)
    stem = 32
