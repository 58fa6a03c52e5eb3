"""A result is its run's, or refused (docs/reliability.md, "A result and the run that made it"):
another run's config.json and model.pt copied into a run folder (the tester's case of issue 40),
and a record written under a run id its config does not name, are refused in one line by every
command that writes under a run id, and nothing is written; with the run's own files back the
same commands succeed."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

import pytest

from study.cli import main
from study.config import plan_runs, resolve_evaluation
from study.config.spec import ConfigSpec

CLEAN = json.dumps({"name": "clean", "type": "clean"})


def _config(ci_params, model: str) -> dict:
    cfg = next(r for r in plan_runs(ci_params) if r.config["method"] == "standard"
               and r.config["model"] == model).config
    return copy.deepcopy({**cfg, "epochs": 1, "train_per_class": 8,
                          "epoch_eval": {**cfg["epoch_eval"], "per_class": 2}})


def _error(capsys, argv: list) -> str:
    """`study ARGV` in-process: exit 2 and exactly one stderr line, the error, returned."""
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    lines = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and re.match(r"study [\w-]+: error: ", lines[0]), lines
    return lines[0]


def _ok(capsys, argv: list) -> None:
    capsys.readouterr()
    assert main([str(a) for a in argv]) == 0, capsys.readouterr().err


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, ci_params, synthetic_splits):
    """A small_cnn run and a lenet run, each in the folder of its run id, the first evaluated."""
    import torch

    from study.evaluate.checkpoint_eval import evaluate_checkpoint
    from study.train.engine import train_run

    root = tmp_path_factory.mktemp("ownership")
    threads = torch.get_num_threads()
    dirs = {}
    try:
        for model in ("small_cnn", "lenet"):
            cfg = _config(ci_params, model)
            dirs[model] = root / "runs" / ConfigSpec.parse(cfg).run_id
            train_run(cfg, synthetic_splits, dirs[model], device="cpu", progress=False)
        own = dirs["small_cnn"]
        record = root / "evaluations" / own.name / "clean.parquet"
        evaluate_checkpoint(own, synthetic_splits, [(_clean(), record)],
                            device="cpu", progress=False)
    finally:
        torch.set_num_threads(threads)
    return root, dirs["small_cnn"], dirs["lenet"], record


def _settings(ci_params) -> dict:
    """The settings of the ci preset's D_rand construction, as its job is given them."""
    from study.config import constructions

    return next(c for c in constructions(ci_params, plan_runs(ci_params)) if c.kind == "d_rand").settings


def _clean():
    from study.config.spec import EvaluationSpec

    return EvaluationSpec.parse({"name": "clean", "type": "clean"})


def test_another_runs_config_and_model_are_refused_by_every_command(tmp_path, capsys, two_runs, synthetic_file,
                                                                    ci_params):
    root, own_src, other, record = two_runs
    own = tmp_path / "runs" / own_src.name
    shutil.copytree(own_src, own)
    for name in ("config.json", "model.pt"):
        shutil.copy(other / name, own / name)
    out = tmp_path / "out"
    common = ["--data", synthetic_file, "--run-dir", own, "--device", "cpu", "--no-progress"]
    pgd = json.dumps(resolve_evaluation(ci_params, "pgd3"))
    commands = {
        "evaluate": ["evaluate", *common, "--evaluation", CLEAN, "--out", out / "clean.parquet"],
        "shard": ["evaluate", *common, "--evaluation", CLEAN, "--out", out / "0-of-2.parquet", "--shard", "0/2"],
        "check": ["check", *common, "--records", record, "--pgd", pgd, "--per-class", "1", "--eps-factors", "1",
                  "--strong-steps", "1", "--strong-restarts", "1", "--out", out / "checks.json",
                  "--table", out / "checks.csv"],
        "corruptions": ["corruptions", *common, "--corruptions", "contrast", "--severities", "2", "--per-class", "1",
                        "--source", "regenerated", "--out", out / "corruptions.parquet"],
        "construct": ["construct", "--kind", "d_rand", "--data", synthetic_file, "--source-run", own,
                      "--settings", json.dumps(_settings(ci_params)), "--key", "k",
                      "--work-dir", out / "chunks", "--out", out / "d_rand.pt", "--device", "cpu", "--no-progress"],
        "tables": ["tables", "--records", record, "--epochs", own / "epochs.csv", "--out-dir", out / "tables"],
    }
    for what, argv in commands.items():
        message = _error(capsys, argv)
        # names the file, the run id it holds, the one expected, and what to do
        assert f"{own / 'config.json'} holds the config of run {other.name}" in message, (what, message)
        assert f"the folder is run {own.name}" in message and "put the run's own config.json" in message, message
        assert not out.exists(), what  # nothing written
    for name in ("config.json", "model.pt"):
        shutil.copy(own_src / name, own / name)
    for what in ("evaluate", "tables"):
        _ok(capsys, commands[what])


