"""What an epoch leaves behind: class-wise accuracy of the output model on the fixed test
subset and on the validation split, one `epochs.csv` row per class, and the line the log
shows. Which epoch is best is study.train.selection's rule."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from study.attacks.pgd import pgd_attack
from study.config.evaluations import AnyEvaluation
from study.config.requirements import wat_costs
from study.config.types import Adversary as AdversaryConfig
from study.data.augment import to_float
from study.io import atomic_write_text
from study.metrics.worst import weakest_class
from study.predict import class_counts, predict
from study.train.epoch import EpochPolicyState, EpochTotals
from study.train.policies import EpochStats
from study.train.policies.loss import trades_kl
from study.train.policies.weights import WATWeights
from study.train.setup import RunState

EPOCH_COLUMNS = [
    "epoch", "class", "class_name", "n", "clean_acc", "robust_acc",
    "train_n", "train_acc", "train_loss", "lr", "weight", "epsilon",
    # The policy state used in the epoch (weight and epsilon above, too), the class's CFP on
    # the epoch's training inputs, and the validation accuracies of the output model.
    "weight_boundary", "beta", "cfp", "val_n", "val_clean_acc", "val_robust_acc", "averaged",
]


def class_accuracy(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, attack: AnyEvaluation | None,
                   dev: torch.device, seed: int, num_classes: int
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(n, clean correct, robust correct or None) per class, as float64 CPU tensors."""
    labels_np = labels.numpy()
    clean = predict(model, images, labels, attack=None, device=dev, seed=seed)
    n, clean_ok = class_counts(clean.pred, labels_np, num_classes)
    robust_ok = None
    if attack:
        robust = predict(model, images, labels, attack=attack, device=dev, seed=seed)
        robust_ok = torch.as_tensor(class_counts(robust.pred, labels_np, num_classes)[1], dtype=torch.float64)
    return (torch.as_tensor(n, dtype=torch.float64), torch.as_tensor(clean_ok, dtype=torch.float64), robust_ok)


def validate(state: RunState, model: torch.nn.Module, stats: EpochStats) -> EpochStats:
    """`stats` with the validation accuracies of `model` filled in (unchanged without a split)."""
    x_val, y_val = state.x_val, state.y_val
    if x_val is None or y_val is None:
        return stats
    epoch_eval = state.run.epoch_eval
    attack = epoch_eval.validation_attack or epoch_eval.attack
    val_n, clean_ok, robust_ok = class_accuracy(model, x_val, y_val, attack, state.dev, state.run.seed,
                                                state.num_classes)
    cost = stats.val_cost
    # WAT's costs are the trained model's (not an averaged copy's): the policies update from them
    if isinstance(state.policies.weights, WATWeights) and model is state.model:
        beta, adversary = wat_costs(state.run.method_config)
        cost = trades_validation_cost(model, x_val, y_val, adversary, float(beta), state.num_classes, state.dev,
                                      state.run.seed)
    return dataclasses.replace(stats, val_n=val_n, val_clean_correct=clean_ok, val_robust_correct=robust_ok,
                               val_cost=cost)


def trades_validation_cost(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
                           adversary: AdversaryConfig, beta: float, num_classes: int, dev: torch.device, seed: int,
                           batch_size: int = 500) -> torch.Tensor:
    """WAT's validation costs (boqili/WAT worst_class_adversarial_train.py:validate), float64 (C + 1,):
    per class, the mean over its samples of CE(clean) + beta KL(clean || adversarial) under the
    TRADES attack (eval mode, x + start_std N(0, 1), KL ascent with the training attack's eps,
    step and steps); last, the same mean over the whole split. Exact class counts divide (the
    reference divides by the batches times the batch size, times C)."""
    was_training = model.training
    model.eval()
    generator = torch.Generator(device=dev).manual_seed(seed)
    sums = torch.zeros(num_classes, dtype=torch.float64, device=dev)
    counts = torch.zeros(num_classes, dtype=torch.float64, device=dev)
    start_std = adversary.start_std if adversary.start_std is not None else 0.001
    try:
        for start in range(0, images.shape[0], batch_size):
            x = to_float(images[start : start + batch_size].to(dev))
            y = labels[start : start + batch_size].to(dev).long()
            with torch.no_grad():
                clean = model(x).float()

            def kl_to_clean(logits: torch.Tensor, _y: torch.Tensor, clean: torch.Tensor = clean) -> torch.Tensor:
                return trades_kl(logits, clean)

            x_adv = pgd_attack(model, x, y, eps=adversary.eps, alpha=adversary.alpha, steps=adversary.steps,
                               norm=adversary.norm, loss=kl_to_clean, start_std=start_std, generator=generator)
            with torch.no_grad():
                per_sample = F.cross_entropy(clean, y, reduction="none") + beta * trades_kl(model(x_adv).float(), clean)
            sums.index_add_(0, y, per_sample.double())
            counts.index_add_(0, y, torch.ones_like(per_sample, dtype=torch.float64))
    finally:
        model.train(was_training)
    per_class = sums / counts.clamp_min(1)
    return torch.cat([per_class, (sums.sum() / counts.sum()).view(1)]).cpu()


