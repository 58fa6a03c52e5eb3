"""The adversary policy of the training engine: which inputs a batch is trained on.

`none` trains on the (augmented) clean batch; `pgd` on PGD examples (Madry et al.).
BatchNorm's mode while the attack runs is part of the method's definition (`bn_mode`).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from study.attacks.configured import run_attack

ADVERSARY_TYPES = ("pgd",)
BN_MODES = ("train", "eval")


class Adversary:
    def __init__(self, cfg: Mapping | None):
        self.cfg = dict(cfg) if cfg else None
        if self.cfg is not None:
            if self.cfg.get("type", "pgd") not in ADVERSARY_TYPES:
                raise ValueError(
                    f"unknown adversary type {self.cfg.get('type')!r}; valid: none, {', '.join(ADVERSARY_TYPES)}"
                )
            if self.cfg.get("bn_mode", "train") not in BN_MODES:
                raise ValueError(f"unknown bn_mode {self.cfg.get('bn_mode')!r}; valid: {', '.join(BN_MODES)}")

    @property
    def active(self) -> bool:
        return self.cfg is not None

    @property
    def epsilon(self) -> float:
        return float(self.cfg["eps"]) if self.cfg else 0.0

    def perturb(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        if self.cfg is None:
            return x
        if self.cfg.get("bn_mode", "train") == "eval":
            model.eval()
        try:
            return run_attack(model, x, y, {"type": "pgd", **self.cfg}, generator)
        finally:
            model.train()
