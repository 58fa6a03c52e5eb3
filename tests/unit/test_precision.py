"""Training precision: fp32 as the reference codes unless a run asks for bf16 (a GPU, or a CPU with native bf16)."""

import contextlib

import pytest
import torch

from study.config import load_params, plan_runs
from study.device import train_autocast


def _plan(repo_root, overrides):
    params = load_params(repo_root / "params.yaml", {"preset": "ci", **overrides},
                         presets_dir=repo_root / "workflow/presets",
                         schema_path=repo_root / "workflow/schemas/params.schema.yaml")
    return params, plan_runs(params)


def test_fp32_is_the_default_and_bf16_is_a_different_run(repo_root):
    params, runs = _plan(repo_root, {})
    assert params.train.precision == "fp32"
    assert all("precision" not in r.config for r in runs)  # fp32 runs keep their ids
    _, bf16 = _plan(repo_root, {"train.precision": "bf16"})
    assert all(r.config["precision"] == "bf16" for r in bf16 if r.config["method"] == "standard")
    assert {r.run_id for r in runs}.isdisjoint(r.run_id for r in bf16 if r.config["method"] == "standard")


def test_autocast_for_bf16_on_a_gpu_or_a_cpu_with_native_bf16_and_refused_elsewhere(monkeypatch):
    import study.device

    for device in (torch.device("cpu"), torch.device("cuda")):
        assert isinstance(train_autocast(device, "fp32"), contextlib.nullcontext)
    cuda = train_autocast(torch.device("cuda"), "bf16")
    assert isinstance(cuda, torch.autocast) and cuda.device == "cuda" and cuda.fast_dtype == torch.bfloat16
    monkeypatch.setattr(study.device, "cpu_supports_bf16", lambda: True)
    cpu = train_autocast(torch.device("cpu"), "bf16")
    assert isinstance(cpu, torch.autocast) and cpu.device == "cpu" and cpu.fast_dtype == torch.bfloat16
    # a CPU without native bf16: refused, never fp32 under bf16's name
    monkeypatch.setattr(study.device, "cpu_supports_bf16", lambda: False)
    with pytest.raises(ValueError, match=r"precision 'bf16' needs a GPU or a CPU with native bf16 .* valid here: fp32"):
        train_autocast(torch.device("cpu"), "bf16")
    with pytest.raises(ValueError, match=r"unknown precision 'fp16'; valid: fp32, bf16"):
        train_autocast(torch.device("cpu"), "fp16")
