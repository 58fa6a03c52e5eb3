"""A finished ci run rerun by Snakemake for each reason that cannot change its model (a speed
setting, the rule's command text, --forcerun, a touched prepared-data file, a kill after the
last epoch's checkpoint): the rerun writes the run's files again from its checkpoint, trains no
epoch, and the same command ends with the records of the untouched run. Before, each of these
ended in MissingOutputException (epochs.csv), Snakemake removed model.pt and config.json, and
every later run failed the same way."""

import shutil

import pandas as pd
import pytest
from helpers.workflow import BIN, copy_project, run_command

from study.config import load_params, plan_runs

#: one train job and its evaluation job (clean and pgd3) of the ci preset: the models group's lenet
METHOD, MODEL = "standard", "lenet"


def _snakemake(*options):
    return [BIN / "snakemake", "--profile", "workflow/profiles/cpu", "--cores", "2", *options]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    project = copy_project(tmp_path_factory.mktemp("finished"))
    params = load_params(project / "params.yaml", {"preset": "ci"}, presets_dir=project / "workflow/presets",
                         schema_path=project / "workflow/schemas/params.schema.yaml")
    run = next(r for r in plan_runs(params) if r.config["model"] == MODEL and r.config["method"] == METHOD)
    targets = [f"results/evaluations/{run.run_id}/{e}.parquet" for e in run.evaluations]
    run_command(_snakemake("--config", "preset=ci", "--", *targets), project)
    return project, run.run_id, targets


def _records(project, run_id, targets):
    return ((project / f"results/runs/{run_id}/epochs.csv").read_text(),
            [pd.read_parquet(project / t) for t in targets])


def _change_shell_text(project):
    train = project / "workflow/rules/train.smk"
    text = train.read_text()
    assert '"study train ' in text
    train.write_text(text.replace('"study train ', '"study  train ', 1))


def _kill_after_last_checkpoint(project, run_id):
    # what a job killed between its last epoch's checkpoint and model.pt leaves (then Snakemake
    # removes the declared files that are there before it reruns the job); the evaluation had not run
    for name in ("model.pt", "meta.json"):
        (project / f"results/runs/{run_id}/{name}").unlink()
    for record in (project / f"results/evaluations/{run_id}").glob("*.parquet"):
        record.unlink()


def _rewrite_input(project, run_id):
    # the prepared data written again with the same tensors (and one more key, so that its bytes
    # differ: Snakemake compares a small input's checksum, and a mere touch is no change to it)
    import torch

    path = project / "data/prepared/synthetic-default.pt"
    payload = torch.load(path, weights_only=True)
    torch.save({**payload, "rewritten": True}, path)


TRIGGERS = {
    "speed.compile": (lambda p, r: None, ["--config", "preset=ci", "speed={compile: default}"]),
    "shell-text": (lambda p, r: _change_shell_text(p), ["--config", "preset=ci"]),
    "forcerun": (lambda p, r: None, ["--forcerun", "train", "--config", "preset=ci"]),
    "rewritten-input": (_rewrite_input, ["--config", "preset=ci"]),
    "killed-last-epoch": (_kill_after_last_checkpoint, ["--config", "preset=ci"]),
}


@pytest.mark.parametrize("trigger", list(TRIGGERS))
def test_a_rerun_of_a_finished_run_keeps_it(tmp_path, finished, trigger):
    original, run_id, targets = finished
    project = tmp_path / "project"
    shutil.copytree(original, project, symlinks=True)
    change, options = TRIGGERS[trigger]
    change(project, run_id)
    out = run_command(_snakemake(*options, "--", *targets), project)
    assert f"run_id={run_id}" in out and "Finished jobid" in out, "the train job ran again"
    log = (project / f"results/logs/train/{run_id}.log").read_text()
    assert f"{run_id}: checkpoint.pt holds the finished run (epoch 2/2); no epoch trained" in log
    assert "Failed jobs: none." in out
    epochs, records = _records(project, run_id, targets)
    was_epochs, was_records = _records(original, run_id, targets)
    assert epochs == was_epochs
    for frame, was in zip(records, was_records, strict=True):
        pd.testing.assert_frame_equal(frame, was)
    # and the same command again: nothing to do, nothing lost
    again = run_command(_snakemake(*options[options.index("--config"):], "--", *targets), project)
    assert "Nothing to be done" in again or trigger == "forcerun"
