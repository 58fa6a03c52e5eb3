"""Architecture table, the ``build_model`` factory, and a FLOP counter for benchmarks.

Every registered model follows one contract, which later code relies on:

* input: float pixels in [0, 1], shape (B, C, H, W); the first layer, ``model.normalize``
  (a :class:`Normalize`), applies the dataset mean/std, so attacks work in pixel space;
* ``model.features(x)`` -> penultimate representation, shape (B, ``model.feature_dim``);
* ``model.fc`` -> the final ``nn.Linear``; ``model(x) == model.fc(model.features(x))``.

Adding an architecture means writing a module that follows the contract and adding one
``ModelSpec`` row to ``_ROWS``: its name, module and factory, display label, forward cost,
parameter count, feature width and smallest input; the params check, the run-config check, the
labels, the price and the job requests read that row, and nothing else names the model.

The table names each architecture's module and factory instead of importing them: the
plan (the params check, Snakemake's DAG) reads ``MODELS`` without importing torch,
and ``build_model`` imports the one module it builds from.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn


@dataclass(frozen=True)
class ModelSpec:
    """An architecture: ``study.models.<module>.<factory>(num_classes, in_channels, normalize)``
    creates it; ``label`` is what figures and tables call it (study.labels); ``gflops_32`` its
    forward GFLOPs per 32x32 RGB image (10 classes, ``count_flops``), from which study.workload
    prices a job's time; ``parameters`` its parameter count at 10 classes and 3 input channels,
    from which study.workload prices its checkpoints' bytes and its host memory; ``feature_dim``
    the width of ``model.features(x)``. The tests build every row's model and check all three.

    ``min_image_size`` is the smallest side the architecture accepts; all models end in
    global pooling, so every size from there up works.
    """

    name: str
    module: str
    factory: str
    label: str
    gflops_32: float
    parameters: int
    feature_dim: int
    min_image_size: int

    @property
    def build(self) -> Callable[..., nn.Module]:
        return getattr(importlib.import_module(f"study.models.{self.module}"), self.factory)


_ROWS = (
    # Three 2x2 max-pools / three stride-2 stages each shrink the input by 8 overall.
    ModelSpec("small_cnn", "small_cnn", "SmallCNN", "Small CNN", 0.021,
              parameters=94_762, feature_dim=128, min_image_size=8),
    # A stride-2 stem, then three 2x2 max-pools: 16 px at least.
    ModelSpec("small_cnn_s2", "small_cnn", "StridedSmallCNN", "Small CNN-S2", 0.029,
              parameters=391_466, feature_dim=256, min_image_size=16),
    ModelSpec("resnet18", "resnet", "resnet18", "ResNet-18", 1.11,
              parameters=11_173_962, feature_dim=512, min_image_size=8),
    ModelSpec("preact_resnet18", "preact_resnet", "preact_resnet18", "PreAct-ResNet-18", 1.11,
              parameters=11_172_170, feature_dim=512, min_image_size=8),
    # Pool, 5x5 valid conv, pool: the second conv needs a map of at least 5 px.
    ModelSpec("lenet", "lenet", "LeNet", "LeNet", 0.0017,
              parameters=62_006, feature_dim=84, min_image_size=10),
    # Max-pools rounding up reach 1 px from any size.
    ModelSpec("vgg16", "vgg", "vgg16", "VGG-16", 0.63,
              parameters=14_724_042, feature_dim=512, min_image_size=8),
    ModelSpec("vgg19", "vgg", "vgg19", "VGG-19", 0.80,
              parameters=20_035_018, feature_dim=512, min_image_size=8),
    ModelSpec("resnet50", "resnet", "resnet50", "ResNet-50", 2.60,
              parameters=23_520_842, feature_dim=2048, min_image_size=8),
    ModelSpec("wrn_28_10", "preact_resnet", "wrn_28_10", "WRN-28-10", 10.49,
              parameters=36_479_194, feature_dim=640, min_image_size=8),
    ModelSpec("densenet121", "densenet", "densenet121", "DenseNet-121", 1.78,
              parameters=6_956_298, feature_dim=1024, min_image_size=8),
    ModelSpec("densenet169", "densenet", "densenet169", "DenseNet-169", 2.12,
              parameters=12_493_322, feature_dim=1664, min_image_size=8),
    ModelSpec("googlenet", "inception", "GoogLeNet", "GoogLeNet", 2.89,
              parameters=5_871_914, feature_dim=1024, min_image_size=8),
    # Two unpadded stride-2 3x3 reductions: 8 -> 3 -> 1.
    ModelSpec("inception_v3", "inception", "InceptionV3", "Inception-v3", 7.26,
              parameters=21_806_058, feature_dim=2048, min_image_size=8),
)
#: the architectures the study trains, by name
MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in _ROWS}

#: their names, in the order of the table
MODEL_NAMES: tuple[str, ...] = tuple(MODELS)


def model_spec(name: str) -> ModelSpec:
    """The row of model `name`; ValueError naming the valid names where the table holds none."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; valid names: {', '.join(MODELS)}")
    return MODELS[name]


