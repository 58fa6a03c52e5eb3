"""The adversary policy of the training engine: which inputs a batch is trained on.

`none` trains on the (augmented) clean batch; `pgd` on PGD examples (Madry et al.);
`fat` on FAT's early-stopped PGD examples (Zhang et al. 2020, `tau` extra steps).
The start is uniform in the eps-ball (`random_start`), or x + `start_std` * N(0, 1) as in
TRADES' reference code (trades.py:trades_loss, 0.001).
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
from study.attacks.pgd import LossFn, pgd_attack
from study.train.policies.loss import trades_kl

BN_MODES = ("train", "eval")
INNER_LOSSES = ("ce", "kl")


def _alpha_fixed(alpha: float, eps: torch.Tensor, base: float) -> torch.Tensor:
    return torch.full_like(eps, alpha)


def _alpha_per_sample(alpha: float, eps: torch.Tensor, base: float) -> torch.Tensor:
    return alpha * eps / base


def _alpha_batch_max(alpha: float, eps: torch.Tensor, base: float) -> torch.Tensor:
    # A device-side max: no host sync, the batch keeps one step size.
    return (alpha * eps.max() / base).expand_as(eps)


#: How the step size follows a per-sample eps: `fixed` (CFA attack.py:cw_attack_pgd and
#: FAIR-TAT Targeted_attack.py:cw_attack_pgd keep 2/255; FRL remargin alone, utils_frl1.py),
#: `batch_max` (FRL reweight+remargin, utils_frl2.py:trades_adv: step = max(eps_i) / 4, i.e.
#: alpha * max(eps_i) / eps), `sample` (alpha * eps_i / eps for each sample).
ALPHA_SCALINGS = {"fixed": _alpha_fixed, "sample": _alpha_per_sample, "batch_max": _alpha_batch_max}


def _pgd(model: nn.Module, x: torch.Tensor, y: torch.Tensor, cfg: Mapping, *, eps: torch.Tensor,
         alpha: torch.Tensor, target: torch.Tensor | None, loss: LossFn | None,
         generator: torch.Generator) -> torch.Tensor:
    return pgd_attack(
        model, x, y, eps=eps, alpha=alpha, steps=int(cfg["steps"]), restarts=cfg.get("restarts", 1),
        norm=cfg.get("norm", "linf"), targeted=target is not None, target=target,
        random_start=cfg.get("random_start", True), generator=generator, loss=loss or "ce",
        start_std=cfg.get("start_std"),
    )


def _fat(model: nn.Module, x: torch.Tensor, y: torch.Tensor, cfg: Mapping, *, eps: torch.Tensor,
         alpha: torch.Tensor, target: torch.Tensor | None, loss: LossFn | None,
         generator: torch.Generator) -> torch.Tensor:
    return early_stopped_pgd(
        model, x, y, eps=eps, alpha=alpha, steps=int(cfg["steps"]), tau=int(cfg["tau"]),
        norm=cfg.get("norm", "linf"), target=target, loss=loss, generator=generator,
        random_start=cfg.get("random_start", True), start_std=cfg.get("start_std"),
        step_noise=float(cfg.get("step_noise", 0.0)),
    )


#: adversary type -> the attack that makes a batch's training inputs.
ATTACKS = {"pgd": _pgd, "fat": _fat}


class Adversary:
    def __init__(self, cfg: Mapping | None):
        self.cfg = dict(cfg) if cfg else None
        if self.cfg is not None:
            if self.cfg.get("type", "pgd") not in ATTACKS:
                raise ValueError(
                    f"unknown adversary type {self.cfg.get('type')!r}; valid: none, {', '.join(ATTACKS)}"
                )
            if self.cfg.get("bn_mode", "train") not in BN_MODES:
                raise ValueError(f"unknown bn_mode {self.cfg.get('bn_mode')!r}; valid: {', '.join(BN_MODES)}")
            if self.cfg.get("step_noise", 0) and self.cfg.get("type", "pgd") != "fat":
                raise ValueError("step_noise (FAT's omega) needs adversary type fat, "
                                 f"got {self.cfg.get('type', 'pgd')!r}")
            if self.cfg.get("alpha_scaling", "fixed") not in ALPHA_SCALINGS:
                raise ValueError(f"unknown alpha_scaling {self.cfg.get('alpha_scaling')!r}; "
                                 f"valid: {', '.join(ALPHA_SCALINGS)}")

    @property
    def active(self) -> bool:
        return self.cfg is not None

    @property
    def epsilon(self) -> float:
        return float(self.cfg["eps"]) if self.cfg else 0.0

    def step_sizes(self, eps: torch.Tensor) -> torch.Tensor:
        """Each sample's step size for per-sample radii `eps` (B,), by `alpha_scaling`."""
        alpha, base = float(self.cfg["alpha"]), float(self.cfg["eps"])
        if base <= 0:
            return torch.full_like(eps, alpha)
        return ALPHA_SCALINGS[self.cfg.get("alpha_scaling", "fixed")](alpha, eps, base)

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
        per sample; the step size follows it as `alpha_scaling` says (`step_sizes`)."""
        if self.cfg is None:
            return x
        if inner not in INNER_LOSSES:
            raise ValueError(f"unknown inner loss {inner!r}; valid: {', '.join(INNER_LOSSES)}")
        kind = self.cfg.get("type", "pgd")
        # The evaluation attack path (run_attack) knows only the uniform start.
        plain = eps is None and target is None and inner == "ce" and self.cfg.get("start_std") is None
        if self.cfg.get("bn_mode", "train") == "eval":
            model.eval()
        try:
            if plain and kind == "pgd":
                return run_attack(model, x, y, {"type": "pgd", **self.cfg}, generator)
            base = float(self.cfg["eps"])
            eps_t = torch.full((x.shape[0],), base, device=x.device) if eps is None else eps.float()
            alpha = self.step_sizes(eps_t)
            loss = None
            if inner == "kl" and target is None:
                with torch.no_grad():
                    clean_logits = model(x).float()

                def loss(logits, _labels):
                    return trades_kl(logits, clean_logits)
            return ATTACKS[kind](model, x, y, self.cfg, eps=eps_t, alpha=alpha, target=target, loss=loss,
                                 generator=generator)
        finally:
            model.train()
