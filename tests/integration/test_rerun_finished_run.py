"""A workflow that reruns a finished training job (a speed setting, the command's text,
--forcerun, a touched input, a kill during the last epoch's wrap-up) first removes the job's
declared files; the training then finds the finished checkpoint.pt. It writes every file of the
run again from it, with the records of the run as it was, and trains afresh only where the
checkpoint was trained on other inputs (study.train.setup.stale_reason)."""

import copy
import dataclasses
import json

import pandas as pd
import pytest
import torch

from study.config import plan_runs
from study.io import load_torch
from study.run_directory import CONFIG_FILE, EPOCHS_FILE, KEPT_FILES, META_FILE, PUBLISHED_FILE, VALIDATION_FILE
from study.train.engine import train_run

#: what the train rules declare for a run that keeps its best and published checkpoints
DECLARED = ("model.pt", EPOCHS_FILE, CONFIG_FILE, "model_best.pt", "model_published.pt")
RECORDS = (EPOCHS_FILE, META_FILE, VALIDATION_FILE, PUBLISHED_FILE, "model_best.pt", "model_published.pt")


@pytest.fixture(scope="module")
def kept_config(ci_params):
    """The ci preset's `at` run of the mitigation group: a validation split (model_best.pt) and
    the published protocol (model_published.pt), on fewer images."""
    run = next(r for r in plan_runs(ci_params) if r.config["method"] == "at" and "published_selection" in r.config)
    cfg = copy.deepcopy(run.config)
    cfg["epoch_eval"]["per_class"] = 2
    return cfg


@pytest.fixture(scope="module")
def finished(tmp_path_factory, synthetic_splits, kept_config):
    run = tmp_path_factory.mktemp("finished") / "run"
    train_run(kept_config, synthetic_splits, run, device="cpu", progress=False)
    return run, {name: (run / name).read_bytes() for name in RECORDS}


def _copy(src, dest):
    dest.mkdir(parents=True)
    for path in src.iterdir():
        (dest / path.name).write_bytes(path.read_bytes())
    return dest


def _weights(path):
    return load_torch(path)["state_dict"]


def _same_weights(a, b) -> bool:
    wa, wb = _weights(a), _weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.parametrize("lost", [DECLARED, (*DECLARED, META_FILE)], ids=["rerun", "killed-before-meta"])
def test_rerun_of_a_finished_run_writes_its_files_again_without_training(
        tmp_path, capfd, synthetic_splits, kept_config, finished, lost):
    original, records = finished
    run = _copy(original, tmp_path / "run")
    for name in lost:  # what Snakemake removes before it reruns the job (and a kill left unwritten)
        (run / name).unlink()
    capfd.readouterr()
    result = train_run(kept_config, synthetic_splits, run, device="cpu", progress=False)
    err = capfd.readouterr().err
    assert result.finished
    assert (f"{run.name}: checkpoint.pt holds the finished run (epoch 2/2); no epoch trained, its files written "
            "again from it: epochs.csv, model.pt, model_best.pt, model_published.pt") in err
    assert "epoch 1/2" not in err and "training run" not in err
    for name in DECLARED:
        assert (run / name).is_file(), name
    kept = [n for n in RECORDS if n != META_FILE or META_FILE not in lost]
    assert {n: (run / n).read_bytes() for n in kept} == {n: records[n] for n in kept}
    assert _same_weights(run / "model.pt", original / "model.pt")
    assert (run / CONFIG_FILE).read_bytes() == (original / CONFIG_FILE).read_bytes()
    if META_FILE in lost:  # written again: the training's numbers from the checkpoint
        meta, was = (json.loads(p.read_bytes()) for p in (run / META_FILE, original / META_FILE))
        assert {k: meta[k] for k in ("epoch_seconds", "best_epoch", "published_epoch", "compile")} == \
               {k: was[k] for k in ("epoch_seconds", "best_epoch", "published_epoch", "compile")}


def test_a_checkpoint_of_other_data_is_not_continued(tmp_path, capfd, synthetic_splits, kept_config, finished):
    original, records = finished
    run = _copy(original, tmp_path / "run")
    for name in DECLARED:
        (run / name).unlink()
    other = dataclasses.replace(synthetic_splits, train_x=synthetic_splits.train_x.clone())
    other.train_x[0, 0, 0, 0] ^= 1  # one bit of one training image
    capfd.readouterr()
    train_run(kept_config, other, run, device="cpu", progress=False)
    err = capfd.readouterr().err
    assert f"{run / 'checkpoint.pt'} (epoch 2/2) is not continued: it was trained on other prepared data" in err
    assert f"; training {run.name} afresh" in err and "epoch 2/2" in err
    digests = [load_torch(r / "checkpoint.pt")["inputs"]["data"] for r in (run, original)]
    assert digests[0] != digests[1]
    assert len(pd.read_csv(run / EPOCHS_FILE)) == len(pd.read_csv(original / EPOCHS_FILE))


def test_a_finished_checkpoint_without_its_kept_model_trains_afresh(tmp_path, capfd, synthetic_splits, kept_config,
                                                                     finished):
    original, records = finished
    run = _copy(original, tmp_path / "run")
    for name in (*DECLARED, KEPT_FILES["best"]):
        (run / name).unlink()
    capfd.readouterr()
    train_run(kept_config, synthetic_splits, run, device="cpu", progress=False)
    err = capfd.readouterr().err
    assert ("is not continued: it is finished, but checkpoint_best.pt holds no model where its best model is "
            "epoch") in err
    # trained afresh with the same seeds: the same records (on this CPU) as the first training
    pd.testing.assert_frame_equal(pd.read_csv(run / EPOCHS_FILE), pd.read_csv(original / EPOCHS_FILE))
    assert (run / KEPT_FILES["best"]).is_file() and _same_weights(run / "model_best.pt", original / "model_best.pt")
