"""A training step of a method on the ci preset, eager or compiled, for the compile tests."""

from __future__ import annotations

import copy

import torch

from study.config import ConfigSpec, Params, run_config
from study.config.types import ExperimentGroup
from study.data.batches import epoch_batches
from study.train.epoch import EpochPolicyState, augmented_batch
from study.train.optim import lr_table
from study.train.setup import resume_or_start, setup_run
from study.train.step import (
    EpochTotals,
    TrainStep,
)


def _group(params: Params, method: str) -> ExperimentGroup:
    for group in params.experiments:
        if method in group.methods:
            return group
    return params.experiments[0]


def method_state(params: Params, splits, method: str, run_dir, optimizer: dict | None = None, **overrides):
    cfg = run_config(params, _group(params, method), "small_cnn", method, 0)
    # FRL adapts to validation statistics: a held-out split wherever the group has none.
    cfg = {**copy.deepcopy(cfg), "batch_size": 24, "init_from": None,
           "validation": cfg.get("validation") or {"fraction": 0.1}, **overrides}
    if optimizer:
        cfg["optimizer"] = {**cfg["optimizer"], **optimizer}
    cfg["method_config"] = {k: v for k, v in cfg["method_config"].items() if k != "averaging"}
    state = setup_run(ConfigSpec.parse(cfg), splits, run_dir, "cpu")
    resume_or_start(state, None)
    return state


def run_steps(state, mode: str, backend: str | None, steps: int) -> tuple[EpochTotals, TrainStep]:
    step = TrainStep(state, mode, backend=backend)
    tables = EpochPolicyState.of(state).tables(state)
    totals = EpochTotals.zeros(state.num_classes, state.dev)
    batches = epoch_batches(state.x_train.shape[0], state.run.batch_size, state.cpu_gen)[:steps]
    lrs = lr_table(state.scheduler, state.scheduler.last_epoch, len(batches), state.dev)
    for i, idx in enumerate(batches):
        x, y = augmented_batch(state, idx)
        step.fn(x, y, *step.draws(x, y), tables, lrs[i], totals)
    return totals, step


def all_close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a.double(), b.double(), rtol=1e-4, atol=1e-5)
