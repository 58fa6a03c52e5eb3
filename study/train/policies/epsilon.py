"""Epsilon policies: the attack radius of each class during training."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from study.config.types import CFA_WARMUP, EpsilonPolicy
from study.train.policies.registry import PolicyContext, Registry
from study.train.policies.stats import EpochStats, StatelessPolicy, warmup_epochs


class FixedEpsilon(StatelessPolicy):
    """The adversary's eps for every class."""

    def __init__(self, eps: float, num_classes: int):
        self.eps = float(eps)
        self.num_classes = num_classes

    @classmethod
    def from_config(cls, cfg: EpsilonPolicy, ctx: PolicyContext) -> FixedEpsilon:
        return cls(ctx.eps, ctx.num_classes)

    def class_eps(self) -> torch.Tensor:
        return torch.full((self.num_classes,), self.eps, dtype=torch.float64)


class CFAEpsilon(FixedEpsilon):
    """CFA (Wei et al. 2023; PKU-ML/CFA train.py, attack.py:cw_pgd_loss): eps_k = (lambda1 +
    t_k) * eps, t_k class k's training robust accuracy in the previous epoch. The first
    `warmup` share of the epochs uses eps: CFA's code calibrates from its 11th epoch of 200
    (--begin 10), FAIR-TAT's (target_train_new.py, --begin 1) from its 2nd."""

    def __init__(self, eps: float, num_classes: int, lam: float, epochs: int = 1, warmup: float = CFA_WARMUP):
        super().__init__(eps, num_classes)
        self.lam = float(lam)
        self.warmup_epochs = warmup_epochs(warmup, epochs)
        self.t: torch.Tensor | None = None

    @classmethod
    def from_config(cls, cfg: EpsilonPolicy, ctx: PolicyContext) -> CFAEpsilon:
        return cls(ctx.eps, ctx.num_classes, cfg.lambda_, ctx.epochs, cfg.warmup)

    def class_eps(self) -> torch.Tensor:
        if self.t is None:
            return super().class_eps()
        return (self.lam + self.t) * self.eps

    def update(self, stats: EpochStats) -> None:
        if stats.epoch >= self.warmup_epochs:
            self.t = stats.train_robust_acc.clone()

    def state_dict(self) -> dict:
        return {"t": self.t}

    def load_state_dict(self, state: Mapping) -> None:
        self.t = state["t"]


class RemarginEpsilon(FixedEpsilon):
    """FRL remargin (Xu et al. 2021; hannxu123/fair_robust utils_frl2.py:frl_train and the
    remargin-alone utils_frl1.py): lambda_c += rate * gamma1_c with the validation
    boundary-error gap gamma1_c = bndy_err_c - bndy_err - tau (bndy_err over the whole
    split), neither clamped nor halved; eps_c = eps * clamp(exp(scale * lambda_c), low, high).
    Updated at the start of each epoch in the reference, like FRLReweight (it reads the validation
    split: study.config.requirements.VALIDATION_READERS)."""

    primes = True

    def __init__(self, eps: float, num_classes: int, rate: float = 0.1, tau: float = 0.05, scale: float = 2.0,
                 low: float = 0.98, high: float = 2.5):
        super().__init__(eps, num_classes)
        self.rate, self.tau, self.scale, self.low, self.high = map(float, (rate, tau, scale, low, high))
        self.lam = torch.zeros(num_classes, dtype=torch.float64)

    @classmethod
    def from_config(cls, cfg: EpsilonPolicy, ctx: PolicyContext) -> RemarginEpsilon:
        return cls(ctx.eps, ctx.num_classes, rate=cfg.rate, tau=cfg.tau, scale=cfg.scale, low=cfg.low,
                   high=cfg.high)

    def multiplier(self) -> torch.Tensor:
        return torch.clamp(torch.exp(self.scale * self.lam), self.low, self.high)

    def class_eps(self) -> torch.Tensor:
        return self.eps * self.multiplier()

    def update(self, stats: EpochStats) -> None:
        self.lam = self.lam + self.rate * (stats.val_boundary_err - stats.val_boundary_err_total - self.tau)

    def state_dict(self) -> dict:
        return {"lam": self.lam}

    def load_state_dict(self, state: Mapping) -> None:
        self.lam = state["lam"]


class DAFAEpsilon(FixedEpsilon):
    """DAFA's class-wise margins (rucy74/DAFA losses.py:trades_loss): class c's attack radius
    w_c * eps, w the run's DAFA class weights (the weights policy `dafa`, which this policy
    reads: `bind`); with the adversary's `alpha_scaling: sample`, the step w_c * alpha too."""

    def __init__(self, eps: float, num_classes: int):
        super().__init__(eps, num_classes)
        self.source = None

    @classmethod
    def from_config(cls, cfg: EpsilonPolicy, ctx: PolicyContext) -> DAFAEpsilon:
        return cls(ctx.eps, ctx.num_classes)

    def bind(self, policies: Mapping) -> None:
        """Read the class weights of the method's weights policy (DAFA's: a method with these margins
        and other weights is refused where its config enters, study.config.requirements)."""
        self.source = policies["weights"]

    def class_eps(self) -> torch.Tensor:
        if self.source is None:
            raise ValueError("epsilon type 'dafa' is not bound to a weights policy (study.train.policies.build)")
        return self.eps * self.source.class_weights()


EPSILON = Registry("epsilon", default="fixed", config=EpsilonPolicy, types={
    "fixed": FixedEpsilon,
    "cfa": CFAEpsilon,
    "remargin": RemarginEpsilon,
    "dafa": DAFAEpsilon,
})
