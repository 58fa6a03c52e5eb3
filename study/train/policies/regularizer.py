"""Regularizer policies: a penalty added to the batch's training loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from study.config.types import RegularizerPolicy
from study.train.policies.registry import PolicyContext, Registry


class NoRegularizer:
    @classmethod
    def from_config(cls, cfg: RegularizerPolicy, ctx: PolicyContext) -> NoRegularizer:
        return cls()

    def penalty(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return logits.new_zeros(())


class CosinePenalty(NoRegularizer):
    """Inter-class cosine similarity (docs/study.md#questions, 2 and 3): the mean logit vector of each
    true class in the batch; penalty = coef * mean cosine similarity over pairs of
    different classes, so training pushes the classes' mean logits apart."""

    def __init__(self, num_classes: int, coef: float = 0.1):
        self.num_classes, self.coef = num_classes, float(coef)

    @classmethod
    def from_config(cls, cfg: RegularizerPolicy, ctx: PolicyContext) -> CosinePenalty:
        return cls(ctx.num_classes, cfg.coef)

    def penalty(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # Masks instead of selecting the present classes: no data-dependent shape and no host
        # read, so the step stays one graph. Fewer than two classes in the batch: no penalty.
        onehot = F.one_hot(y, self.num_classes).to(logits.dtype)
        counts = onehot.sum(0)
        present = (counts > 0).to(logits.dtype)
        means = (onehot.t() @ logits) / counts.clamp_min(1)[:, None]
        unit = F.normalize(means, dim=1)
        pairs = present[:, None] * present[None, :]
        sim = (unit @ unit.t()) * pairs
        k = present.sum()
        off = sim.sum() - sim.diagonal().sum()
        return torch.where(k >= 2, self.coef * off / (k * (k - 1)).clamp_min(1), logits.new_zeros(()))


REGULARIZER = Registry("regularizer", default="none", config=RegularizerPolicy, types={
    "none": NoRegularizer,
    "cosine": CosinePenalty,
})
