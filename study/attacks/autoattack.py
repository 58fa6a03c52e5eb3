"""AutoAttack (Croce & Hein 2020) through the `pyautoattack` package, run so that every
sample's record says which attack of the cascade broke it.

pyautoattack's `run_standard_evaluation` runs its attacks as a cascade (each attack only
on the samples that are still robust) but returns only the final adversarial batch. We
run the same cascade one attack at a time, with the package's own attack objects and
settings, and keep the name of the attack that first flipped each sample.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import nn

from study.device import eval_batch_size

STANDARD_ATTACKS = ("apgd-ce", "apgd-t", "fab-t", "square")
AA_ATTACKS = ("apgd-ce", "apgd-dlr", "apgd-t", "fab", "fab-t", "square")
_NORMS = {"linf": "Linf", "l2": "L2"}
CLEAN = "clean"  # broken_by value of a sample that is misclassified without any attack
ROBUST = ""  # broken_by value of a sample no attack broke


def attack_list(cfg: Mapping) -> list[str]:
    """The attacks an `autoattack` evaluation runs, in cascade order."""
    version = cfg.get("version", "standard")
    if version == "standard":
        if cfg.get("attacks"):
            raise ValueError("autoattack: 'attacks' is only used with version 'custom' (standard runs "
                             f"{', '.join(STANDARD_ATTACKS)})")
        return list(STANDARD_ATTACKS)
    if version != "custom":
        raise ValueError(f"autoattack: unknown version {version!r}; valid: standard, custom")
    attacks = list(cfg.get("attacks") or [])
    if not attacks:
        raise ValueError(f"autoattack version 'custom' needs 'attacks', a list from {', '.join(AA_ATTACKS)}")
    bad = [a for a in attacks if a not in AA_ATTACKS]
    if bad:
        raise ValueError(f"autoattack: unknown attack(s) {bad}; valid: {', '.join(AA_ATTACKS)}")
    return attacks


def _build(model: nn.Module, cfg: Mapping, num_classes: int, device: torch.device):
    from pyautoattack import AutoAttack

    norm = cfg.get("norm", "linf")
    if norm not in _NORMS:
        raise ValueError(f"autoattack: unknown norm {norm!r}; valid: {', '.join(_NORMS)}")
    aa = AutoAttack(model, norm=_NORMS[norm], eps=float(cfg["eps"]), seed=int(cfg.get("seed", 0)),
                    version="standard", device=device)
    # The standard version's settings (1 restart, 9 target classes, 5000 Square queries),
    # with the targets capped at C - 1 for datasets with fewer classes; `targets`,
    # `iterations` and `queries` shrink it for cheap previews.
    targets = min(int(cfg.get("targets", 9)), num_classes - 1)
    aa.apgd_targeted.n_target_classes = targets
    aa.fab.n_target_classes = targets
    aa.square.n_queries = int(cfg.get("queries", 5000))
    if "iterations" in cfg:  # APGD / FAB iterations (100 in the standard version)
        aa.apgd.n_iter = aa.apgd_targeted.n_iter = aa.fab.n_iter = int(cfg["iterations"])
    aa.logger.setLevel(logging.WARNING)
    return aa


def autoattack_batch(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, cfg: Mapping, attacks: Sequence[str]
) -> tuple[torch.Tensor, np.ndarray]:
    """(adversarial batch, broken_by per sample: 'clean', an attack name, or '' if robust).
    Which attack broke a sample is kept on the device and read back once, at the end (each
    attack of the cascade still reads which samples are left: it runs on those only)."""
    with torch.no_grad():
        logits = model(x)
    robust = logits.argmax(1) == y
    aa = _build(model, cfg, logits.shape[1], x.device)
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
        batch = eval_batch_size(cfg.get("batch_size"), x.device)
        adv, pred = aa.run_standard_evaluation(x[idx], y[idx], batch_size=batch)
        flipped = pred.to(y.device) != y[idx]
        x_adv[idx[flipped]] = adv[flipped].to(x_adv.dtype)
        robust[idx[flipped]] = False
        code[idx[flipped]] = 2 + i
    return x_adv, names[code.cpu().numpy()]
