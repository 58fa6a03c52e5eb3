"""`study rename-runs` (study.rename) on a results folder of one real tiny run and its record:
a folder of today's ids is left alone, a folder named by an older identity (the hash of the
config as written, an integer where a float belongs) is renamed with every file that names it,
a second call renames nothing, and a target that exists already is refused in one line."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from study.cli import main
from study.config import ConfigSpec, EvaluationSpec, resolve_evaluation
from study.evaluate.checkpoint_eval import evaluate_checkpoint
from study.evaluate.records import check_record_owner, read_records, record_meta, replace_record_metadata
from study.io import load_torch
from study.rename import written_key
from study.run_directory import load_trained_model, owned_run
from study.train.engine import train_run


@pytest.fixture(scope="module")
def trained(tmp_path_factory, ci_params, synthetic_file):
    """A one-epoch run with its pgd3 record, written by today's code: (results folder, spec)."""
    from study.config import plan_runs
    from study.data.prepared import load_prepared

    splits = load_prepared(synthetic_file)
    run = next(r for r in plan_runs(ci_params) if r.config["method"] == "pgd_at")
    # gamma 1 written as an integer: the typed value holds 1.0, so the old and new keys differ
    cfg = {**run.config, "epochs": 1, "train_per_class": 6, "epoch_eval": {**run.config["epoch_eval"], "per_class": 2},
           "schedule": {**run.config["schedule"], "gamma": 1}}
    spec = ConfigSpec.parse(cfg)
    results = tmp_path_factory.mktemp("trained") / "results"
    run_dir = results / "runs" / spec.run_id
    train_run(cfg, splits, run_dir, device="cpu", progress=False)
    pgd = EvaluationSpec.parse({**resolve_evaluation(ci_params, "pgd3", dataset="synthetic"), "test_per_class": 2})
    record = results / "evaluations" / spec.run_id / "pgd3.parquet"
    record.parent.mkdir(parents=True)
    evaluate_checkpoint(run_dir, splits, [(pgd, record)], device="cpu", progress=False)
    (results / "logs" / "train").mkdir(parents=True)
    (results / "logs" / "train" / f"{spec.run_id}.log").write_text("trained\n")
    return results, spec, cfg


