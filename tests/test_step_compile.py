"""The training step compiles whole (`torch.compile(fullgraph=True)`) for every method
family and gives the eager step's results.

The compiled side uses the `aot_eager` backend: dynamo captures the step as one graph (a
graph break is an error with fullgraph=True) and AOTAutograd traces its forward, backward
and update, as with inductor, without inductor's code generation (minutes on 2 cores;
`study bench --compile default` times that). Tolerance: the two sides run the same
operations in a different order (functionalized), so results agree to float32 rounding
accumulated over the steps: 1e-4 relative / 1e-5 absolute on parameters and totals.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from study.config import ConfigSpec, run_config
from study.data.batches import epoch_batches
from study.train.epoch import EpochPolicyState, augmented_batch
from study.train.optim import build_optimizer, build_scheduler, lr_table
from study.train.setup import resume_or_start, setup_run
from study.train.step import (
    AUTO_COMPILE,
    COMPILE_BACKEND_ENV,
    COMPILE_MODES,
    EpochTotals,
    TrainStep,
    resolve_compile,
)

#: One method per family of the issue: each exercises a different path through the step.
FAMILIES = {
    "standard": "standard",               # no adversary
    "pgd_at": "pgd_at",                   # PGD, fixed eps
    "trades": "trades",                   # KL attack from x + 0.001 N(0,1), CE + beta KL
    "fat": "fat",                         # early-stopped PGD (CFA's loop: train-mode BatchNorm)
    "classwise_eps": "pgd_at_cfa_nowa",   # CFA: per-class eps and class-wise beta
    "targeted": "pgd_at_fairtat",         # FAIR-TAT: targeted attack, targets from the CFP
    "reweighting": "frl_reweight",        # FRL: class weights on the loss terms
    "regularizer": "cosine_penalty",      # a penalty on the batch's class means
}
STEPS = 3


def _group(params: dict, method: str) -> dict:
    for group in params["experiments"]:
        if method in group.get("methods", []):
            return group
    return params["experiments"][0]


def _state(params: dict, splits, method: str, run_dir, optimizer: dict | None = None, **overrides):
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


def _run(state, mode: str, backend: str | None = None) -> EpochTotals:
    return _steps(state, mode, backend, STEPS)[0]


def _steps(state, mode: str, backend: str | None, steps: int) -> tuple[EpochTotals, TrainStep]:
    step = TrainStep(state, mode, backend=backend)
    tables = EpochPolicyState.of(state).tables(state)
    totals = EpochTotals.zeros(state.num_classes, state.dev)
    batches = epoch_batches(state.x_train.shape[0], state.run.batch_size, state.cpu_gen)[:steps]
    lrs = lr_table(state.scheduler, state.scheduler.last_epoch, len(batches), state.dev)
    for i, idx in enumerate(batches):
        x, y = augmented_batch(state, idx)
        step.fn(x, y, *step.draws(x, y), tables, lrs[i], totals)
    return totals, step


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a.double(), b.double(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_step_compiles_whole_and_matches_eager(family, ci_params, synthetic_splits, tmp_path, one_thread):
    torch._dynamo.reset()
    method = FAMILIES[family]
    eager = _state(ci_params, synthetic_splits, method, tmp_path / "eager")
    compiled = _state(ci_params, synthetic_splits, method, tmp_path / "compiled")
    a = _run(eager, "off")
    b = _run(compiled, "default", backend="aot_eager")
    assert a.count.sum() > 0 and torch.equal(a.count, b.count)
    for name in ("loss", "correct", "confusion"):
        assert _close(getattr(a, name), getattr(b, name)), name
    for (key, pa), pb in zip(eager.model.state_dict().items(), compiled.model.state_dict().values(), strict=True):
        assert _close(pa, pb), key
    # The step changed the model: equal results are not two untouched copies.
    fresh = _state(ci_params, synthetic_splits, method, tmp_path / "fresh").model.state_dict()
    assert any(not torch.equal(fresh[k], v) for k, v in eager.model.state_dict().items())


def test_functional_adam_matches_torch_adam(ci_params, synthetic_splits, tmp_path, one_thread):
    """The step's own Adam update against torch.optim.Adam on the same gradients."""
    state = _state(ci_params, synthetic_splits, "standard", tmp_path / "a", {"name": "adam", "lr": 0.001})
    reference = copy.deepcopy(state.model)
    ref_opt = torch.optim.Adam(reference.parameters(), lr=0.001, weight_decay=state.run.optimizer.weight_decay)
    step = TrainStep(state, "off")
    lr = torch.tensor(0.001)
    for seed in range(3):
        x = torch.rand(8, *synthetic_splits.train_x.shape[1:], generator=torch.Generator().manual_seed(seed))
        y = torch.arange(8) % state.num_classes
        grads = torch.autograd.grad(torch.nn.functional.cross_entropy(state.model(x), y), step.params)
        with torch.no_grad():
            step._update(state.optimizer, step.params, list(grads), lr)
        ref_opt.zero_grad()
        torch.nn.functional.cross_entropy(reference(x), y).backward()
        ref_opt.step()
    for p, q in zip(state.model.parameters(), reference.parameters(), strict=True):
        # float32 rounding of lr / (1 - beta1^t) against torch's float64 scalars: within lr * 1e-3.
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("nesterov", [False, True])
def test_functional_sgd_matches_torch_sgd_and_shares_its_state_dict(ci_params, synthetic_splits, tmp_path, one_thread,
                                                                   nesterov):
    """The step's own SGD (momentum, weight decay, Nesterov) against torch.optim.SGD, and the
    optimizer state in torch.optim's state_dict layout: each loads the other's."""
    opt = {"name": "sgd", "lr": 0.05, "nesterov": nesterov}
    state = _state(ci_params, synthetic_splits, "standard", tmp_path / f"s{nesterov}", opt)
    reference = copy.deepcopy(state.model)
    group = state.optimizer.param_groups[0]
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=group["momentum"],
                              weight_decay=group["weight_decay"], nesterov=nesterov)
    step = TrainStep(state, "off")
    for seed in range(3):
        x = torch.rand(8, *synthetic_splits.train_x.shape[1:], generator=torch.Generator().manual_seed(seed))
        y = torch.arange(8) % state.num_classes
        grads = torch.autograd.grad(torch.nn.functional.cross_entropy(state.model(x), y), step.params)
        with torch.no_grad():
            step._update(state.optimizer, step.params, list(grads), torch.tensor(0.05))
        ref_opt.zero_grad()
        torch.nn.functional.cross_entropy(reference(x), y).backward()
        ref_opt.step()
    for p, q in zip(state.model.parameters(), reference.parameters(), strict=True):
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-7)
    ours, theirs = state.optimizer.state_dict(), ref_opt.state_dict()
    assert set(ours["param_groups"][0]) >= set(theirs["param_groups"][0]) - {"initial_lr"}
    assert ours["state"].keys() == theirs["state"].keys()
    ref_opt.load_state_dict(ours)  # torch reads what a checkpoint of ours holds
    state.optimizer.load_state_dict(theirs)  # and we read a torch checkpoint
    for i, p in enumerate(state.optimizer.param_groups[0]["params"]):
        assert torch.equal(state.optimizer.state[p]["momentum_buffer"], theirs["state"][i]["momentum_buffer"])


