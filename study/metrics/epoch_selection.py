"""An epoch's selection index and the epochs a checkpoint may be chosen from: the arithmetic of
"best" that the training applies (study.train.selection: model_best.pt on validation;
study.train.published_protocol: model_published.pt on the test subset) and the configuration
and the reports describe (study.config.protocols, study.reproduction). Kept here, below both,
so that each reads one rule."""

from __future__ import annotations


def index_value(mean: float, worst: float, index: str) -> float:
    """An epoch's index from its mean and worst-class accuracy: `mean`, `mean_plus_worst` (CFA's), or
    `worst` (TRIX's best checkpoint: the best worst-class robust accuracy)."""
    return {"mean": mean, "mean_plus_worst": mean + worst, "worst": worst}[index]


def eligible_epoch(epoch: int, epochs: int, from_epoch: float) -> bool:
    """Whether 1-based `epoch` of `epochs` may be chosen (the best checkpoint on validation, or
    the published protocol's): after the first from_epoch x epochs, as CFA's train.py counts
    (0-based `epoch >= 0.5 * args.epochs`: with 200 epochs the 101st is the first)."""
    return epoch > from_epoch * epochs + 1e-9


def first_eligible_epoch(epochs: int, from_epoch: float) -> int:
    """The first 1-based epoch that may be chosen (CFA, 200 epochs at 0.5: the 101st); the
    last when none is (from_epoch 1)."""
    return next((e for e in range(1, epochs + 1) if eligible_epoch(e, epochs, from_epoch)), epochs)
