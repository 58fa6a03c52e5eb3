"""Epsilon policies: the attack radius of each class during training."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from study.train.policies.stats import EpochStats, StatelessPolicy

EPSILON_TYPES = ("fixed", "cfa", "remargin")


class FixedEpsilon(StatelessPolicy):
    """The adversary's eps for every class."""

    def __init__(self, eps: float, num_classes: int):
        self.eps = float(eps)
        self.num_classes = num_classes

    def class_eps(self) -> torch.Tensor:
        return torch.full((self.num_classes,), self.eps, dtype=torch.float64)


class CFAEpsilon(FixedEpsilon):
    """CFA (Wei et al. 2023): eps_k = (lambda1 + t_k) * eps, t_k class k's training robust
    accuracy in the previous epoch; the first epoch uses eps."""

    def __init__(self, eps: float, num_classes: int, lam: float):
        super().__init__(eps, num_classes)
        self.lam = float(lam)
        self.t: torch.Tensor | None = None

    def class_eps(self) -> torch.Tensor:
        if self.t is None:
            return super().class_eps()
        return (self.lam + self.t) * self.eps

    def update(self, stats: EpochStats) -> None:
        self.t = stats.train_robust_acc.clone()

    def state_dict(self) -> dict:
        return {"t": self.t}

    def load_state_dict(self, state: Mapping) -> None:
        self.t = state["t"]


class RemarginEpsilon(FixedEpsilon):
    """FRL remargin (Xu et al. 2021): lambda_c += rate * gamma1_c with the validation
    boundary-error gap gamma1_c = bndy_err_c - bndy_err - tau; eps_c = eps *
    clamp(exp(scale * lambda_c), low, high)."""

    def __init__(self, eps: float, num_classes: int, rate: float = 0.1, tau: float = 0.05, scale: float = 2.0,
                 low: float = 0.98, high: float = 2.5):
        super().__init__(eps, num_classes)
        self.rate, self.tau, self.scale, self.low, self.high = map(float, (rate, tau, scale, low, high))
        self.lam = torch.zeros(num_classes, dtype=torch.float64)

    def multiplier(self) -> torch.Tensor:
        return torch.clamp(torch.exp(self.scale * self.lam), self.low, self.high)

    def class_eps(self) -> torch.Tensor:
        return self.eps * self.multiplier()

    def update(self, stats: EpochStats) -> None:
        bndy = stats.val_boundary_err
        self.lam = self.lam + self.rate * (bndy - bndy.mean() - self.tau)

    def state_dict(self) -> dict:
        return {"lam": self.lam}

    def load_state_dict(self, state: Mapping) -> None:
        self.lam = state["lam"]


def build_epsilon(cfg: Mapping | None, eps: float, num_classes: int) -> FixedEpsilon:
    cfg = dict(cfg or {"type": "fixed"})
    kind = cfg.get("type", "fixed")
    if kind == "fixed":
        return FixedEpsilon(eps, num_classes)
    if kind == "cfa":
        return CFAEpsilon(eps, num_classes, cfg.get("lambda", 0.5))
    if kind == "remargin":
        return RemarginEpsilon(eps, num_classes, rate=cfg.get("rate", 0.1), tau=cfg.get("tau", 0.05),
                               scale=cfg.get("scale", 2.0), low=cfg.get("low", 0.98), high=cfg.get("high", 2.5))
    raise ValueError(f"unknown epsilon type {kind!r}; valid: {', '.join(EPSILON_TYPES)}")
