import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import paused_train

from study.config.types import OptimizerSettings, ScheduleSettings, parse
from study.io import load_torch
from study.run_directory import load_trained_model
from study.train.engine import EPOCH_COLUMNS, TrainingDivergedError, channel_stats, train_run
from study.train.optim import lr_factor

#: run as its own process: train_run paused by a callback after its first checkpoint
PAUSED_TRAIN = paused_train.__file__


def test_training_writes_records_checkpoint_and_model(tmp_path, synthetic_splits, tiny_run_config):
    result = train_run(tiny_run_config, synthetic_splits, tmp_path / "run", device="cpu", progress=False)
    assert result.finished and result.epochs_done == 3
    run = tmp_path / "run"
    for name in ("config.json", "checkpoint.pt", "model.pt", "epochs.csv", "meta.json"):
        assert (run / name).exists(), name
    epochs = pd.read_csv(run / "epochs.csv")
    assert list(epochs.columns) == EPOCH_COLUMNS
    assert len(epochs) == 3 * 10 and sorted(epochs["epoch"].unique()) == [1, 2, 3]
    assert (epochs["n"] == tiny_run_config["epoch_eval"]["per_class"]).all()
    assert epochs["robust_acc"].notna().all(), "a PGD-AT run records robust accuracy every epoch"
    # robustness is accuracy under attack: it cannot exceed clean accuracy on average
    last = epochs[epochs["epoch"] == 3]
    assert last["robust_acc"].mean() <= last["clean_acc"].mean() + 1e-9
    # each class saw its share of the training set every epoch
    per_class = tiny_run_config["train_per_class"] or len(synthetic_splits.train_y) // 10
    assert (epochs["train_n"] == per_class).all()
    assert epochs["epsilon"].iloc[0] == pytest.approx(8 / 255)
    meta = json.loads((run / "meta.json").read_text())
    assert len(meta["epoch_seconds"]) == 3 and meta["packages"]["torch"]


def test_standard_training_learns_the_synthetic_classes(tmp_path, synthetic_splits, tiny_run_config):
    cfg = {**tiny_run_config, "method": "standard", "method_config": {"adversary": None}, "epochs": 4,
           "train_per_class": None}
    train_run(cfg, synthetic_splits, tmp_path / "std", device="cpu", progress=False)
    epochs = pd.read_csv(tmp_path / "std" / "epochs.csv")
    final = epochs[epochs["epoch"] == 4]
    assert final["clean_acc"].mean() > 0.3, "well above the 10% of chance"
    assert final["train_loss"].mean() < epochs[epochs["epoch"] == 1]["train_loss"].mean()
    assert final["epsilon"].eq(0).all()


def test_resume_after_stop_gives_identical_records(tmp_path, synthetic_splits, tiny_run_config):
    straight = tmp_path / "straight"
    train_run(tiny_run_config, synthetic_splits, straight, device="cpu", progress=False)

    resumed = tmp_path / "resumed"
    first = train_run(tiny_run_config, synthetic_splits, resumed, device="cpu", stop_after=1, progress=False)
    assert not first.finished and not (resumed / "model.pt").exists()
    assert load_torch(resumed / "checkpoint.pt")["epoch"] == 1
    train_run(tiny_run_config, synthetic_splits, resumed, device="cpu", progress=False)

    a, b = pd.read_csv(straight / "epochs.csv"), pd.read_csv(resumed / "epochs.csv")
    pd.testing.assert_frame_equal(a, b)
    wa, wb = load_torch(straight / "model.pt"), load_torch(resumed / "model.pt")
    for key in wa["state_dict"]:
        assert torch.equal(wa["state_dict"][key], wb["state_dict"][key]), key


def test_killed_process_resumes_from_checkpoint(tmp_path, synthetic_file, tiny_run_config):
    """SIGKILL a training process paused right after its first checkpoint (train_run's
    `on_checkpoint` callback, from tests/helpers/paused_train.py, so no race with a fast
    machine); the rerun, the real `study train`, resumes from epoch 1 and finishes with the
    records of an uninterrupted run."""
    cfg = {**tiny_run_config, "epochs": 3}
    cfg_path = tmp_path / "cfg.json"
    cfg_path.write_text(json.dumps(cfg))
    exe = os.path.join(os.path.dirname(sys.executable), "study")
    args = [exe, "train", "--data", str(synthetic_file), "--run-dir", str(tmp_path / "run"),
            "--run-config", f"@{cfg_path}", "--device", "cpu", "--no-progress", "--threads", "1"]
    release = tmp_path / "release"  # never created: the paused process waits for it until killed
    reached = tmp_path / "release.reached"
    paused = [sys.executable, PAUSED_TRAIN, str(synthetic_file), str(tmp_path / "run"), str(cfg_path), str(release)]
    log = tmp_path / "killed.log"
    with log.open("w") as stderr:
        proc = subprocess.Popen(paused, stderr=stderr)
    try:
        # the one timeout here is a hang guard: reaching the pause ends the wait
        deadline = time.monotonic() + 300
        while not reached.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reached.exists(), f"the training never paused after its first checkpoint (exit {proc.poll()})"
        assert proc.poll() is None, "the paused process must still be running when it is killed"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    run = tmp_path / "run"
    assert load_torch(run / "checkpoint.pt")["epoch"] == 1
    assert not (run / "model.pt").exists() and not (run / "meta.json").exists()
    assert sorted(pd.read_csv(run / "epochs.csv")["epoch"].unique()) == [1]
    assert not re.findall(r"^epoch [23]/3 ", log.read_text(), re.M)

    rerun = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert "resuming run after epoch 1/3" in rerun.stderr
    # the resumed process trains epochs 2 and 3 only (one log line per epoch trained)
    assert re.findall(r"^epoch (\d+)/3 ", rerun.stderr, re.M) == ["2", "3"]
    epochs = pd.read_csv(run / "epochs.csv")
    assert sorted(epochs["epoch"].unique()) == [1, 2, 3]
    assert len(json.loads((run / "meta.json").read_text())["epoch_seconds"]) == 3

    straight = tmp_path / "straight"
    from study.data.prepared import load_prepared

    # the same thread count as the subprocess: CPU reductions split by thread count round differently
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train_run(cfg, load_prepared(synthetic_file), straight, device="cpu", progress=False)
    finally:
        torch.set_num_threads(threads)
    pd.testing.assert_frame_equal(epochs, pd.read_csv(straight / "epochs.csv"))
    wa, wb = load_torch(straight / "model.pt"), load_torch(run / "model.pt")
    for key in wa["state_dict"]:
        assert torch.equal(wa["state_dict"][key], wb["state_dict"][key]), key


