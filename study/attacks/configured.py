"""Run an attack described by an evaluation's typed settings (study.config.types: the
`Evaluation` union, parsed by the caller, study.predict), so every evaluation, the per-epoch
records and the checks interpret attack settings one way. This layer sits below the
configuration, so the settings are read by attribute, not imported as types."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from study.attacks.pgd import pgd_attack


def _clean(model: nn.Module, x: torch.Tensor, y: torch.Tensor, attack: Any, generator: torch.Generator):
    return x, None


def _pgd(model: nn.Module, x: torch.Tensor, y: torch.Tensor, attack: Any, generator: torch.Generator):
    adv = pgd_attack(
        model,
        x,
        y,
        eps=attack.eps,
        alpha=attack.alpha,
        steps=attack.steps,
        restarts=attack.restarts,
        norm=attack.norm,
        random_start=attack.random_start,
        generator=generator,
    )
    return adv, None


def _autoattack(model: nn.Module, x: torch.Tensor, y: torch.Tensor, attack: Any, generator: torch.Generator):
    from study.attacks.autoattack import attack_list, autoattack_batch

    # Each batch gets its own seed from the evaluation's generator, so a batch's
    # result doesn't depend on the batches before it beyond that draw.
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator, device=generator.device).item())
    attacks = ["square"] if attack.type == "square" else attack_list(attack)
    return autoattack_batch(model, x, y, attack.model_copy(update={"seed": seed}), attacks)


#: evaluation `type` -> the function that attacks a batch: (inputs to classify, broken_by or None)
ATTACKS = {"clean": _clean, "pgd": _pgd, "autoattack": _autoattack, "square": _autoattack}
ATTACK_TYPES = tuple(ATTACKS)


def run_attack(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, attack: Any | None, generator: torch.Generator
) -> torch.Tensor:
    """The inputs to classify: `x` itself for a clean evaluation, else the attacked batch."""
    return run_attack_detailed(model, x, y, attack, generator)[0]


def run_attack_detailed(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, attack: Any | None, generator: torch.Generator
) -> tuple[torch.Tensor, np.ndarray | None]:
    """(inputs to classify, per-sample name of the attack that broke each sample or None
    where the attack type has a single attack). AutoAttack and Square name 'clean' for a
    sample misclassified before any attack and '' for one that no attack broke."""
    kind = attack.type if attack is not None else "clean"
    if kind not in ATTACKS:
        raise ValueError(f"unknown attack type {kind!r}; valid: {', '.join(ATTACK_TYPES)}")
    return ATTACKS[kind](model, x, y, attack, generator)
