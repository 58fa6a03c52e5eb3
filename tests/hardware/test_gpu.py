"""What only a GPU can show (marker `gpu`; `make gpu-check` runs them, docs/performance.md
"On a GPU machine"): the CUDA training step of PGD-AT, TRADES and FAT equals the CPU step
within a stated tolerance, every compile mode's step equals the eager one, evaluation records
do not depend on the batch size on CUDA, and our AutoAttack cascade is the library's on CUDA.

Without CUDA every test here is skipped at collection. STUDY_GPU_TEST_DEVICE=cpu runs them on
the CPU against the CPU (a check of the tests themselves, not of CUDA)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

DEVICE = os.environ.get("STUDY_GPU_TEST_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(DEVICE.startswith("cuda") and not torch.cuda.is_available(),
                                reason="needs a CUDA device")

ROOT = Path(__file__).resolve().parents[2]
#: One step of the small model below from the same weights, batch and random numbers: the
#: updated parameters may differ by at most this much (float32 without TF32; an input
#: gradient within rounding of zero may take the other sign in an attack step, moving that
#: pixel by 2 alpha), and the recorded loss sums relatively by RTOL.
PARAM_ATOL = 1e-3
RTOL = 1e-3


@pytest.fixture(autouse=True)
def no_tf32():
    from study.device import set_tf32

    before = set_tf32({"cudnn": False, "matmul": False})
    yield
    set_tf32(before)


def _to(obj, dev: torch.device):
    if isinstance(obj, torch.Tensor):
        return obj.to(dev)
    if isinstance(obj, tuple):
        return tuple(_to(o, dev) for o in obj)
    return obj


def _small_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 10))


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return torch.rand(32, 3, 8, 8, generator=gen), torch.randint(0, 10, (32,), generator=gen)


def _step_on(method: dict, device: str, mode: str = "off") -> tuple[list[torch.Tensor], torch.Tensor]:
    """(parameters after one step, the step's per-class loss sums), on `device`, with the
    random numbers drawn on the CPU (the same on every device)."""
    from helpers.step_probe import step_state

    from study.train.step import EpochTables, EpochTotals, TrainStep

    x, y = _batch()
    cpu_state = step_state(method, _small_model(), 10)
    target, start, noise = TrainStep(cpu_state, "off").draws(x, y)
    dev = torch.device(device)
    if mode != "off":
        torch._dynamo.reset()
    state = step_state(method, _small_model().to(dev), 10)
    state.dev = dev
    step = TrainStep(state, mode)
    policies = state.policies
    w_nat, w_bndy = (w.float().to(dev) for w in policies.weights.weights())
    tables = EpochTables(None, w_nat, w_bndy, policies.loss.class_beta().float().to(dev))
    totals = EpochTotals.zeros(policies.loss.class_beta().shape[0], dev)
    state.model.train()
    step.fn(x.to(dev), y.to(dev), _to(target, dev), _to(start, dev), _to(noise, dev), tables,
            torch.tensor(0.5, device=dev), totals)
    return [p.detach().cpu() for p in state.model.parameters()], totals.loss.cpu()


def _assert_close(a, b) -> None:
    params_a, loss_a = a
    params_b, loss_b = b
    worst = max(float((pa - pb).abs().max()) for pa, pb in zip(params_a, params_b, strict=True))
    assert worst <= PARAM_ATOL, f"parameters differ by {worst:.2e} > {PARAM_ATOL}"
    torch.testing.assert_close(loss_a, loss_b, rtol=RTOL, atol=1e-6)


@pytest.mark.parametrize("name", ["pgd_at", "trades", "fat"])
def test_cuda_step_equals_the_cpu_step(name):
    from helpers.step_probe import paper_method

    method = paper_method(ROOT, name)
    _assert_close(_step_on(method, DEVICE), _step_on(method, "cpu"))


def test_every_compile_mode_steps_as_eager():
    from helpers.step_probe import paper_method

    from study.train.step import COMPILE_MODES

    method = paper_method(ROOT, "pgd_at")
    eager = _step_on(method, DEVICE)
    for mode in COMPILE_MODES:
        if mode != "off":
            _assert_close(_step_on(method, DEVICE, mode), eager)


@pytest.mark.parametrize("norm", ["linf", "l2"])
def test_evaluation_records_do_not_depend_on_the_batch_size(norm, standard_run, synthetic_splits):
    import numpy as np
    from helpers.attacks import ATTACKS

    from study.attacks.pgd import RNG_CHUNK
    from study.predict import predict
    from study.run_directory import load_trained_model

    model = load_trained_model(standard_run, device=DEVICE)[0]
    x, y = synthetic_splits.test_x, synthetic_splits.test_y
    runs = [predict(model, x, y, attack=ATTACKS[norm], batch_size=b, device=DEVICE, seed=3, keep_logits=True)
            for b in (RNG_CHUNK, 4 * RNG_CHUNK)]
    np.testing.assert_array_equal(runs[0].pred, runs[1].pred)
    np.testing.assert_allclose(runs[0].logits, runs[1].logits, rtol=1e-4, atol=1e-4)


def test_our_autoattack_is_the_librarys_on_cuda(standard_run, synthetic_splits, ci_params):
    from study.attacks.autoattack import attack_list, autoattack_batch, build_autoattack
    from study.config import resolve_evaluation
    from study.config.spec import EvaluationSpec
    from study.data.augment import to_float
    from study.run_directory import load_trained_model

    model, _ = load_trained_model(standard_run, device=DEVICE)
    ev = EvaluationSpec.parse({**resolve_evaluation(ci_params, "autoattack"), "seed": 3, "batch_size": 7}).config
    x = to_float(synthetic_splits.test_x[:30]).to(DEVICE)
    y = synthetic_splits.test_y[:30].to(DEVICE)
    _, broken_by = autoattack_batch(model, x, y, ev, attack_list(ev))
    aa = build_autoattack(model, ev, len(synthetic_splits.class_names), x.device)
    aa.attacks_to_run = attack_list(ev)
    _, pred = aa.run_standard_evaluation(x, y, batch_size=ev.batch_size)
    assert (broken_by == "").tolist() == (pred == y).cpu().numpy().tolist()
