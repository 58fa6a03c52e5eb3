"""The attack functions of the evaluation kinds (study.config.evaluations: each row names
its function here): each attacks a batch as the evaluation's typed settings say, and returns
(inputs to classify, per-sample name of the attack that broke each sample, or None). Every
evaluation, the per-epoch records and the checks run them through study.predict, so attack
settings are read one way. This layer sits below the configuration, so the settings are read
by attribute, not imported as types."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from study.attacks.pgd import pgd_attack

#: (inputs to classify, per-sample name of the attack that broke each sample, or None)
Attacked = tuple[torch.Tensor, np.ndarray | None]


def attack_clean(model: nn.Module, x: torch.Tensor, y: torch.Tensor, attack: Any,
                 generator: torch.Generator) -> Attacked:
    return x, None


def attack_pgd(model: nn.Module, x: torch.Tensor, y: torch.Tensor, attack: Any,
               generator: torch.Generator) -> Attacked:
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


def attack_autoattack(model: nn.Module, x: torch.Tensor, y: torch.Tensor, attack: Any,
                      generator: torch.Generator) -> Attacked:
    from study.attacks.autoattack import attack_list, autoattack_batch

    # Each batch gets its own seed from the evaluation's generator, so a batch's
    # result doesn't depend on the batches before it beyond that draw.
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator, device=generator.device).item())
    attacks = ["square"] if attack.type == "square" else attack_list(attack)
    return autoattack_batch(model, x, y, attack.model_copy(update={"seed": seed}), attacks)
