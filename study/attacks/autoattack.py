"""AutoAttack (Croce & Hein 2020) through the `pyautoattack` package, run so that every
sample's record says which attack of the cascade broke it.

pyautoattack's `run_standard_evaluation` runs its attacks as a cascade (each attack only
on the samples that are still robust) but returns only the final adversarial batch. We
run the same cascade one attack at a time, with the package's own attack objects and
settings, and keep the name of the attack that first flipped each sample.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from study.device import eval_batch_size

if TYPE_CHECKING:  # imported where an attack is built
    from pyautoattack import AutoAttack

STANDARD_ATTACKS = ("apgd-ce", "apgd-t", "fab-t", "square")
AA_ATTACKS = ("apgd-ce", "apgd-dlr", "apgd-t", "fab", "fab-t", "square")
_NORMS = {"linf": "Linf", "l2": "L2"}
CLEAN = "clean"  # broken_by value of a sample that is misclassified without any attack
ROBUST = ""  # broken_by value of a sample no attack broke


def attack_list(cfg: Any) -> list[str]:
    """The attacks an `autoattack` evaluation (study.config.types.AutoAttackEvaluation) runs, in
    cascade order; the type checks the names."""
    if cfg.version == "standard":
        if cfg.attacks:
            raise ValueError("autoattack: 'attacks' is only used with version 'custom' (standard runs "
                             f"{', '.join(STANDARD_ATTACKS)})")
        return list(STANDARD_ATTACKS)
    if not cfg.attacks:
        raise ValueError(f"autoattack version 'custom' needs 'attacks', a list from {', '.join(AA_ATTACKS)}")
    return list(cfg.attacks)


def build_autoattack(model: nn.Module, cfg: Any, num_classes: int, device: torch.device) -> AutoAttack:
    """pyautoattack's attack objects for an `autoattack` or `square` evaluation (typed settings)."""
    from pyautoattack import AutoAttack

    aa = AutoAttack(model, norm=_NORMS[cfg.norm], eps=cfg.eps, seed=cfg.seed, version="standard", device=device)
    if cfg.type == "autoattack":
        # The standard version's settings (1 restart, 9 target classes, 100 iterations), with
        # the targets capped at C - 1 for datasets with fewer classes; `targets` and
        # `iterations` shrink it for cheap previews. Square alone runs none of these.
        targets = min(cfg.targets, num_classes - 1)
        aa.apgd_targeted.n_target_classes = targets
        aa.fab.n_target_classes = targets
        aa.apgd.n_iter = aa.apgd_targeted.n_iter = aa.fab.n_iter = cfg.iterations
    aa.square.n_queries = cfg.queries
    aa.logger.setLevel(logging.WARNING)
    return aa


def autoattack_batch(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, cfg: Any, attacks: Sequence[str]
) -> tuple[torch.Tensor, np.ndarray]:
    """(adversarial batch, broken_by per sample: 'clean', an attack name, or '' if robust).
    Which attack broke a sample is kept on the device and read back once, at the end (each
    attack of the cascade still reads which samples are left: it runs on those only)."""
    x = x.contiguous()  # the library reshapes with view(): the standard layout, not channels_last
    with torch.no_grad():
        logits = model(x)
    robust = logits.argmax(1) == y
    aa = build_autoattack(model, cfg, logits.shape[1], x.device)
    names = np.array([ROBUST, CLEAN, *attacks], dtype=object)
    # code k: names[k]; 0 robust, 1 clean, 2 + i: attacks[i]
    code = torch.where(robust, 0, 1)
    x_adv = x.clone()
    for i, name in enumerate(attacks):
        idx = torch.nonzero(robust).flatten()
        if idx.numel() == 0:
            break
        aa.attacks_to_run = [name]
        # The library's own batches (batch_size) over the still-robust samples, in index
        # order: the same chunks, and so the same per-chunk seeding, as its one-call cascade.
        batch = eval_batch_size(cfg.batch_size, x.device)
        adv, pred = aa.run_standard_evaluation(x[idx], y[idx], batch_size=batch)
        flipped = pred.to(y.device) != y[idx]
        x_adv[idx[flipped]] = adv[flipped].to(x_adv.dtype)
        robust[idx[flipped]] = False
        code[idx[flipped]] = 2 + i
    return x_adv, names[code.cpu().numpy()]