def test_nan_loss_stops_with_a_clear_error_and_keeps_the_last_checkpoint(tmp_path, synthetic_splits, tiny_run_config):
    cfg = {**tiny_run_config, "method": "standard", "method_config": {"adversary": None}, "epochs": 2,
           "optimizer": {**tiny_run_config["optimizer"], "lr": 1e30}}
    with pytest.raises(TrainingDivergedError, match="non-finite training loss in epoch 1"):
        train_run(cfg, synthetic_splits, tmp_path / "nan", device="cpu", progress=False)
    assert not (tmp_path / "nan" / "checkpoint.pt").exists()
    assert not (tmp_path / "nan" / "model.pt").exists()


def test_run_dir_with_another_config_is_refused(tmp_path, synthetic_splits, tiny_run_config):
    run = tmp_path / "run"
    train_run({**tiny_run_config, "epochs": 1}, synthetic_splits, run, device="cpu", progress=False)
    with pytest.raises(ValueError, match="different config"):
        train_run({**tiny_run_config, "epochs": 2}, synthetic_splits, run, device="cpu", progress=False)


def test_wrong_dataset_is_refused(tmp_path, synthetic_splits, tiny_run_config):
    with pytest.raises(ValueError, match="cifar10"):
        train_run({**tiny_run_config, "dataset": "cifar10", "data_variant": "official"}, synthetic_splits,
                  tmp_path / "x", device="cpu", progress=False)


def test_trained_model_loads_in_eval_mode(tmp_path, synthetic_splits, tiny_run_config):
    train_run({**tiny_run_config, "epochs": 1}, synthetic_splits, tmp_path / "r", device="cpu", progress=False)
    model, arch = load_trained_model(tmp_path / "r")
    assert not model.training
    assert arch["num_classes"] == 10
    x = synthetic_splits.test_x[:4].float() / 255
    assert model(x).shape == (4, 10)


def test_channel_stats_match_numpy():
    images = torch.randint(0, 256, (50, 3, 8, 8), dtype=torch.uint8)
    mean, std = channel_stats(images, chunk=7)
    ref = images.numpy().astype(np.float64) / 255
    np.testing.assert_allclose(mean, ref.mean(axis=(0, 2, 3)), rtol=1e-9)
    np.testing.assert_allclose(std, ref.std(axis=(0, 2, 3)), rtol=1e-6)


def test_step_schedule_divides_at_half_and_three_quarters():
    f = lr_factor(ScheduleSettings(name="step", milestones=[0.5, 0.75], gamma=0.1), epochs=200, iters_per_epoch=10)
    assert f(0) == 1.0 and f(999) == 1.0
    assert f(1000) == pytest.approx(0.1) and f(1499) == pytest.approx(0.1)
    assert f(1500) == pytest.approx(0.01)


def test_cyclic_schedule_is_one_linear_cycle():
    f = lr_factor(ScheduleSettings(name="cyclic", peak=0.4), epochs=10, iters_per_epoch=10)
    assert f(0) == 0.0
    assert f(40) == pytest.approx(1.0)
    assert f(20) == pytest.approx(0.5)
    assert f(70) == pytest.approx(0.5)
    assert f(100) == pytest.approx(0.0)
    assert all(0 <= f(i) <= 1 for i in range(101))


def test_unknown_schedule_and_optimizer_are_named():
    # named where a run config is parsed (study.config.spec), as the train command parses it
    with pytest.raises(ValueError, match="'warmup'.*step, cyclic, constant"):
        parse(ScheduleSettings, {"name": "warmup"}, "schedule")
    with pytest.raises(ValueError, match="'lbfgs'.*sgd, adam"):
        parse(OptimizerSettings, {"name": "lbfgs", "lr": 1, "weight_decay": 0}, "optimizer")
