"""One training epoch: for each batch, augment on the device, draw the step's random
numbers, run the step (study.train.step); per-class sums stay on the device until the
epoch ends, and the one host read of the epoch checks that the loss stayed finite.

Nothing in the batch loop waits for the GPU: the epoch's shuffled indices (one permutation
from the run's CPU generator, as `epoch_batches` draws it), its learning rates and its
per-class tables reach the device once per epoch, by non_blocking copies from pinned memory."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from tqdm import tqdm

from study.data.augment import random_crop_flip, to_float
from study.data.batches import epoch_batches
from study.device import host_to_device
from study.train.optim import lr_table
from study.train.setup import RunState
from study.train.step import EpochTables, EpochTotals, TrainStep

__all__ = ["EpochPolicyState", "EpochTotals", "TrainingDivergedError", "train_epoch"]


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is left untouched."""


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

    def tables(self, state: RunState) -> EpochTables:
        """The values as the step reads them: fp32 on the device, eps only where a policy varies it."""
        def dev(t: torch.Tensor) -> torch.Tensor:
            return host_to_device(t.to(torch.float32), state.dev)

        return EpochTables(dev(self.class_eps) if state.classwise_eps else None, dev(self.w_nat), dev(self.w_bndy),
                           dev(self.class_beta))


def augmented_batch(state: RunState, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch's images as floats in [0,1], cropped and flipped on the device, and its labels."""
    augment = state.run.augment
    xb, yb = state.x_train[idx], state.y_train[idx]
    if augment.crop_padding or augment.flip:
        xb = random_crop_flip(xb, padding=augment.crop_padding, flip=augment.flip, generator=state.dev_gen)
    return to_float(xb).contiguous(memory_format=torch.channels_last), yb


def device_batches(state: RunState) -> list[torch.Tensor]:
    """The epoch's batches of training indices, on the device: the whole shuffle drawn at once
    on the host from `state.cpu_gen` (the same order as ever) and copied in one go."""
    batch_size = state.run.batch_size
    batches = epoch_batches(state.x_train.shape[0], batch_size, state.cpu_gen, shuffle=True)
    if not batches:
        return []
    return list(torch.split(host_to_device(torch.cat(batches), state.dev), batch_size))


def train_batches(state: RunState, step: TrainStep, epoch: int, policy_state: EpochPolicyState,
                  progress: bool) -> EpochTotals:
    """The epoch's steps, with nothing read back to the host (tests/integration/test_host_reads.py)."""
    totals = EpochTotals.zeros(state.num_classes, state.dev, soft=state.policies.needs_soft_confusion)
    tables = policy_state.tables(state)
    batches = device_batches(state)
    lrs = host_to_device(lr_table(state.scheduler, state.scheduler.last_epoch, len(batches), torch.device("cpu")),
                         state.dev)
    bar = tqdm(batches, desc=f"epoch {epoch}/{state.epochs}", disable=not progress, leave=False,
               file=sys.stderr, mininterval=2)
    for i, idx in enumerate(bar):
        x, y = augmented_batch(state, idx)
        target, start, noise = step.draws(x, y)
        step.fn(x, y, target, start, noise, tables, lrs[i], totals)
        # The schedule's own counter (checkpointed) moves on; its lr was in the table already.
        state.scheduler.step()
    bar.close()
    return totals


def train_epoch(state: RunState, step: TrainStep, epoch: int, policy_state: EpochPolicyState,
                progress: bool) -> EpochTotals:
    """One pass over the training set; raises TrainingDivergedError on a non-finite loss."""
    state.model.train()
    totals = train_batches(state, step, epoch, policy_state, progress)
    # One sync per epoch: a NaN anywhere in the epoch poisons the sum.
    if not torch.isfinite(totals.loss.sum()):
        kept = f"the checkpoint of epoch {epoch - 1} is kept" if epoch > 1 else "nothing was trained"
        raise TrainingDivergedError(
            f"non-finite training loss in epoch {epoch} of {state.run_dir.name} at lr "
            f"{state.scheduler.get_last_lr()[0]:.3g} (run config optimizer.lr {state.run.optimizer.lr!r}); "
            f"{kept}: lower optimizer.lr or check the data, then rerun"
        )
    return totals
