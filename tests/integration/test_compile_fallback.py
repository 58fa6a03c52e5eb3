"""`speed.compile: auto` never crashes a run on a compile it cannot make: where the device's
torch fails to compile the whole step, the first batch runs again (from the state before
it) with the model alone compiled, then eagerly; one warning line, and meta.json says which
region ran and why.

The failures are injected on the CPU through dynamo backends (a backend is called when a
graph compiles, so its error is the real `BackendCompilerFailed` of a first call): the
whole step's raises; the model's runs the captured graph as it is (dynamo's `eager`
backend: the same operations as the eager step, so the records are bit for bit an eager
run's) or raises on its second graph, after the first has run forwards that moved
BatchNorm's running statistics (the state must be restored before eager runs the batch).
`auto` is `off` on a CPU, so the tests make it `default` there.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch

import study.train.step as step_module
from study.run_directory import EPOCHS_FILE, META_FILE
from study.train.engine import train_run


class FailingBackend:
    """A dynamo backend that runs the captured graph as it is and raises on graph `fail_at`."""

    def __init__(self, fail_at: int = 1):
        self.fail_at, self.graphs = fail_at, 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs) -> object:
        self.graphs += 1
        if self.graphs >= self.fail_at:
            raise RuntimeError(f"injected failure of graph {self.graphs}")
        return gm.forward


@pytest.fixture()
def small_cfg(tiny_run_config):
    """One epoch of PGD-AT on 4 images a class in batches of 16: two batch shapes (16 and 8)."""
    cfg = copy.deepcopy(tiny_run_config)
    cfg.update(epochs=1, train_per_class=4, batch_size=16)
    return cfg


@pytest.fixture()
def eager_run(small_cfg, synthetic_splits, tmp_path, one_thread):
    run = tmp_path / "eager"
    train_run(small_cfg, synthetic_splits, run, device="cpu", progress=False, compile_mode="off")
    return run


def _auto_run(cfg, splits, run_dir, monkeypatch, step_backend, model_backend):
    """train_run with `auto` as `default` on the CPU, each region compiled by its backend."""
    monkeypatch.setitem(step_module.AUTO_COMPILE, "cpu", "default")
    real = step_module.compile_region
    monkeypatch.setattr(step_module, "compile_region", lambda fn, region, backend:
                        real(fn, region, step_backend if region == "step" else model_backend))
    torch._dynamo.reset()
    train_run(cfg, splits, run_dir, device="cpu", progress=False, compile_mode="auto")
    return json.loads((run_dir / META_FILE).read_text())["compile"]


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if "speed.compile auto" in line]


def test_a_step_that_does_not_compile_runs_with_the_model_compiled(small_cfg, synthetic_splits, tmp_path, eager_run,
                                                                  monkeypatch, capsys):
    capsys.readouterr()
    run = tmp_path / "fallback"
    record = _auto_run(small_cfg, synthetic_splits, run, monkeypatch, FailingBackend(), "eager")
    (line,) = _warnings(capsys.readouterr().err)
    assert "step: BackendCompilerFailed (RuntimeError): injected failure of graph 1" in line
    assert line.endswith("running `model`")
    assert record["requested"] == "auto" and record["resolved"] == "default" and record["ran"] == "model"
    assert "BackendCompilerFailed" in record["reason"] and "injected" in record["reason"]
    assert (run / EPOCHS_FILE).read_text() == (eager_run / EPOCHS_FILE).read_text()


def test_a_model_that_fails_after_moving_batchnorm_falls_back_to_eager_from_the_state_before(
        small_cfg, synthetic_splits, tmp_path, eager_run, monkeypatch, capsys):
    capsys.readouterr()
    run = tmp_path / "fallback"
    model_backend = FailingBackend(fail_at=2)
    record = _auto_run(small_cfg, synthetic_splits, run, monkeypatch, FailingBackend(), model_backend)
    assert model_backend.graphs == 2  # the model's first graph ran (the attack's forwards) before one failed
    (line,) = _warnings(capsys.readouterr().err)
    assert "step: BackendCompilerFailed" in line and "model: BackendCompilerFailed" in line
    assert line.endswith("running `eager`")
    assert record["ran"] == "eager" and record["reason"].count("injected") == 2
    assert (run / EPOCHS_FILE).read_text() == (eager_run / EPOCHS_FILE).read_text()


def test_auto_that_compiles_records_the_whole_step(small_cfg, synthetic_splits, tmp_path, monkeypatch, capsys,
                                                   one_thread):
    small_cfg = {**small_cfg, "train_per_class": 2}  # one batch of 20: one compile
    record = _auto_run(small_cfg, synthetic_splits, tmp_path / "run", monkeypatch, "eager", "eager")
    assert record == {"requested": "auto", "resolved": "default", "ran": "step", "reason": None}
    assert not _warnings(capsys.readouterr().err)


def test_an_explicit_default_that_does_not_compile_is_an_error(small_cfg, synthetic_splits, tmp_path, monkeypatch):
    """`default` is the whole step or nothing (the check that the step stays one graph)."""
    real = step_module.compile_region
    monkeypatch.setattr(step_module, "compile_region", lambda fn, region, backend: real(fn, region, FailingBackend()))
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="injected"):
        train_run(small_cfg, synthetic_splits, tmp_path / "run", device="cpu", progress=False, compile_mode="default")


def test_max_is_refused_with_the_valid_modes():
    with pytest.raises(ValueError, match=r"'max' \(CUDA-graph capture was removed.*valid: off, default, auto$"):
        step_module.resolve_compile("max", torch.device("cuda"))