def build_model(
    name: str,
    num_classes: int,
    in_channels: int = 3,
    image_size: int = 32,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
) -> nn.Module:
    """Build registered architecture ``name`` for ``image_size`` x ``image_size`` inputs.

    ``mean``/``std`` are the per-channel dataset statistics applied by the model's first
    layer; ``None`` means mean 0 / std 1 (no normalization).
    """
    spec = model_spec(name)
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2, got {num_classes}")
    if in_channels < 1:
        raise ValueError(f"in_channels must be >= 1, got {in_channels}")
    if image_size < spec.min_image_size:
        raise ValueError(
            f"model {name!r} needs image_size >= {spec.min_image_size}, got {image_size}"
        )
    from study.models.normalize import Normalize

    mean = [0.0] * in_channels if mean is None else list(mean)
    std = [1.0] * in_channels if std is None else list(std)
    if len(mean) != in_channels or len(std) != in_channels:
        raise ValueError(
            f"mean and std need in_channels={in_channels} values each, "
            f"got mean={mean} and std={std}"
        )
    return spec.build(num_classes, in_channels, Normalize(mean, std))


def count_flops(model: nn.Module, input_shape: Sequence[int]) -> int:
    """FLOPs of one forward pass on a single image of shape ``input_shape`` = (C, H, W).

    Counts 2 x multiply-accumulates of every convolution and linear layer (bias additions,
    normalization, activations and pooling are ignored, the usual convention). The model's
    train/eval mode and BatchNorm running statistics are left as they were.
    """
    import torch
    from torch import nn

    if len(input_shape) != 3:
        raise ValueError(f"input_shape must be (C, H, W), got {tuple(input_shape)}")
    macs = 0

    def conv_hook(module: nn.modules.conv._ConvNd, inputs: tuple, out: torch.Tensor) -> None:
        nonlocal macs
        kernel = 1
        for k in module.kernel_size:
            kernel *= k
        macs += out.numel() * (module.in_channels // module.groups) * kernel

    def linear_hook(module: nn.Linear, inputs: tuple, out: torch.Tensor) -> None:
        nonlocal macs
        macs += out.numel() * module.in_features

    handles = []
    for module in model.modules():
        if isinstance(module, nn.modules.conv._ConvNd):
            handles.append(module.register_forward_hook(conv_hook))
        elif isinstance(module, nn.Linear):
            handles.append(module.register_forward_hook(linear_hook))
    param = next(model.parameters(), None)
    device = param.device if param is not None else torch.device("cpu")
    dtype = param.dtype if param is not None else torch.float32
    was_training = model.training
    try:
        # Eval mode so a batch of one passes BatchNorm without touching running statistics.
        model.eval()
        with torch.no_grad():
            model(torch.zeros(1, *input_shape, device=device, dtype=dtype))
    finally:
        model.train(was_training)
        for handle in handles:
            handle.remove()
    return 2 * macs
