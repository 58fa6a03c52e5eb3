"""Loss policies: the per-sample training objective from clean and adversarial logits.

Each takes per-class multipliers `w_nat` (on the natural / CE term) and `w_bndy` (on the
boundary / KL term) from the class-weight policy, so FRL's reweighting composes with any
loss. Per-sample values come back (the engine averages them and records them per class).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from study.train.policies.stats import EpochStats, StatelessPolicy

LOSS_TYPES = ("ce", "trades", "mixed")


def trades_kl(adv_logits: torch.Tensor, clean_logits: torch.Tensor) -> torch.Tensor:
    """Per-sample KL(p_clean || p_adv), summed over classes (TRADES' boundary term)."""
    return F.kl_div(F.log_softmax(adv_logits, dim=1), F.softmax(clean_logits, dim=1), reduction="none").sum(dim=1)


class CELoss(StatelessPolicy):
    """Cross-entropy on the adversarial example (Madry et al. 2018)."""

    inner = "ce"            # the loss the training attack ascends
    needs_clean = False     # whether the objective needs the clean logits

    def __init__(self, num_classes: int):
        self.num_classes = num_classes

    def class_beta(self) -> torch.Tensor:
        return torch.zeros(self.num_classes, dtype=torch.float64)

    def per_sample(self, clean_logits, adv_logits, y, w_nat, w_bndy) -> torch.Tensor:
        return w_nat[y] * F.cross_entropy(adv_logits, y, reduction="none")


class TradesLoss(CELoss):
    """TRADES (Zhang et al. 2019): CE(clean) + beta * KL(p_clean || p_adv), the attack
    ascending the KL. With `lambda2`, CFA's class-wise beta_k = (lambda2 + t_k) * beta from
    the previous epoch's training robust accuracy t_k (beta in the first epoch)."""

    inner = "kl"
    needs_clean = True

    def __init__(self, num_classes: int, beta: float = 6.0, lambda2: float | None = None):
        super().__init__(num_classes)
        self.beta = float(beta)
        self.lambda2 = None if lambda2 is None else float(lambda2)
        self.t: torch.Tensor | None = None

    def class_beta(self) -> torch.Tensor:
        if self.lambda2 is None or self.t is None:
            return torch.full((self.num_classes,), self.beta, dtype=torch.float64)
        return (self.lambda2 + self.t) * self.beta

    def per_sample(self, clean_logits, adv_logits, y, w_nat, w_bndy) -> torch.Tensor:
        beta = self.class_beta().to(adv_logits.device, adv_logits.dtype)
        natural = F.cross_entropy(clean_logits, y, reduction="none")
        return w_nat[y] * natural + beta[y] * w_bndy[y] * trades_kl(adv_logits, clean_logits)

    def update(self, stats: EpochStats) -> None:
        if self.lambda2 is not None:
            self.t = stats.train_robust_acc.clone()

    def state_dict(self) -> dict:
        return {"t": self.t}

    def load_state_dict(self, state: Mapping) -> None:
        self.t = state["t"]


class MixedLoss(CELoss):
    """(1 - adv_weight) * CE(clean) + adv_weight * CE(adversarial) (Goodfellow et al. 2015)."""

    needs_clean = True

    def __init__(self, num_classes: int, adv_weight: float = 0.5):
        super().__init__(num_classes)
        if not 0 <= adv_weight <= 1:
            raise ValueError(f"loss.adv_weight must be in [0, 1], got {adv_weight}")
        self.adv_weight = float(adv_weight)

    def per_sample(self, clean_logits, adv_logits, y, w_nat, w_bndy) -> torch.Tensor:
        clean = F.cross_entropy(clean_logits, y, reduction="none")
        adv = F.cross_entropy(adv_logits, y, reduction="none")
        return w_nat[y] * ((1 - self.adv_weight) * clean + self.adv_weight * adv)


def build_loss(cfg: Mapping | None, num_classes: int) -> CELoss:
    cfg = dict(cfg or {"type": "ce"})
    kind = cfg.get("type", "ce")
    if kind == "ce":
        return CELoss(num_classes)
    if kind == "trades":
        return TradesLoss(num_classes, cfg.get("beta", 6.0), cfg.get("lambda2"))
    if kind == "mixed":
        return MixedLoss(num_classes, cfg.get("adv_weight", 0.5))
    raise ValueError(f"unknown loss type {kind!r}; valid: {', '.join(LOSS_TYPES)}")
