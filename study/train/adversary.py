"""The adversary policy of the training engine: which inputs a batch is trained on.

`none` trains on the (augmented) clean batch; `pgd` on PGD examples (Madry et al.);
`fat` on FAT's early-stopped PGD examples (Zhang et al. 2020, `tau` extra steps).
The other policies set, per batch, each sample's eps (class-wise for CFA / FRL remargin),
its target (targeted attacks of FAIR-TAT), and the loss the attack ascends (`kl` for
TRADES: KL(p_clean || p_adv); targeted attacks always descend CE towards the target).
BatchNorm's mode while the attack runs is part of the method's definition (`bn_mode`).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from study.attacks.configured import run_attack
from study.attacks.fat import early_stopped_pgd
from study.attacks.pgd import pgd_attack
from study.train.policies.loss import trades_kl

ADVERSARY_TYPES = ("pgd", "fat")
BN_MODES = ("train", "eval")
INNER_LOSSES = ("ce", "kl")


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

    def perturb(
        self,
        model: nn.Module,
        x: torch.Tensor,
        y: torch.Tensor,
        generator: torch.Generator,
        *,
        eps: torch.Tensor | None = None,
        target: torch.Tensor | None = None,
        inner: str = "ce",
    ) -> torch.Tensor:
        """The training inputs for batch (x, y). `eps` (B,) overrides the configured radius
        per sample; the step size scales with it (alpha * eps_i / eps)."""
        if self.cfg is None:
            return x
        if inner not in INNER_LOSSES:
            raise ValueError(f"unknown inner loss {inner!r}; valid: {', '.join(INNER_LOSSES)}")
        kind = self.cfg.get("type", "pgd")
        plain = eps is None and target is None and inner == "ce"
        if self.cfg.get("bn_mode", "train") == "eval":
            model.eval()
        try:
            if plain and kind == "pgd":
                return run_attack(model, x, y, {"type": "pgd", **self.cfg}, generator)
            base = float(self.cfg["eps"])
            eps_t = torch.full((x.shape[0],), base, device=x.device) if eps is None else eps.float()
            alpha = float(self.cfg["alpha"]) * (eps_t / base if base > 0 else torch.ones_like(eps_t))
            loss = "ce"
            if inner == "kl" and target is None:
                with torch.no_grad():
                    clean_logits = model(x).float()

                def loss(logits, _labels):
                    return trades_kl(logits, clean_logits)
            if kind == "fat":
                return early_stopped_pgd(
                    model, x, y, eps=eps_t, alpha=alpha, steps=int(self.cfg["steps"]), tau=int(self.cfg["tau"]),
                    norm=self.cfg.get("norm", "linf"), target=target,
                    loss=None if loss == "ce" else loss, generator=generator,
                )
            return pgd_attack(
                model, x, y, eps=eps_t, alpha=alpha, steps=int(self.cfg["steps"]),
                restarts=self.cfg.get("restarts", 1), norm=self.cfg.get("norm", "linf"),
                targeted=target is not None, target=target, random_start=self.cfg.get("random_start", True),
                generator=generator, loss=loss,
            )
        finally:
            model.train()
