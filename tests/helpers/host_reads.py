"""A training state of the ci preset's tiny run, for the host-read tests on CPU and CUDA."""

from __future__ import annotations

import math

import torch

from study.config.spec import ConfigSpec
from study.train.policies import CFPTargets
from study.train.setup import setup_run


def host_read_state(cfg, splits, run_dir, batches: int, cfp: bool, device: str = "cpu"):
    """A fresh run state whose epoch has `batches` batches (FAIR-TAT's CFP targets with `cfp`)."""
    state = setup_run(ConfigSpec.parse(cfg), splits, run_dir, device)
    state.spec = ConfigSpec.parse({**cfg, "batch_size": math.ceil(state.x_train.shape[0] / batches)})
    if cfp:
        state.policies.targets = CFPTargets(state.num_classes)
        state.policies.targets.cfp = torch.linspace(0.0, 1.0, state.num_classes, dtype=torch.float64)
    return state
