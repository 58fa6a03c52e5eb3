"""No host wait per batch on CUDA (issue 25): torch's sync debug mode, CUDA's own, finds no
synchronisation in the training step loop or the evaluation loop (make gpu-check)."""

from __future__ import annotations

import pytest
import torch
from helpers.host_reads import host_read_state

from study.config import EvaluationSpec, resolve_evaluation
from study.train.epoch import EpochPolicyState
from study.train.step import TrainStep


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: torch's sync debug mode is CUDA's")
def test_no_synchronisation_in_the_cuda_loops(tmp_path, synthetic_splits, tiny_run_config, standard_run, ci_params):
    from study.predict import predict_on_device
    from study.run_directory import load_trained_model
    from study.train.epoch import train_batches

    cfg = {**tiny_run_config, "epochs": 1}
    state = host_read_state(cfg, synthetic_splits, tmp_path, 3, cfp=True, device="cuda")
    step = TrainStep(state, "off")
    policy_state = EpochPolicyState.of(state)
    model, _ = load_trained_model(standard_run, "cuda")
    model = model.to(memory_format=torch.channels_last)
    images, labels = synthetic_splits.test_x[:96], synthetic_splits.test_y[:96]
    ev = EvaluationSpec.parse(resolve_evaluation(ci_params, "pgd3")).config

    def loops():
        train_batches(state, step, 1, policy_state, progress=False)
        return predict_on_device(model, images, labels, attack=ev, batch_size=32, device=torch.device("cuda"),
                                 keep_logits=True)

    loops()  # warm-up: cuDNN's algorithm search and the allocator's first blocks
    torch.cuda.synchronize()
    # sync debug mode "error" raises on any host synchronisation inside the loops
    torch.cuda.set_sync_debug_mode("error")
    try:
        preds, logits, _ = loops()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert preds.shape == (len(labels),) and preds.device.type == "cuda" and logits.shape[0] == len(labels)
