"""Regularizer policies: a penalty added to the batch's training loss."""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from study.train.policies.registry import PolicyContext, Registry


class NoRegularizer:
    @classmethod
    def from_config(cls, cfg: Mapping, ctx: PolicyContext) -> NoRegularizer:
        return cls()

    def penalty(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
        return None


class CosinePenalty(NoRegularizer):
    """Inter-class cosine similarity (STUDY.md question 2): the mean logit vector of each
    true class in the batch; penalty = coef * mean cosine similarity over pairs of
    different classes, so training pushes the classes' mean logits apart."""

    def __init__(self, num_classes: int, coef: float = 0.1):
        self.num_classes, self.coef = num_classes, float(coef)

    @classmethod
    def from_config(cls, cfg: Mapping, ctx: PolicyContext) -> CosinePenalty:
        return cls(ctx.num_classes, cfg.get("coef", 0.1))

    def penalty(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
        onehot = F.one_hot(y, self.num_classes).to(logits.dtype)
        counts = onehot.sum(0)
        present = counts > 0
        if int(present.sum()) < 2:
            return None
        means = (onehot.t() @ logits)[present] / counts[present, None]
        unit = F.normalize(means, dim=1)
        sim = unit @ unit.t()
        k = sim.shape[0]
        off = sim.sum() - sim.diagonal().sum()
        return self.coef * off / (k * (k - 1))


REGULARIZER = Registry("regularizer", default="none", types={
    "none": NoRegularizer,
    "cosine": CosinePenalty,
})
