"""Pretrained ImageNet models, evaluated but never trained here.

Weights are files placed in a local weights folder (config key `pretrained.weights_dir`,
or $STUDY_WEIGHTS_DIR); nothing is downloaded. Two kinds of file:

* torchvision: a plain ResNet-50 state dict (`resnet50-0676ba61.pth`, the IMAGENET1K_V1
  weights), normalized with the ImageNet mean/std;
* RobustBench: the adversarially trained ImageNet models of its zoo, at their place in
  robustbench's model folder (`<weights_dir>/imagenet/Linf/Salman2020Do_R50.pt`), loaded by
  robustbench itself (`study.models.zoo`), which knows its checkpoints' layout."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from study.io import load_torch
from study.models.imagenet_resnet import IMAGENET_MEAN, IMAGENET_STD, ImageNetResNet50
from study.models.normalize import Normalize
from study.models.weights import WEIGHTS_CONFIG_KEY, WEIGHTS_ENV, WeightsUnavailableError, resolve_weights_dir
from study.models.zoo import ZooEntry, load_zoo_model

__all__ = ["PRETRAINED", "WEIGHTS_CONFIG_KEY", "WEIGHTS_ENV", "PretrainedSpec", "WeightsUnavailableError",
           "get_pretrained_spec", "load_pretrained", "resolve_weights_dir", "weights_path"]


@dataclass(frozen=True)
class PretrainedSpec:
    """`file` is relative to the weights folder; `threat` says what it was trained against."""

    name: str
    arch: str
    file: str
    layout: str  # "torchvision" or "robustbench"
    training: str
    source: str
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD

    @property
    def zoo_entry(self) -> ZooEntry | None:
        """The RobustBench zoo entry that robustbench loads this model as (its layout only)."""
        if self.layout != "robustbench":
            return None
        dataset, threat_model, _ = self.file.split("/")
        return ZooEntry(dataset, threat_model, self.name)


PRETRAINED: dict[str, PretrainedSpec] = {
    "resnet50_torchvision": PretrainedSpec(
        name="resnet50_torchvision",
        arch="resnet50",
        file="resnet50-0676ba61.pth",
        layout="torchvision",
        training="standard",
        source="https://download.pytorch.org/models/resnet50-0676ba61.pth",
    ),
    "Salman2020Do_R50": PretrainedSpec(
        name="Salman2020Do_R50",
        arch="resnet50",
        file="imagenet/Linf/Salman2020Do_R50.pt",
        layout="robustbench",
        training="adversarial (Linf, eps 4/255; Salman et al. 2020)",
        source="RobustBench model zoo: load_model('Salman2020Do_R50', dataset='imagenet', "
        "threat_model='Linf')",
    ),
}


def get_pretrained_spec(name: str) -> PretrainedSpec:
    if name not in PRETRAINED:
        raise ValueError(f"unknown pretrained model {name!r}; valid names: {', '.join(PRETRAINED)}")
    return PRETRAINED[name]


def weights_path(spec: PretrainedSpec, weights_dir: str | os.PathLike | None) -> Path:
    path = resolve_weights_dir(weights_dir) / spec.file
    if not path.is_file():
        raise WeightsUnavailableError(
            f"weights of {spec.name} not found: expected the file {path} ({spec.layout} layout; "
            f"from {spec.source}). Place it there; the folder is the config key "
            f"{WEIGHTS_CONFIG_KEY} or ${WEIGHTS_ENV}."
        )
    return path


def load_pretrained(
    name: str, weights_dir: str | os.PathLike | None = None, device: torch.device | str = "cpu"
) -> nn.Module:
    """The pretrained model `name` in eval mode: RobustBench's through robustbench, the
    torchvision ResNet-50 from its plain state dict, checked key by key."""
    spec = get_pretrained_spec(name)
    if spec.zoo_entry is not None:
        return load_zoo_model(spec.zoo_entry, weights_dir, device)
    path = weights_path(spec, weights_dir)
    state = dict(load_torch(path))
    # Built without memory or random init (meta device): every weight comes from the file.
    with torch.device("meta"):
        model = ImageNetResNet50(1000)
    expected = model.network_state_keys()
    for key in expected - state.keys():
        # Older torchvision files predate BatchNorm's batch counter, which eval never uses.
        if key.endswith(".num_batches_tracked"):
            state[key] = torch.tensor(0, dtype=torch.long)
    missing, unexpected = sorted(expected - state.keys()), sorted(state.keys() - expected)
    if missing or unexpected:
        raise ValueError(
            f"{path} does not hold {spec.arch} weights in the {spec.layout} layout: "
            f"{len(missing)} missing keys (e.g. {missing[:3]}), {len(unexpected)} unexpected "
            f"(e.g. {unexpected[:3]})"
        )
    model.load_state_dict(state, strict=False, assign=True)
    model.normalize = Normalize(spec.mean, spec.std)
    return model.to(device).eval()