def _ratio(num: float, den: float) -> float:
    return float(num / den) if den else float("nan")


def epoch_rows(state: RunState, epoch: int, totals: EpochTotals, stats: EpochStats, val_out: EpochStats,
               policy_state: EpochPolicyState, evaluated: tuple, averaged: bool) -> list[dict]:
    """One record per class: test-subset accuracy, training counts, the policy state, validation."""
    n_eval, clean_ok, robust_ok = evaluated
    lr = state.scheduler.get_last_lr()[0]
    count, correct, loss = totals.count.cpu().numpy(), totals.correct.cpu().numpy(), totals.loss.cpu().numpy()
    cfp = stats.train_cfp
    val_n = stats.val_n
    rows = []
    for c in range(state.num_classes):
        rows.append({
            "epoch": epoch,
            "class": c,
            "class_name": state.class_names[c],
            "n": int(n_eval[c]),
            "clean_acc": _ratio(clean_ok[c], n_eval[c]),
            "robust_acc": _ratio(robust_ok[c], n_eval[c]) if robust_ok is not None else float("nan"),
            "train_n": int(count[c]),
            "train_acc": _ratio(correct[c], count[c]),
            "train_loss": _ratio(loss[c], count[c]),
            "lr": float(lr),
            "weight": float(policy_state.w_nat[c]),
            "epsilon": float(policy_state.class_eps[c]) if state.adversary.active else 0.0,
            "weight_boundary": float(policy_state.w_bndy[c]),
            "beta": float(policy_state.class_beta[c]),
            "cfp": float(cfp[c]),
            "val_n": int(val_n[c]) if val_n is not None else 0,
            "val_clean_acc": float(val_out.val_clean_acc[c]) if val_n is not None else float("nan"),
            "val_robust_acc": float(val_out.val_robust_acc[c]) if val_n is not None else float("nan"),
            "averaged": int(averaged),
        })
    return rows


def write_epochs_csv(path: Path, records: list[dict]) -> None:
    frame = pd.DataFrame.from_records(records, columns=EPOCH_COLUMNS)
    atomic_write_text(path, frame.to_csv(index=False))


def epoch_line(epoch: int, epochs: int, rows: list[dict], seconds: float) -> str:
    """The log line of an epoch: loss, training accuracy, test-subset accuracy and its worst class."""
    clean = np.array([r["clean_acc"] for r in rows])
    robust = np.array([r["robust_acc"] for r in rows])
    train_acc = np.nansum([r["train_acc"] * r["train_n"] for r in rows]) / max(1, sum(r["train_n"] for r in rows))
    loss = np.nansum([r["train_loss"] * r["train_n"] for r in rows]) / max(1, sum(r["train_n"] for r in rows))
    worst = rows[weakest_class(clean)]["class_name"] if np.isfinite(clean).any() else "-"
    line = (f"epoch {epoch}/{epochs}  loss {loss:.3f}  train acc {100 * train_acc:.1f}%  "
            f"eval clean {100 * np.nanmean(clean):.1f}% (worst {worst})")
    if np.isfinite(robust).any():
        line += f"  robust {100 * np.nanmean(robust):.1f}%"
    return line + f"  [{seconds:.1f}s]"
