"""Class-weight policies: per-class multipliers of the training loss.

`weights()` returns (w_nat, w_bndy): multipliers of the natural (CE) term and of the
boundary (TRADES KL) term; the static policies use one vector for both.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from study.train.policies.stats import EpochStats, StatelessPolicy

WEIGHT_TYPES = ("none", "balanced", "static", "boost", "frl")


class NoWeights(StatelessPolicy):
    def __init__(self, num_classes: int):
        self.num_classes = num_classes

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        ones = torch.ones(self.num_classes, dtype=torch.float64)
        return ones, ones


class StaticWeights(NoWeights):
    """Cost-sensitive learning with fixed class costs, normalized to mean 1 (so the loss
    scale, and the effective learning rate, stay those of the unweighted method)."""

    def __init__(self, num_classes: int, values):
        super().__init__(num_classes)
        w = torch.as_tensor(values, dtype=torch.float64)
        if w.shape != (num_classes,) or not bool((w > 0).all()):
            raise ValueError(f"class weights must be {num_classes} positive numbers, got {list(values)}")
        self.w = w / w.mean()

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.w, self.w


def balanced_weights(class_counts: torch.Tensor) -> torch.Tensor:
    """Inverse class frequency: every class contributes equally to the loss."""
    counts = torch.as_tensor(class_counts, dtype=torch.float64)
    if not bool((counts > 0).all()):
        raise ValueError(f"class-balanced weights need samples of every class, got counts {counts.tolist()}")
    return 1.0 / counts


class BoostWeights(NoWeights):
    """One critical class weighted `factor` times the others (normalized to mean 1): a class
    index, or `weakest` (lowest validation robust accuracy of the previous epoch, training
    robust accuracy without a validation split; unweighted before the first epoch ends)."""

    def __init__(self, num_classes: int, target_class: int | str = "weakest", factor: float = 2.0):
        super().__init__(num_classes)
        if target_class != "weakest" and not (isinstance(target_class, int) and 0 <= target_class < num_classes):
            raise ValueError(f"weights.class must be 'weakest' or a class index 0..{num_classes - 1}, "
                             f"got {target_class!r}")
        if factor <= 0:
            raise ValueError(f"weights.factor must be > 0, got {factor}")
        self.mode, self.factor = target_class, float(factor)
        self.target: int | None = None if target_class == "weakest" else int(target_class)

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        w = torch.ones(self.num_classes, dtype=torch.float64)
        if self.target is not None:
            w[self.target] = self.factor
        w = w / w.mean()
        return w, w

    def update(self, stats: EpochStats) -> None:
        if self.mode == "weakest":
            acc = stats.val_robust_acc if stats.val_n is not None else stats.train_robust_acc
            self.target = int(torch.argmin(acc))

    def state_dict(self) -> dict:
        return {"target": self.target}

    def load_state_dict(self, state: Mapping) -> None:
        self.target = state["target"]


class FRLReweight(NoWeights):
    """FRL reweight (Xu et al. 2021). From the validation split, per-class gaps
    gamma0_c = clean_err_c - clean_err - tau and gamma1_c = bndy_err_c - bndy_err - tau;
    multipliers lambda += rate * gamma (rate halved every `halve_every` epochs), clamped
    >= 0 and rescaled so that their sum is at most `bound`.

    The Lagrangian R + sum_c lambda_c (R_c - R), with R the mean of the class risks R_c,
    weighs class c's risk by 1/C + lambda_c - mean(lambda); per sample (balanced batches)
    that is the multiplier 1 + C * (lambda_c - mean(lambda)), >= 1 - bound > 0."""

    def __init__(self, num_classes: int, rate: float = 0.05, halve_every: int = 40, tau: float = 0.05,
                 bound: float = 0.5):
        super().__init__(num_classes)
        self.rate, self.halve_every, self.tau, self.bound = float(rate), int(halve_every), float(tau), float(bound)
        self.lam_nat = torch.zeros(num_classes, dtype=torch.float64)
        self.lam_bndy = torch.zeros(num_classes, dtype=torch.float64)

    def rate_at(self, epoch: int) -> float:
        return self.rate * 0.5 ** ((epoch - 1) // self.halve_every)

    def _step(self, lam: torch.Tensor, gap: torch.Tensor, rate: float) -> torch.Tensor:
        lam = torch.clamp(lam + rate * gap, min=0.0)
        total = float(lam.sum())
        return lam * (self.bound / total) if total > self.bound else lam

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.num_classes
        return 1 + c * (self.lam_nat - self.lam_nat.mean()), 1 + c * (self.lam_bndy - self.lam_bndy.mean())

    def update(self, stats: EpochStats) -> None:
        rate = self.rate_at(stats.epoch)
        clean, bndy = stats.val_clean_err, stats.val_boundary_err
        self.lam_nat = self._step(self.lam_nat, clean - clean.mean() - self.tau, rate)
        self.lam_bndy = self._step(self.lam_bndy, bndy - bndy.mean() - self.tau, rate)

    def state_dict(self) -> dict:
        return {"lam_nat": self.lam_nat, "lam_bndy": self.lam_bndy}

    def load_state_dict(self, state: Mapping) -> None:
        self.lam_nat, self.lam_bndy = state["lam_nat"], state["lam_bndy"]


def build_weights(cfg: Mapping | None, num_classes: int, class_counts: torch.Tensor) -> NoWeights:
    cfg = dict(cfg or {"type": "none"})
    kind = cfg.get("type", "none")
    if kind == "none":
        return NoWeights(num_classes)
    if kind == "balanced":
        return StaticWeights(num_classes, balanced_weights(class_counts))
    if kind == "static":
        return StaticWeights(num_classes, cfg["values"])
    if kind == "boost":
        return BoostWeights(num_classes, cfg.get("class", "weakest"), cfg.get("factor", 2.0))
    if kind == "frl":
        return FRLReweight(num_classes, rate=cfg.get("rate", 0.05), halve_every=cfg.get("halve_every", 40),
                           tau=cfg.get("tau", 0.05), bound=cfg.get("bound", 0.5))
    raise ValueError(f"unknown weights type {kind!r}; valid: {', '.join(WEIGHT_TYPES)}")
