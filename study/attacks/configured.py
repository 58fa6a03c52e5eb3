"""Run an attack described by a config mapping (a params.yaml `evaluations` entry or a
method's `adversary`), so training and evaluation interpret attack settings one way."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from study.attacks.pgd import pgd_attack

ATTACK_TYPES = ("clean", "pgd")


def run_attack(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, attack: Mapping | None, generator: torch.Generator
) -> torch.Tensor:
    """The inputs to classify: `x` itself for a clean evaluation, else the attacked batch."""
    kind = (attack or {}).get("type", "clean")
    if kind == "clean":
        return x
    if kind == "pgd":
        return pgd_attack(
            model,
            x,
            y,
            eps=attack["eps"],
            alpha=attack["alpha"],
            steps=attack["steps"],
            restarts=attack.get("restarts", 1),
            norm=attack.get("norm", "linf"),
            random_start=attack.get("random_start", True),
            generator=generator,
        )
    raise ValueError(f"unknown attack type {kind!r}; valid: {', '.join(ATTACK_TYPES)}")
