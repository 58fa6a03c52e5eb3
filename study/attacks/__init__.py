"""Adversarial attacks in pixel space."""

from study.attacks.pgd import LOSS_NAMES, NORMS, LossFn, frozen_params, pgd_attack

__all__ = ["LOSS_NAMES", "NORMS", "LossFn", "frozen_params", "pgd_attack"]
