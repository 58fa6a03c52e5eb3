"""One training epoch: for each batch, augment on the device, ask the adversary for the
inputs, apply the loss policy, take an optimizer step; per-class counts stay on the device
until the epoch ends."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from tqdm import tqdm

from study.data.augment import random_crop_flip, to_float
from study.data.batches import epoch_batches
from study.device import train_autocast
from study.train.policies import EpochStats
from study.train.setup import RunState


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is left untouched."""


@dataclass
class EpochTotals:
    """Per-class sums over one epoch's training inputs (float64, on the device)."""

    loss: torch.Tensor
    correct: torch.Tensor
    count: torch.Tensor
    confusion: torch.Tensor  # flattened (true * C + predicted)

    @classmethod
    def zeros(cls, num_classes: int, dev: torch.device) -> EpochTotals:
        def z(n: int) -> torch.Tensor:
            return torch.zeros(n, device=dev, dtype=torch.float64)

        return cls(z(num_classes), z(num_classes), z(num_classes), z(num_classes * num_classes))

    def add(self, per_sample_loss: torch.Tensor, logits: torch.Tensor, y: torch.Tensor) -> None:
        num_classes = self.count.shape[0]
        with torch.no_grad():
            y64 = y.long()
            ones = torch.ones_like(per_sample_loss, dtype=torch.float64)
            pred = logits.argmax(1)
            self.loss.index_add_(0, y64, per_sample_loss.detach().double())
            self.correct.index_add_(0, y64, (pred == y).double())
            self.count.index_add_(0, y64, ones)
            self.confusion.index_add_(0, y64 * num_classes + pred.long(), ones)

    def stats(self, epoch: int) -> EpochStats:
        """The epoch's statistics for the policies (one host read)."""
        c = self.count.shape[0]
        return EpochStats(epoch, self.count.cpu(), self.correct.cpu(), self.confusion.cpu().view(c, c))


@dataclass
class EpochPolicyState:
    """The per-class policy values of one epoch (policies adapt between epochs, never within one)."""

    class_eps: torch.Tensor
    w_nat: torch.Tensor
    w_bndy: torch.Tensor
    class_beta: torch.Tensor

    @classmethod
    def of(cls, state: RunState) -> EpochPolicyState:
        w_nat, w_bndy = state.policies.weights.weights()
        return cls(state.policies.epsilon.class_eps(), w_nat, w_bndy, state.policies.loss.class_beta())


def _augmented_batch(state: RunState, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch's images as floats in [0,1], cropped and flipped on the device, and its labels."""
    augment = state.cfg.get("augment", {})
    xb, yb = state.x_train[idx], state.y_train[idx]
    if augment.get("crop_padding", 0) or augment.get("flip", False):
        xb = random_crop_flip(xb, padding=augment.get("crop_padding", 0), flip=augment.get("flip", False),
                              generator=state.dev_gen)
    x = to_float(xb)
    if state.dev.type == "cuda":
        x = x.contiguous(memory_format=torch.channels_last)
    return x, yb


def train_step(state: RunState, x: torch.Tensor, y: torch.Tensor, eps: torch.Tensor | None,
               w_nat: torch.Tensor, w_bndy: torch.Tensor, totals: EpochTotals) -> None:
    """Adversary -> loss policy (+ regularizer) -> optimizer and schedule step, on one batch."""
    model, policies = state.model, state.policies
    target = policies.targets.sample(y, state.dev_gen) if state.adversary.active else None
    with train_autocast(state.dev, state.cfg.get("precision", "fp32")):
        x_in = state.adversary.perturb(model, x, y, state.dev_gen, eps=eps[y] if eps is not None else None,
                                       target=target, inner=state.inner_loss)
        logits = model(x_in)
        clean_logits = model(x).float() if policies.loss.needs_clean else None
    per_sample = policies.loss.per_sample(clean_logits, logits.float(), y, w_nat, w_bndy)
    loss = per_sample.mean()
    penalty = policies.regularizer.penalty(logits.float(), y)
    if penalty is not None:
        loss = loss + penalty
    state.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    state.optimizer.step()
    state.scheduler.step()
    totals.add(per_sample, logits, y)


def train_epoch(state: RunState, epoch: int, policy_state: EpochPolicyState, progress: bool) -> EpochTotals:
    """One pass over the training set; raises TrainingDivergedError on a non-finite loss."""
    dev = state.dev
    state.model.train()
    totals = EpochTotals.zeros(state.num_classes, dev)
    eps = policy_state.class_eps.to(dev, torch.float32) if state.classwise_eps else None
    w_nat = policy_state.w_nat.to(dev, torch.float32)
    w_bndy = policy_state.w_bndy.to(dev, torch.float32)
    batches = epoch_batches(state.x_train.shape[0], int(state.cfg["batch_size"]), state.cpu_gen, shuffle=True)
    bar = tqdm(batches, desc=f"epoch {epoch}/{state.epochs}", disable=not progress, leave=False,
               file=sys.stderr, mininterval=2)
    for idx in bar:
        x, y = _augmented_batch(state, idx.to(dev))
        train_step(state, x, y, eps, w_nat, w_bndy, totals)
    bar.close()
    # One sync per epoch: a NaN anywhere in the epoch poisons the sum.
    if not torch.isfinite(totals.loss.sum()):
        kept = f"the checkpoint of epoch {epoch - 1} is kept" if epoch > 1 else "nothing was trained"
        raise TrainingDivergedError(
            f"non-finite training loss in epoch {epoch} of {state.run_dir.name} at lr "
            f"{state.scheduler.get_last_lr()[0]:.3g} (run config optimizer.lr {state.cfg['optimizer']['lr']!r}); "
            f"{kept}: lower optimizer.lr or check the data, then rerun"
        )
    return totals
