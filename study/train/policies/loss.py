"""Loss policies: the per-sample training objective from clean and adversarial logits.

Each takes per-class multipliers `w_nat` (on the natural / CE term) and `w_bndy` (on the
boundary / KL term) from the class-weight policy, so FRL's reweighting composes with any
loss. Per-sample values come back (the engine averages them and records them per class);
where the weight policy asks for it (FRL), a term's multipliers are divided by their batch
mean first, so the engine's batch mean equals the reference's sum(w * l) / sum(w).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from study.config.types import CFA_WARMUP, LossPolicy
from study.train.policies.registry import PolicyContext, Registry
from study.train.policies.stats import EpochStats, StatelessPolicy, warmup_epochs
from study.train.policies.weights import WEIGHT_NORMALIZATIONS


def trades_kl(adv_logits: torch.Tensor, clean_logits: torch.Tensor) -> torch.Tensor:
    """Per-sample KL(p_clean || p_adv), summed over classes (TRADES' boundary term)."""
    return F.kl_div(F.log_softmax(adv_logits, dim=1), F.softmax(clean_logits, dim=1), reduction="none").sum(dim=1)


class CELoss(StatelessPolicy):
    """Cross-entropy on the adversarial example (Madry et al. 2018)."""

    inner = "ce"            # the loss the training attack ascends
    # (whether the objective reads the clean logits, and so the step forwards the clean batch, is the
    # loss type's: study.config.requirements.CLEAN_LOSSES)

    def __init__(self, num_classes: int, weight_normalization: str = "mean"):
        if weight_normalization not in WEIGHT_NORMALIZATIONS:
            raise ValueError(f"unknown weight normalization {weight_normalization!r}; "
                             f"valid: {', '.join(WEIGHT_NORMALIZATIONS)}")
        self.num_classes = num_classes
        self.weight_normalization = weight_normalization

    @classmethod
    def from_config(cls, cfg: LossPolicy, ctx: PolicyContext) -> CELoss:
        return cls(ctx.num_classes, ctx.weight_normalization)

    def class_beta(self) -> torch.Tensor:
        return torch.zeros(self.num_classes, dtype=torch.float64)

    def weighted(self, y: torch.Tensor, natural: torch.Tensor, w_nat: torch.Tensor,
                 boundary: torch.Tensor | None = None, w_bndy: torch.Tensor | None = None) -> torch.Tensor:
        """w_nat[y] * natural (+ w_bndy[y] * boundary), each term's weights normalized over
        the batch as the weight policy asks (`weight_normalization`)."""
        a = w_nat[y]
        if boundary is None:
            # `joint` shares one sum between two terms; a loss with one term has nothing to share it with.
            return (a / a.mean() if self.weight_normalization in ("separate", "joint") else a) * natural
        if w_bndy is None:
            raise ValueError("a loss with a boundary term needs its class weights (w_bndy)")
        b = w_bndy[y]
        if self.weight_normalization == "separate":
            a, b = a / a.mean(), b / b.mean()
        elif self.weight_normalization == "joint":
            total = (a + b).mean()
            a, b = a / total, b / total
        return a * natural + b * boundary

    def per_sample(self, clean_logits: torch.Tensor | None, adv_logits: torch.Tensor, y: torch.Tensor,
                   w_nat: torch.Tensor, w_bndy: torch.Tensor, beta: torch.Tensor | None = None) -> torch.Tensor:
        return self.weighted(y, F.cross_entropy(adv_logits, y, reduction="none"), w_nat)


class TradesLoss(CELoss):
    """TRADES (Zhang et al. 2019; yaodongyu/TRADES trades.py:trades_loss): CE(clean) +
    beta * KL(p_clean || p_adv), the attack ascending the KL.

    With `lambda2`, CFA's class-wise regularization (PKU-ML/CFA attack.py:cw_trades_loss,
    train.py): beta_k = (lambda2 + t_k) * beta from the previous epoch's training robust
    accuracy t_k, and the objective normalized per class as CFA's code does,
    CE / (1 + beta_y) + beta_y / (1 + beta_y) * KL. CFA keeps beta for every class (still
    normalized) during its first `warmup` share of the epochs (10 of 200).

    `normalize` (default: with `lambda2`) puts plain TRADES in that form,
    (CE + beta * KL) / (1 + beta), as CFA's own TRADES baseline trains (attack.py:trades_loss
    with train.py's class_beta = beta / (1 + beta)): the baseline `trades_cfa` is compared with."""

    inner = "kl"

    def __init__(self, num_classes: int, beta: float = 6.0, lambda2: float | None = None, epochs: int = 1,
                 warmup: float = CFA_WARMUP, weight_normalization: str = "mean", normalize: bool | None = None):
        super().__init__(num_classes, weight_normalization)
        self.beta = float(beta)
        self.lambda2 = None if lambda2 is None else float(lambda2)
        # (normalize: false with lambda2 is refused where the config enters: study.config.requirements)
        self.normalize = self.lambda2 is not None if normalize is None else bool(normalize)
        self.warmup_epochs = warmup_epochs(warmup, epochs)
        self.t: torch.Tensor | None = None

    @classmethod
    def from_config(cls, cfg: LossPolicy, ctx: PolicyContext) -> TradesLoss:
        return cls(ctx.num_classes, cfg.beta, cfg.lambda2, ctx.epochs, cfg.warmup, ctx.weight_normalization,
                   cfg.normalize)

    def class_beta(self) -> torch.Tensor:
        if self.lambda2 is None or self.t is None:
            return torch.full((self.num_classes,), self.beta, dtype=torch.float64)
        return (self.lambda2 + self.t) * self.beta

    def per_sample(self, clean_logits: torch.Tensor | None, adv_logits: torch.Tensor, y: torch.Tensor,
                   w_nat: torch.Tensor, w_bndy: torch.Tensor, beta: torch.Tensor | None = None) -> torch.Tensor:
        # `beta`: the epoch's class_beta() already on the device (the training step passes it).
        beta = (self.class_beta() if beta is None else beta).to(adv_logits.device, adv_logits.dtype)[y]
        if clean_logits is None:  # a clean loss (CLEAN_LOSSES): the step forwards the clean batch
            raise ValueError("the TRADES loss needs the clean batch's logits")
        natural = F.cross_entropy(clean_logits, y, reduction="none")
        boundary = trades_kl(adv_logits, clean_logits)
        if self.normalize:
            c_nat, c_bndy = 1 / (1 + beta), beta / (1 + beta)
        else:
            c_nat, c_bndy = torch.ones_like(beta), beta
        return self.weighted(y, c_nat * natural, w_nat, c_bndy * boundary, w_bndy)

    def update(self, stats: EpochStats) -> None:
        if self.lambda2 is not None and stats.epoch >= self.warmup_epochs:
            self.t = stats.train_robust_acc.clone()

    def state_dict(self) -> dict:
        return {"t": self.t}

    def load_state_dict(self, state: Mapping) -> None:
        self.t = state["t"]


class MixedLoss(CELoss):
    """(1 - adv_weight) * CE(clean) + adv_weight * CE(adversarial) (Goodfellow et al. 2015)."""

    def __init__(self, num_classes: int, adv_weight: float = 0.5, weight_normalization: str = "mean"):
        super().__init__(num_classes, weight_normalization)
        if not 0 <= adv_weight <= 1:
            raise ValueError(f"loss.adv_weight must be in [0, 1], got {adv_weight}")
        self.adv_weight = float(adv_weight)

    @classmethod
    def from_config(cls, cfg: LossPolicy, ctx: PolicyContext) -> MixedLoss:
        return cls(ctx.num_classes, cfg.adv_weight, ctx.weight_normalization)

    def per_sample(self, clean_logits: torch.Tensor | None, adv_logits: torch.Tensor, y: torch.Tensor,
                   w_nat: torch.Tensor, w_bndy: torch.Tensor, beta: torch.Tensor | None = None) -> torch.Tensor:
        if clean_logits is None:  # a clean loss (CLEAN_LOSSES): the step forwards the clean batch
            raise ValueError("the mixed loss needs the clean batch's logits")
        clean = F.cross_entropy(clean_logits, y, reduction="none")
        adv = F.cross_entropy(adv_logits, y, reduction="none")
        return self.weighted(y, (1 - self.adv_weight) * clean + self.adv_weight * adv, w_nat)


LOSS = Registry("loss", default="ce", config=LossPolicy, types={
    "ce": CELoss,
    "trades": TradesLoss,
    "mixed": MixedLoss,
})
