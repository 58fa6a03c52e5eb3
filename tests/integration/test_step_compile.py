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

import pytest
import torch
from helpers.step_compile import all_close, method_state, run_steps

from study.train.step import (
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






def _run(state, mode: str, backend: str | None = None) -> EpochTotals:
    return run_steps(state, mode, backend, STEPS)[0]






@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_step_compiles_whole_and_matches_eager(family, ci_params, synthetic_splits, tmp_path, one_thread):
    torch._dynamo.reset()
    method = FAMILIES[family]
    eager = method_state(ci_params, synthetic_splits, method, tmp_path / "eager")
    compiled = method_state(ci_params, synthetic_splits, method, tmp_path / "compiled")
    a = _run(eager, "off")
    b = _run(compiled, "default", backend="aot_eager")
    assert a.count.sum() > 0 and torch.equal(a.count, b.count)
    for name in ("loss", "correct", "confusion"):
        assert all_close(getattr(a, name), getattr(b, name)), name
    for (key, pa), pb in zip(eager.model.state_dict().items(), compiled.model.state_dict().values(), strict=True):
        assert all_close(pa, pb), key
    # The step changed the model: equal results are not two untouched copies.
    fresh = method_state(ci_params, synthetic_splits, method, tmp_path / "fresh").model.state_dict()
    assert any(not torch.equal(fresh[k], v) for k, v in eager.model.state_dict().items())


def test_functional_adam_matches_torch_adam(ci_params, synthetic_splits, tmp_path, one_thread):
    """The step's own Adam update against torch.optim.Adam on the same gradients."""
    state = method_state(ci_params, synthetic_splits, "standard", tmp_path / "a", {"name": "adam", "lr": 0.001})
    reference = copy.deepcopy(state.model)
    ref_opt = torch.optim.Adam(reference.parameters(), lr=0.001, weight_decay=state.run.optimizer.weight_decay)
    step = TrainStep(state, "off")
    lr = torch.tensor(0.001)
    for seed in range(3):
        x = torch.rand(8, *synthetic_splits.train_x.shape[1:], generator=torch.Generator().manual_seed(seed))
        y = torch.arange(8) % state.num_classes
        grads = torch.autograd.grad(torch.nn.functional.cross_entropy(state.model(x), y), step.params)
        with torch.no_grad():
            step.update_params(state.optimizer, step.params, list(grads), lr)
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
    state = method_state(ci_params, synthetic_splits, "standard", tmp_path / f"s{nesterov}", opt)
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
            step.update_params(state.optimizer, step.params, list(grads), torch.tensor(0.05))
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
    explicit `default` fails (only `auto` falls back, tests/integration/test_compile_fallback.py)."""
    torch._dynamo.reset()
    state = method_state(ci_params, synthetic_splits, "standard", tmp_path / "b")
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


