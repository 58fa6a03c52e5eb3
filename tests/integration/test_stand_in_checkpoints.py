"""Every run writes the file of every checkpoint of the table (one train rule declares them all):
a checkpoint the run keeps none of is a stand-in for model.pt, which says so and which nothing
loads as a chosen model (study.run_directory.STANDS_IN_FOR). A rerun of the finished run writes
the stand-ins again."""

import json
import shutil

import pytest
from helpers.commands import run_study

from study.checkpoints import CHECKPOINT_FILES
from study.config import resolve_evaluation
from study.io import load_torch
from study.run_directory import (
    CONFIG_FILE,
    EPOCHS_FILE,
    STANDS_IN_FOR,
    load_trained_model,
    owned_run,
    read_run_config,
    write_missing_stand_ins,
)
from study.train.engine import train_run

STAND_INS = ("best", "published")  # a standard run of the ci preset keeps neither


def _run_copy(standard_run, tmp_path):
    """The shared standard run, in a folder named by its run id (as the workflow's)."""
    run_id = read_run_config(standard_run).run_id
    return shutil.copytree(standard_run, tmp_path / run_id)


def test_a_run_that_keeps_no_best_or_published_checkpoint_writes_stand_ins_for_its_last(standard_run):
    key = read_run_config(standard_run).key
    for name in STAND_INS:
        blob = load_torch(standard_run / CHECKPOINT_FILES[name])
        assert blob == {STANDS_IN_FOR: "last", "checkpoint": name, "file": "model.pt", "run_key": key}


@pytest.mark.parametrize("name", STAND_INS)
def test_a_stand_in_is_refused_as_a_model_in_one_line(standard_run, name):
    path = standard_run / CHECKPOINT_FILES[name]
    want = "a validation split" if name == "best" else "train.published_selection"
    with pytest.raises(ValueError) as err:
        load_trained_model(standard_run, checkpoint=name)
    assert str(err.value) == (f"{path} is a stand-in for model.pt (the run keeps no {name} checkpoint), not a model "
                              f"of its own; use the run's last checkpoint, or plan the run with {want}")
    model, _ = load_trained_model(standard_run, checkpoint="last")  # the one it stands for loads
    assert model is not None


def test_study_evaluate_of_a_stand_in_says_so_in_one_line(standard_run, tmp_path, synthetic_file, ci_params):
    run = _run_copy(standard_run, tmp_path)
    owned_run(run, "last")
    evaluation = json.dumps(resolve_evaluation(ci_params, "clean"))
    proc = run_study("evaluate", "--run-dir", str(run), "--data", str(synthetic_file), "--evaluation", evaluation,
                     "--out", str(tmp_path / "clean@best.parquet"), "--checkpoint", "best", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"study evaluate: error: {run / 'model_best.pt'} is a stand-in for model.pt (the run keeps no best "
        "checkpoint), not a model of its own; use the run's last checkpoint, or plan the run with a validation split "
        "(STUDY_TRACEBACK=1 shows the traceback)"]
    assert not (tmp_path / "clean@best.parquet").exists()


def test_a_rerun_of_the_finished_run_writes_its_stand_ins_again(standard_run, tmp_path, capfd, synthetic_splits):
    run = _run_copy(standard_run, tmp_path)
    cfg = json.loads((run / CONFIG_FILE).read_text())
    declared = [*CHECKPOINT_FILES.values(), EPOCHS_FILE, CONFIG_FILE]
    for name in declared:  # what Snakemake removes before it reruns the train job
        (run / name).unlink()
    capfd.readouterr()
    assert train_run(cfg, synthetic_splits, run, device="cpu", progress=False).finished
    err = capfd.readouterr().err
    assert ("no epoch trained, its files written again from it: epochs.csv, model.pt, model_best.pt (a stand-in for "
            "model.pt), model_published.pt (a stand-in for model.pt)") in err
    assert "epoch 1/2" not in err
    assert all((run / name).is_file() for name in declared)
    for name in STAND_INS:
        assert load_torch(run / CHECKPOINT_FILES[name]) == load_torch(standard_run / CHECKPOINT_FILES[name])


def test_a_run_of_a_version_without_stand_ins_gets_them_and_keeps_its_model(standard_run, tmp_path):
    run = _run_copy(standard_run, tmp_path)
    for name in STAND_INS:
        (run / CHECKPOINT_FILES[name]).unlink()
    model = (run / "model.pt").stat().st_mtime_ns
    assert write_missing_stand_ins(run) == ["model_best.pt", "model_published.pt"]
    for name in STAND_INS:
        assert load_torch(run / CHECKPOINT_FILES[name]) == load_torch(standard_run / CHECKPOINT_FILES[name])
    assert (run / "model.pt").stat().st_mtime_ns == model  # no file an evaluation reads is touched
    assert write_missing_stand_ins(run) == []
