"""The PGD-AT step compiled whole by the real inductor backend (C++ code generation: tens of
seconds on 2 cores; `make test-compile`) matches the eager step."""

from __future__ import annotations

import dataclasses

import torch
from helpers.step_compile import all_close, method_state, run_steps

from study.train.optim import build_optimizer, build_scheduler
from study.train.step import (
    AUTO_COMPILE,
    COMPILE_BACKEND_ENV,
)


def test_inductor_compiles_the_pgd_at_step_whole_and_matches_eager(ci_params, synthetic_splits, tmp_path, monkeypatch,
                                                                   one_thread):
    """The real backend: inductor (C++ code generation on the CPU) takes the PGD-AT step whole
    under `auto` (made `default` on the CPU), with no fallback, and matches eager over two
    steps within the tolerance above. Kept small, for inductor's compile time: 8x8 pixels, a
    one-conv model (conv-BN-ReLU, pooled, linear), one attack step, batches of 8; inductor
    compiles it in about 17 s on 2 cores with an empty cache (measured with torch 2.13.0), so
    the test is `slow` (still in `make test`)."""
    monkeypatch.delenv(COMPILE_BACKEND_ENV, raising=False)
    monkeypatch.setitem(AUTO_COMPILE, "cpu", "default")
    torch._dynamo.reset()
    small = dataclasses.replace(synthetic_splits, train_x=synthetic_splits.train_x[:, :, :8, :8].contiguous(),
                                test_x=synthetic_splits.test_x[:, :, :8, :8].contiguous())
    states = []
    for mode in ("off", "auto"):
        state = method_state(ci_params, small, "pgd_at", tmp_path / mode, train_per_class=2, batch_size=8,
                             validation=None)
        state.adversary.cfg = state.adversary.cfg.model_copy(update={"steps": 1})  # the typed config is frozen
        torch.manual_seed(0)
        state.model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8),
                                          torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                          torch.nn.Linear(8, state.num_classes))
        state.optimizer = build_optimizer(state.model.parameters(), state.run.optimizer)
        state.scheduler = build_scheduler(state.optimizer, state.run.schedule, 1, 1)
        totals, step = run_steps(state, mode, None, 2)
        states.append((state, totals, step))
    (eager, a, _), (compiled, b, step) = states
    assert step.ran == "step" and step.record()["reason"] is None
    assert a.count.sum() == 16 and torch.equal(a.count, b.count)
    for name in ("loss", "correct", "confusion"):
        assert all_close(getattr(a, name), getattr(b, name)), name
    for (key, pa), pb in zip(eager.model.state_dict().items(), compiled.model.state_dict().values(), strict=True):
        assert all_close(pa, pb), key
