"""Per-class statistics of one epoch, gathered by the engine and handed to the policies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch


def warmup_epochs(share: float, epochs: int) -> int:
    """Epochs run with the uncalibrated value before a class-wise policy first adapts: at
    least one, as calibration needs an epoch of statistics."""
    if not 0 <= share < 1:
        raise ValueError(f"warmup must be a share of the epochs in [0, 1), got {share}")
    return max(1, round(float(share) * int(epochs)))


def _ratio(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    # A class without samples has no accuracy; 0 keeps the formulas defined (and is rare:
    # the engine's splits are stratified).
    return torch.where(den > 0, num / den.clamp_min(1), torch.zeros_like(num))


@dataclass
class EpochStats:
    """Counts of the epoch that just ended (float64 CPU tensors, one entry per class).

    `train_*` come from the inputs the model was trained on (the adversarial examples),
    `train_confusion[i, j]` counts training samples of class i predicted as j on them.
    `val_*` come from the held-out validation split (None without one): clean and robust
    (the epoch-evaluation attack) correct counts of the model being trained.
    """

    epoch: int
    train_n: torch.Tensor
    train_correct: torch.Tensor
    train_confusion: torch.Tensor
    val_n: torch.Tensor | None = None
    val_clean_correct: torch.Tensor | None = None
    val_robust_correct: torch.Tensor | None = None
    #: [i, j]: the summed softmax probability of class j over the training samples of class i
    #: (their adversarial outputs); only where a policy needs it (Policies.needs_soft_confusion)
    train_soft_confusion: torch.Tensor | None = None
    #: WAT's validation costs: per class, the mean of CE(clean) + beta KL(clean || adversarial)
    #: over the class's validation samples under the TRADES attack, and (last entry) over all of
    #: them; only where a policy needs it (`needs_validation_losses`)
    val_cost: torch.Tensor | None = None

    @property
    def num_classes(self) -> int:
        return int(self.train_n.shape[0])

    @property
    def train_robust_acc(self) -> torch.Tensor:
        """t_k of CFA: each class's training robust accuracy."""
        return _ratio(self.train_correct, self.train_n)

    @property
    def train_cfp(self) -> torch.Tensor:
        """Class false-positive score (docs/study.md#metrics): samples of other classes predicted as c,
        divided by all misclassified samples; zeros when nothing was misclassified."""
        off = self.train_confusion - torch.diag(torch.diag(self.train_confusion))
        total = off.sum()
        return off.sum(dim=0) / total if total > 0 else torch.zeros(self.num_classes, dtype=torch.float64)

    def validation_counts(self, who: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(val_n, val_clean_correct, val_robust_correct), which an epoch with validation has."""
        if self.val_n is None or self.val_clean_correct is None or self.val_robust_correct is None:
            raise ValueError(f"{who} needs validation statistics; set train.validation (e.g. fraction: 0.02)")
        return self.val_n, self.val_clean_correct, self.val_robust_correct

    @property
    def val_clean_acc(self) -> torch.Tensor:
        n, clean, _ = self.validation_counts("val_clean_acc")
        return _ratio(clean, n)

    @property
    def val_robust_acc(self) -> torch.Tensor:
        n, _, robust = self.validation_counts("val_robust_acc")
        return _ratio(robust, n)

    @property
    def val_clean_err(self) -> torch.Tensor:
        """FRL's standard error per class, 1 - a_c."""
        return 1 - self.val_clean_acc

    @property
    def val_boundary_err(self) -> torch.Tensor:
        """FRL's boundary error per class, a_c - r_c (correct clean, wrong under attack)."""
        return self.val_clean_acc - self.val_robust_acc

    @property
    def val_clean_err_total(self) -> float:
        """FRL's standard error of the whole validation split (utils_frl.py:evaluate)."""
        n, clean, _ = self.validation_counts("val_clean_err_total")
        return 1 - float(clean.sum() / n.sum())

    @property
    def val_boundary_err_total(self) -> float:
        """FRL's boundary error of the whole validation split."""
        n, clean, robust = self.validation_counts("val_boundary_err_total")
        return float((clean.sum() - robust.sum()) / n.sum())


class StatelessPolicy:
    """The policy life without state: nothing to adapt after an epoch, nothing to save.
    The plain choice of each policy (fixed eps, untargeted, CE, no weights) inherits it."""

    def update(self, stats: EpochStats) -> None:
        pass

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: Mapping) -> None:
        pass
