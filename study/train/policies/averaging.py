"""Weight-averaging policies: an exponential average of the model's weights, per epoch.

CFA (Wei et al. 2023) averages with decay 0.85 from epoch 50 of 200; `start` is that
point as a fraction of the run's epochs, so short presets average over their last 75%.
FAWA averages an epoch's weights in only if that model's worst-class validation robust
accuracy reaches `threshold` (0.2 in CFA). Worst-class is the study's statistic
(study.metrics.worst), the one the best checkpoint's index reads too: the weakest class with
10 classes, as CFA's code (`valid_result[3].min()`); the mean of the weakest 10% with 100.
A run whose averaging never accepted an epoch is the un-averaged model: the engine says so
(stderr, validation.json, meta.json).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from study.config.types import AveragingPolicy
from study.metrics.worst import worst_value
from study.train.policies.registry import PolicyContext, Registry
from study.train.policies.stats import EpochStats


class NoAveraging:
    active = False

    def __init__(self, epochs: int):
        self.epochs = epochs
        self.average: dict[str, torch.Tensor] | None = None

    @classmethod
    def from_config(cls, cfg: AveragingPolicy, ctx: PolicyContext) -> NoAveraging:
        return cls(ctx.epochs)

    def update(self, model: nn.Module, stats: EpochStats) -> bool:
        """Fold the model's weights after `stats.epoch` into the average; True if it did."""
        return False

    def state_dict(self) -> dict:
        return {"average": self.average}

    def load_state_dict(self, state: Mapping) -> None:
        self.average = state["average"]


class EMA(NoAveraging):
    active = True

    def __init__(self, epochs: int, decay: float = 0.85, start: float = 0.25):
        super().__init__(epochs)
        if not 0 <= decay < 1:
            raise ValueError(f"averaging.decay must be in [0, 1), got {decay}")
        self.decay = float(decay)
        self.start_epoch = max(1, round(float(start) * epochs))

    @classmethod
    def from_config(cls, cfg: AveragingPolicy, ctx: PolicyContext) -> EMA:
        return cls(ctx.epochs, cfg.decay, cfg.start)

    def accepts(self, stats: EpochStats) -> bool:
        return stats.epoch >= self.start_epoch

    def update(self, model: nn.Module, stats: EpochStats) -> bool:
        if not self.accepts(stats):
            return False
        current = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if self.average is None:
            self.average = current
            return True
        for key, value in current.items():
            # A resumed average comes back on the CPU; keep it beside the model.
            avg = self.average[key] = self.average[key].to(value.device)
            if value.is_floating_point():
                avg.mul_(self.decay).add_(value, alpha=1 - self.decay)
            else:  # counters such as BatchNorm's num_batches_tracked
                avg.copy_(value)
        return True


class FAWA(EMA):
    """EMA of the epochs whose worst-class validation robust accuracy reaches `threshold` (it reads
    the validation split: study.config.requirements.VALIDATION_READERS)."""

    def __init__(self, epochs: int, decay: float = 0.85, start: float = 0.25, threshold: float = 0.2):
        super().__init__(epochs, decay, start)
        self.threshold = float(threshold)

    @classmethod
    def from_config(cls, cfg: AveragingPolicy, ctx: PolicyContext) -> FAWA:
        return cls(ctx.epochs, cfg.decay, cfg.start, cfg.threshold)

    def accepts(self, stats: EpochStats) -> bool:
        worst = float(worst_value(stats.val_robust_acc.double().cpu().numpy()))
        return super().accepts(stats) and worst >= self.threshold


AVERAGING = Registry("averaging", default="none", config=AveragingPolicy, types={
    "none": NoAveraging,
    "ema": EMA,
    "fawa": FAWA,
})
