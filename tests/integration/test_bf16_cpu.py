"""bf16 autocast training on a CPU with native bf16 (AVX-512 BF16, AMX): it trains under
autocast, keeps fp32 weights and BatchNorm statistics, and its model evaluates in fp32."""

import json

import pytest
import torch

from study.device import cpu_supports_bf16
from study.evaluate.checkpoint_eval import evaluate_checkpoint
from study.evaluate.records import read_records
from study.train.engine import train_run

pytestmark = pytest.mark.skipif(not cpu_supports_bf16(), reason="this CPU has no native bf16")


def test_the_cpu_bf16_path_trains_in_bf16_and_evaluates_in_fp32(tmp_path, synthetic_splits, tiny_run_config,
                                                                 ci_params, monkeypatch):
    from study.config import resolve_evaluation
    from study.config.spec import EvaluationSpec

    seen = []
    conv = torch.nn.functional.conv2d

    def spy(x, w, *args, **kwargs):  # the dtype each convolution computes in, training and evaluation alike
        out = conv(x, w, *args, **kwargs)
        seen.append(out.dtype)
        return out

    cfg = {**tiny_run_config, "epochs": 1, "precision": "bf16"}
    monkeypatch.setattr(torch.nn.functional, "conv2d", spy)
    result = train_run(cfg, synthetic_splits, tmp_path / "run", device="cpu", progress=False)
    assert result.finished
    assert torch.bfloat16 in seen, "no convolution ran in bf16 under train.precision bf16"
    state = torch.load(tmp_path / "run" / "model.pt", map_location="cpu", weights_only=False)
    tensors = [v for v in state["state_dict"].values() if v.is_floating_point()]
    assert tensors and all(t.dtype == torch.float32 for t in tensors), "master weights and BN statistics stay fp32"
    assert json.loads((tmp_path / "run" / "config.json").read_text())["precision"] == "bf16"
    seen.clear()
    evaluation = {**resolve_evaluation(ci_params, "pgd3", dataset="synthetic"), "test_per_class": 2}
    (out,) = evaluate_checkpoint(tmp_path / "run", synthetic_splits,
                                 [(EvaluationSpec.parse(evaluation), tmp_path / "pgd3.parquet")],
                                 device="cpu", progress=False)
    frame, _ = read_records(out)
    assert len(frame) == 2 * 10 and seen and set(seen) == {torch.float32}, set(seen)