def test_a_host_read_in_the_step_is_a_graph_break_error(ci_params, synthetic_splits, tmp_path, monkeypatch):
    """fullgraph=True turns a graph break into an error instead of a silent slow path: an
    explicit `default` fails (only `auto` falls back, tests/test_compile_fallback.py)."""
    torch._dynamo.reset()
    state = _state(ci_params, synthetic_splits, "standard", tmp_path / "b")
    loss = state.policies.loss
    original = loss.per_sample

    def reads_back(*args, **kwargs):
        out = original(*args, **kwargs)
        if out.sum().item() > -1:  # a host read: the graph must break here
            return out
        return out

    monkeypatch.setattr(loss, "per_sample", reads_back)
    with pytest.raises((torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError)):
        _run(state, "default", backend="aot_eager")


def test_compile_modes_resolve_per_device():
    assert resolve_compile("auto", torch.device("cpu")) == "off"
    assert resolve_compile("auto", torch.device("cuda")) == "default"
    for mode in COMPILE_MODES[:-1]:
        assert resolve_compile(mode, torch.device("cpu")) == mode
    with pytest.raises(ValueError, match="fast.*valid: off, default, auto"):
        resolve_compile("fast", torch.device("cpu"))


@pytest.mark.inductor  # `make test-compile` (CI runs it after `make test`)
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
        state = _state(ci_params, small, "pgd_at", tmp_path / mode, train_per_class=2, batch_size=8, validation=None)
        state.adversary.cfg = state.adversary.cfg.model_copy(update={"steps": 1})  # the typed config is frozen
        torch.manual_seed(0)
        state.model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8),
                                          torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                          torch.nn.Linear(8, state.num_classes))
        state.optimizer = build_optimizer(state.model.parameters(), state.run.optimizer)
        state.scheduler = build_scheduler(state.optimizer, state.run.schedule, 1, 1)
        totals, step = _steps(state, mode, None, 2)
        states.append((state, totals, step))
    (eager, a, _), (compiled, b, step) = states
    assert step.ran == "step" and step.record()["reason"] is None
    assert a.count.sum() == 16 and torch.equal(a.count, b.count)
    for name in ("loss", "correct", "confusion"):
        assert _close(getattr(a, name), getattr(b, name)), name
    for (key, pa), pb in zip(eager.model.state_dict().items(), compiled.model.state_dict().values(), strict=True):
        assert _close(pa, pb), key