def _as_written_by_the_old_identity(results, spec, cfg) -> str:
    """The folder as the study wrote it before: config.json as written, its hash the key of the
    model files, the record and the folder names; returns the old run id."""
    old_key = written_key(cfg)
    old_id = spec.run_id.removesuffix(spec.key) + old_key
    run_dir = results / "runs" / spec.run_id
    (run_dir / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    for path in run_dir.glob("*.pt"):
        blob = load_torch(path)
        blob["run_key"] = old_key
        torch.save(blob, path)
    record = results / "evaluations" / spec.run_id / "pgd3.parquet"
    replace_record_metadata(record, {**record_meta(record), "run_id": old_id, "run_config": cfg})
    for root in ("runs", "evaluations"):
        (results / root / spec.run_id).rename(results / root / old_id)
    (results / "logs/train" / f"{spec.run_id}.log").rename(results / "logs/train" / f"{old_id}.log")
    return old_id


def _copy_of(trained, tmp_path) -> Path:
    """A copy of the trained run's results folder, to change and rename."""
    results = tmp_path / "results"
    shutil.copytree(trained[0], results)
    return results


def _old_copy(trained, tmp_path) -> tuple[Path, str]:
    """A copy as the old identity wrote it: (results folder, the old run id)."""
    results = _copy_of(trained, tmp_path)
    _, spec, cfg = trained
    return results, _as_written_by_the_old_identity(results, spec, cfg)


def _rename(results, capsys, *extra) -> tuple[int, str]:
    code = main(["rename-runs", "--results", str(results), "--data", str(results.parent / "data"), *extra])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_an_unchanged_folder_has_nothing_to_rename(trained, tmp_path, capsys):
    results = _copy_of(trained, tmp_path)
    assert _rename(results, capsys) == (0, f"nothing to rename: every run under {results / 'runs'} carries its "
                                           "id already\n")


def test_a_folder_of_the_old_identity_is_renamed_with_every_file_naming_it(trained, tmp_path, capsys):
    _, spec, cfg = trained
    results, old_id = _old_copy(trained, tmp_path)
    assert old_id != spec.run_id
    weights = load_torch(results / "runs" / old_id / "model.pt")["state_dict"]
    frame_before = read_records(results / "evaluations" / old_id / "pgd3.parquet")[0]
    # Snakemake orders jobs by modification times: a rewritten file keeps its own
    times = {p.name: p.stat().st_mtime_ns for p in (results / "runs" / old_id).iterdir()}

    code, out = _rename(results, capsys, "--dry-run")
    assert (code, out) == (0, f"{old_id} -> {spec.run_id}\ndry run: nothing changed\n")
    assert (results / "runs" / old_id).is_dir()

    code, out = _rename(results, capsys)
    assert (code, out.splitlines()) == (0, [f"{old_id} -> {spec.run_id}",
                                            "renamed 1 runs and 0 constructed datasets; 0 other config.json files "
                                            "written canonically"])
    run_dir = results / "runs" / spec.run_id
    assert not (results / "runs" / old_id).exists() and (run_dir / "config.json").read_text() == spec.json
    assert owned_run(run_dir, "last").key == spec.key
    assert {p.name: p.stat().st_mtime_ns for p in run_dir.iterdir()} == times
    assert {load_torch(path)["run_key"] for path in run_dir.glob("*.pt")} == {spec.key}  # model.pt, checkpoint.pt
    model, _ = load_trained_model(run_dir)
    # nothing trained is lost: the same weights, the same records
    assert all(torch.equal(model.state_dict()[k], v) for k, v in weights.items())
    record = results / "evaluations" / spec.run_id / "pgd3.parquet"
    check_record_owner(record, run_id=spec.run_id)
    frame, meta = read_records(record)
    assert frame.equals(frame_before) and meta["run_config"] == spec.identity
    assert (results / "logs/train" / f"{spec.run_id}.log").read_text() == "trained\n"

    assert _rename(results, capsys)[1].startswith("nothing to rename")


def test_a_target_that_exists_is_refused_and_nothing_is_renamed(trained, tmp_path, capsys):
    results = _copy_of(trained, tmp_path)
    _, spec, _ = trained
    stale = spec.run_id.removesuffix(spec.key) + "0badc0de"
    shutil.copytree(results / "runs" / spec.run_id, results / "runs" / stale)
    (results / "runs" / spec.run_id / "epochs.csv").write_text("other\n")
    code, out = _rename(results, capsys)
    assert code == 2 and out == (f"study rename-runs: error: {results / 'runs' / spec.run_id} exists already with "
                                 "other content: move it aside (or remove it), then run `study rename-runs` again; "
                                 "nothing was renamed (STUDY_TRACEBACK=1 shows the traceback)\n")
    assert (results / "runs" / stale).is_dir()
    assert (results / "runs" / spec.run_id / "epochs.csv").read_text() == "other\n"
    # moved aside, the stale folder is renamed
    shutil.rmtree(results / "runs" / spec.run_id)
    assert _rename(results, capsys)[1].splitlines()[0] == f"{stale} -> {spec.run_id}"
    assert owned_run(results / "runs" / spec.run_id).key == spec.key


def test_a_missing_results_folder_is_one_line(tmp_path, capsys):
    code, out = _rename(tmp_path / "nope", capsys)
    assert code == 2 and out == (f"study rename-runs: error: {tmp_path / 'nope' / 'runs'} does not exist: --results "
                                 "names no results folder (the folder holding runs/ and evaluations/) "
                                 "(STUDY_TRACEBACK=1 shows the traceback)\n")


def test_a_constructed_dataset_of_a_renamed_source_run_is_renamed_with_it(trained, tmp_path, capsys):
    from study.config.spec import construction_key

    _, spec, cfg = trained
    results, old_id = _old_copy(trained, tmp_path)
    settings = {"steps": 2, "eps": 0.5}
    old_key = construction_key("d_r", {"robust": old_id}, settings)
    constructed = tmp_path / "data" / "constructed"
    constructed.mkdir(parents=True)
    torch.save({"meta": {"constructed": {"kind": "d_r", "key": old_key, "source_run": old_id, "settings": settings,
                                         "source_model_sha256": "old"}}}, constructed / f"d_r-{old_key}.pt")
    code, out = _rename(results, capsys)
    new_key = construction_key("d_r", {"robust": spec.run_id}, settings)
    assert code == 0 and f"d_r-{old_key} -> d_r-{new_key}" in out.splitlines()
    assert [p.name for p in constructed.iterdir()] == [f"d_r-{new_key}.pt"]
    meta = load_torch(constructed / f"d_r-{new_key}.pt")["meta"]["constructed"]
    from study.data.download import file_checksums

    model_sha = file_checksums(results / "runs" / spec.run_id / "model.pt", ["sha256"])["sha256"]
    assert (meta["key"], meta["source_run"], meta["source_model_sha256"]) == (new_key, spec.run_id, model_sha)
    assert _rename(results, capsys)[1].startswith("nothing to rename")


def test_a_config_json_that_is_no_json_is_one_line_and_nothing_is_renamed(trained, tmp_path, capsys):
    _, spec, cfg = trained
    results, old_id = _old_copy(trained, tmp_path)
    (results / "runs" / "broken").mkdir()
    (results / "runs" / "broken" / "config.json").write_text("{")
    code, out = _rename(results, capsys)
    assert code == 2 and out.startswith(f"study rename-runs: error: {results / 'runs/broken/config.json'} is not "
                                        "JSON (") and out.count("\n") == 1
    assert "put the run's own config.json back, or move the run folder out of the results folder" in out
    assert (results / "runs" / old_id).is_dir() and not (results / "runs" / spec.run_id).exists()


def test_a_run_trained_before_the_one_train_rule_gets_its_stand_ins_and_nothing_else(trained, tmp_path, capsys):
    """A folder of a version that wrote no stand-ins (its run keeps no best or published
    checkpoint): the call writes them, so Snakemake finds the train job's files complete, and
    leaves every other file as it was."""
    from study.checkpoints import CHECKPOINT_FILES
    from study.run_directory import STANDS_IN_FOR, kept_checkpoints

    results = _copy_of(trained, tmp_path)
    _, spec, _ = trained
    run_dir = results / "runs" / spec.run_id
    absent = [name for name in CHECKPOINT_FILES if name not in kept_checkpoints(spec.trained)]
    assert absent, "the run keeps every checkpoint: this test would show nothing"
    for name in absent:
        (run_dir / CHECKPOINT_FILES[name]).unlink()
    times = {p.name: p.stat().st_mtime_ns for p in run_dir.iterdir()}

    code, out = _rename(results, capsys, "--dry-run")
    assert (code, out.splitlines()) == (0, [f"{spec.run_id}: stand-ins for model.pt written ({', '.join(absent)}: "
                                            "the run keeps no such checkpoint)", "dry run: nothing changed"])
    assert not any((run_dir / CHECKPOINT_FILES[name]).exists() for name in absent)

    code, out = _rename(results, capsys)
    assert code == 0 and out.splitlines()[-1].endswith(f"; {len(absent)} stand-in files written")
    assert all(load_torch(run_dir / CHECKPOINT_FILES[name])[STANDS_IN_FOR] == "last" for name in absent)
    assert {p.name: p.stat().st_mtime_ns for p in run_dir.iterdir() if p.name in times} == times
    assert _rename(results, capsys)[1].startswith("nothing to rename")


def test_snakemakes_records_follow_the_renames(tmp_path):
    """A record of a renamed output is dropped (its parameters name the config as written before);
    a record that names a renamed run among its inputs is rewritten, so that Snakemake does not
    rerun that job because the set of its input files changed; other records are left alone."""
    from base64 import urlsafe_b64encode

    from study.rename import rewrite_snakemake_records

    old, new = "cifar10-lenet-standard-e2-s0-aaaaaaaa", "cifar10-lenet-standard-e2-s0-bbbbbbbb"
    metadata = tmp_path / ".snakemake" / "metadata"
    metadata.mkdir(parents=True)

    def record(output: str, inputs: list[str]) -> Path:
        path = metadata / urlsafe_b64encode(output.encode()).decode()
        path.write_text(json.dumps({"rule": "x", "input": str(inputs), "params": "[]"}))
        return path

    renamed = record(f"results/runs/{old}/model.pt", [])
    reader = record("results/ci/tables/classwise.csv", [f"results/evaluations/{old}/clean.parquet"])
    other = record("results/ci/tables/frl.csv", ["results/evaluations/other/clean.parquet"])
    before = other.read_text()
    assert rewrite_snakemake_records(metadata, {old: new}) == (1, 1)
    assert not renamed.exists()
    assert json.loads(reader.read_text())["input"] == str([f"results/evaluations/{new}/clean.parquet"])
    assert other.read_text() == before
    assert rewrite_snakemake_records(metadata, {old: new}) == (0, 0)