def test_model_file_of_another_run_is_refused_by_its_key(tmp_path, capsys, two_runs, synthetic_file):
    _, own_src, other, _ = two_runs
    own = tmp_path / own_src.name
    shutil.copytree(own_src, own)
    shutil.copy(other / "model.pt", own / "model.pt")
    argv = ["corruptions", "--data", synthetic_file, "--run-dir", own, "--corruptions", "contrast", "--severities",
            "2", "--per-class", "1", "--source", "regenerated", "--device", "cpu", "--no-progress",
            "--out", tmp_path / "c.parquet"]
    message = _error(capsys, argv)
    other_key, own_key = other.name.rsplit("-", 1)[1], own.name.rsplit("-", 1)[1]
    assert f"{own / 'model.pt'} holds the model of run key {other_key}" in message
    assert f"are run {own.name} (key {own_key})" in message
    assert not (tmp_path / "c.parquet").exists()


def test_a_record_under_another_runs_id_is_refused_by_the_tables(tmp_path, capsys, two_runs, synthetic_splits):
    """The tester's table: records that an evaluation wrote under the small_cnn run's id with
    the lenet's config (as evaluate did before it checked the folder) are refused, not listed."""
    from study.evaluate.checkpoint_eval import evaluate_checkpoint

    _, own_src, other, record = two_runs
    own = tmp_path / "runs" / own_src.name
    shutil.copytree(own_src, own)
    for name in ("config.json", "model.pt"):
        shutil.copy(other / name, own / name)
    wrong = tmp_path / "evaluations" / own.name / "clean.parquet"
    evaluate_checkpoint(own, synthetic_splits, [(_clean(), wrong)], device="cpu", progress=False)  # the library
    out = tmp_path / "tables"
    message = _error(capsys, ["tables", "--records", wrong, "--out-dir", out])
    assert message.endswith(f"{wrong} holds records under run id {own.name} made with the config of run "
                            f"{other.name}: evaluate the run again (`study evaluate`) and remove this record "
                            "(STUDY_TRACEBACK=1 shows the traceback)"), message
    moved = tmp_path / "evaluations" / other.name / "clean.parquet"  # a good record in another run's folder
    moved.parent.mkdir(parents=True)
    shutil.copy(record, moved)
    message = _error(capsys, ["robustness-tables", "--records", moved, "--out-dir", out])
    assert f"{moved} holds records of run {own_src.name}, but lies in the evaluations folder of run {other.name}" \
        in message
    assert not out.exists()
    _ok(capsys, ["tables", "--records", record, "--out-dir", out])


def test_check_refuses_records_of_another_run(tmp_path, capsys, two_runs, synthetic_file, ci_params):
    from study.data.prepared import load_prepared
    from study.evaluate.checkpoint_eval import evaluate_checkpoint

    _, own, other, _ = two_runs
    theirs = tmp_path / "evaluations" / other.name / "clean.parquet"
    evaluate_checkpoint(other, load_prepared(synthetic_file), [(_clean(), theirs)], device="cpu", progress=False)
    argv = ["check", "--data", synthetic_file, "--run-dir", own, "--records", theirs, "--pgd",
            json.dumps(resolve_evaluation(ci_params, "pgd3")), "--out", tmp_path / "checks.json",
            "--table", tmp_path / "checks.csv", "--device", "cpu", "--no-progress"]
    message = _error(capsys, argv)
    assert f"{theirs} holds records of run {other.name}, not of run {own.name}" in message
    assert not (tmp_path / "checks.json").exists()


def test_construction_chunks_follow_the_source_model(tmp_path, two_runs, synthetic_splits, ci_params, monkeypatch):
    """A construction rerun with the same source model reuses its chunks; with the source model
    trained again (same run id, other weights) it makes every chunk again, and another set."""
    import torch

    import study.features.build as build
    from study.io import atomic_torch_save, load_torch

    _, own_src, _, _ = two_runs
    source = tmp_path / own_src.name
    shutil.copytree(own_src, source)
    settings = _settings(ci_params)
    made = []
    chunk = build.construct_chunk
    monkeypatch.setattr(build, "construct_chunk", lambda *a, **k: made.append(1) or chunk(*a, **k))

    def construct(out: Path):
        built = build.construct_from_run("d_rand", source, synthetic_splits, out, tmp_path / "chunks", settings, "k",
                                         device="cpu", progress=False)
        return built.train_x, len(made)

    first, n_chunks = construct(tmp_path / "a.pt")
    assert n_chunks >= 2
    again, total = construct(tmp_path / "b.pt")
    assert total == n_chunks and torch.equal(first, again)  # reused, nothing made
    blob = load_torch(source / "model.pt")  # the same run trained again: other weights, same run key
    blob["state_dict"] = {k: v * 1.5 if v.is_floating_point() and k.endswith("weight") else v
                          for k, v in blob["state_dict"].items()}
    atomic_torch_save(blob, source / "model.pt")
    new, total = construct(tmp_path / "c.pt")
    assert total == 2 * n_chunks and not torch.equal(first, new)
