"""Pretrained ImageNet models, evaluated but never trained here.

Weights are files placed in a local weights folder (config key `pretrained.weights_dir`,
or $STUDY_WEIGHTS_DIR); nothing is downloaded. Two checkpoint layouts are understood:

* torchvision: a plain ResNet-50 state dict (`resnet50-0676ba61.pth`, the IMAGENET1K_V1
  weights), normalized with the ImageNet mean/std;
* RobustBench: the adversarially trained ImageNet models it distributes
  (`<weights_dir>/imagenet/Linf/Salman2020Do_R50.pt`, as RobustBench's own model folder
  lays them out): the state dict may be nested under `model` or `state_dict`, its keys
  prefixed `module.` and/or `model.`, and it may carry its normalization (`normalize.mean`
  / `normalize.std`, or the robustness library's `normalizer.new_mean` / `new_std`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from study.io import load_torch
from study.models.imagenet_resnet import IMAGENET_MEAN, IMAGENET_STD, ImageNetResNet50
from study.models.normalize import Normalize

WEIGHTS_ENV = "STUDY_WEIGHTS_DIR"
WEIGHTS_CONFIG_KEY = "pretrained.weights_dir"


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


class WeightsUnavailableError(FileNotFoundError):
    """The weights file of a pretrained model is not in the weights folder."""


def get_pretrained_spec(name: str) -> PretrainedSpec:
    if name not in PRETRAINED:
        raise ValueError(f"unknown pretrained model {name!r}; valid names: {', '.join(PRETRAINED)}")
    return PRETRAINED[name]


def resolve_weights_dir(weights_dir: str | os.PathLike | None) -> Path:
    if weights_dir is not None and str(weights_dir) != "":
        return Path(weights_dir).expanduser()
    from_env = os.environ.get(WEIGHTS_ENV, "")
    if not from_env:
        raise WeightsUnavailableError(
            f"no weights folder given: set the config key {WEIGHTS_CONFIG_KEY} or ${WEIGHTS_ENV}"
        )
    return Path(from_env).expanduser()


def weights_path(spec: PretrainedSpec, weights_dir: str | os.PathLike | None) -> Path:
    path = resolve_weights_dir(weights_dir) / spec.file
    if not path.is_file():
        raise WeightsUnavailableError(
            f"weights of {spec.name} not found: expected the file {path} ({spec.layout} layout; "
            f"from {spec.source}). Place it there; the folder is the config key "
            f"{WEIGHTS_CONFIG_KEY} or ${WEIGHTS_ENV}."
        )
    return path


def _unwrap(checkpoint: Any, path: Path) -> dict[str, torch.Tensor]:
    """The state dict inside a checkpoint that may nest it under `model`/`state_dict`."""
    while isinstance(checkpoint, Mapping):
        tensors = {k: v for k, v in checkpoint.items() if isinstance(v, torch.Tensor)}
        if tensors and len(tensors) >= len(checkpoint) / 2:
            return tensors
        for key in ("state_dict", "model"):
            if isinstance(checkpoint.get(key), Mapping):
                checkpoint = checkpoint[key]
                break
        else:
            break
    raise ValueError(f"{path} holds no state dict (looked at the top and under 'state_dict'/'model')")


def _strip(key: str) -> str:
    for prefix in ("module.", "model."):
        while key.startswith(prefix):
            key = key[len(prefix):]
    return key


_NORMALIZATION_KEYS = {
    "normalize.mean": "mean", "normalize.std": "std",
    "normalizer.new_mean": "mean", "normalizer.new_std": "std",
}


def network_state(checkpoint: Any, path: Path) -> tuple[dict[str, torch.Tensor], dict[str, list[float]]]:
    """(network weights with torchvision key names, normalization found in the file)."""
    state: dict[str, torch.Tensor] = {}
    norm: dict[str, list[float]] = {}
    for key, value in _unwrap(checkpoint, path).items():
        key = _strip(key)
        if key.startswith("attacker."):  # the robustness library saves the model twice
            continue
        if key in _NORMALIZATION_KEYS:
            norm[_NORMALIZATION_KEYS[key]] = value.flatten().tolist()
            continue
        state[key] = value
    return state, norm


def load_pretrained(
    name: str, weights_dir: str | os.PathLike | None = None, device: torch.device | str = "cpu"
) -> ImageNetResNet50:
    """The pretrained model `name` in eval mode, its weights checked key by key."""
    spec = get_pretrained_spec(name)
    path = weights_path(spec, weights_dir)
    state, norm = network_state(load_torch(path), path)
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
    model.normalize = Normalize(norm.get("mean", spec.mean), norm.get("std", spec.std))
    return model.to(device).eval()
