"""ResNet-50 at ImageNet size (224 px): 7x7 stride-2 stem and 3x3 max-pool, then the
bottleneck stages of `study.models.resnet` ("v1.5": stride on the 3x3 conv).

Module names are torchvision's (conv1, bn1, layer1..layer4 with conv1..3, bn1..3 and
downsample.0/1, fc), so its `resnet50-*.pth` files and checkpoints derived from them
(RobustBench's ImageNet ResNet-50s) load by name. Only `normalize.*` is ours; it is set
from the checkpoint's own normalization, not learned."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from study.models.normalize import Normalize
from study.models.resnet import Bottleneck, residual_stages

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class ImageNetResNet50(nn.Module):
    def __init__(self, num_classes: int = 1000, normalize: Normalize | None = None) -> None:
        super().__init__()
        self.normalize = normalize or Normalize(IMAGENET_MEAN, IMAGENET_STD)
        self.conv1 = nn.Conv2d(3, 64, 7, 2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, padding=1)
        stages, self.feature_dim = residual_stages(
            Bottleneck, 64, (64, 128, 256, 512), (3, 4, 6, 3), Bottleneck.expansion
        )
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(self.feature_dim, num_classes)

    def features(self, x: Tensor) -> Tensor:
        z = self.maxpool(self.relu(self.bn1(self.conv1(self.normalize(x)))))
        z = self.layer4(self.layer3(self.layer2(self.layer1(z))))
        return torch.flatten(nn.functional.adaptive_avg_pool2d(z, 1), 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.features(x))

    def network_state_keys(self) -> set[str]:
        """The keys a torchvision ResNet-50 state dict has (everything but normalize.*)."""
        return {k for k in self.state_dict() if not k.startswith("normalize.")}
