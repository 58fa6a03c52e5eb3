"""Faults that gave a traceback or minutes of CPU, each now one line naming the value or file and
what is valid, with nothing left behind (docs/reliability.md, "Zoo weights, YAML and other
faults"): a YAML alias bomb in a preset, `eps: 8/0`, a record rewritten without the study's
metadata, a model file copied over checkpoint.pt, a synthetic set larger than memory, Ctrl-C."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from study.cli import main
from study.config.spec import ConfigSpec

ROOT = Path(__file__).resolve().parents[2]
PRESETS, SCHEMA = ROOT / "workflow/presets", ROOT / "workflow/schemas/params.schema.yaml"


def fails(capsys, argv, *named) -> str:
    """`study ARGV` in-process: exit 2, one line on stderr (the last), naming each of `named`."""
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2 and "Traceback" not in err, err
    errors = [line for line in lines if re.match(r"study(?: [\w-]+)?: error: ", line)]
    assert len(errors) == 1 and errors[0] == lines[-1], err
    for text in named:
        assert str(text) in errors[0], (text, errors[0])
    return errors[0]


def _plan_argv(presets: Path) -> list:
    return ["plan", "--params", ROOT / "params.yaml", "--preset", "ci", "--presets-dir", presets, "--schema", SCHEMA]


def _alias_bomb(levels: int = 9) -> str:
    """Each level a list of nine aliases of the one before: 9**levels values, about 1 KB of YAML."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    return "\n".join(lines)


def test_an_alias_bomb_in_a_preset_grid_is_refused_in_under_a_second(tmp_path, capsys):
    presets = tmp_path / "presets"
    shutil.copytree(PRESETS, presets)
    original = (presets / "ci.yaml").read_text()
    bomb = _alias_bomb()
    assert len(bomb) < 1200
    # the bomb's anchors in a key of their own, its top level as the optimization group's grid
    text = original.replace("    grid:\n      optimizer: [{name: sgd, lr: 0.05}, {name: adam, lr: 0.001}]",
                            "    grid:\n      optimizer: *a9")
    assert text != original
    (presets / "ci.yaml").write_text("x_bomb:\n" + "\n".join("  " + line for line in bomb.splitlines()) + "\n" + text)
    start = time.perf_counter()
    fails(capsys, _plan_argv(presets), f"{presets / 'ci.yaml'}: its aliases expand it to more than 200,000 values",
          "an alias bomb?")
    assert time.perf_counter() - start < 1.0
    (presets / "ci.yaml").write_text(original)
    main([str(a) for a in _plan_argv(presets)])
    assert capsys.readouterr().out.startswith("preset ci: ")


def test_a_fraction_dividing_by_zero_names_its_key(tmp_path, capsys):
    presets = tmp_path / "presets"
    shutil.copytree(PRESETS, presets)
    preset = yaml.safe_load((presets / "ci.yaml").read_text())
    preset["evaluations"]["pgd3"]["eps"] = "8/0"
    (presets / "ci.yaml").write_text(yaml.safe_dump(preset))
    fails(capsys, _plan_argv(presets), "evaluations.pgd3.eps: '8/0' is not valid; expected a number >= 0")


@pytest.fixture(scope="module")
def record(tiny_trained_run, synthetic_file, tmp_path_factory):
    """A real record of `study evaluate` (clean, one image per class)."""
    out = tmp_path_factory.mktemp("records") / "clean.parquet"
    assert main(["evaluate", "--data", str(synthetic_file), "--run-dir", str(tiny_trained_run), "--evaluation",
                 json.dumps({"name": "clean", "type": "clean", "test_per_class": 1}), "--out", str(out),
                 "--device", "cpu", "--no-progress", "--threads", "1"]) == 0
    return out


@pytest.fixture(scope="module")
def tiny_trained_run(tmp_path_factory, ci_params, synthetic_splits):
    from study.config import plan_runs
    from study.train.engine import train_run

    cfg = next(r for r in plan_runs(ci_params) if r.config["method"] == "standard"
               and r.config["model"] == "small_cnn").config
    cfg = {**cfg, "epochs": 1, "train_per_class": 8, "epoch_eval": {**cfg["epoch_eval"], "per_class": 2}}
    run_dir = tmp_path_factory.mktemp("tiny") / ConfigSpec.parse(cfg).run_id  # evaluated: named by its run id
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train_run(cfg, synthetic_splits, run_dir, device="cpu", progress=False)
    finally:
        torch.set_num_threads(threads)
    return run_dir


def test_a_record_saved_again_without_the_study_metadata_is_named(record, tmp_path, capsys):
    resaved = tmp_path / "clean.parquet"
    pd.read_parquet(record).to_parquet(resaved)  # what a user's pandas round trip does: the metadata is gone
    argv = ["tables", "--records", resaved, "--out-dir", tmp_path / "tables"]
    fails(capsys, argv, resaved, "lacks the study's record metadata (run_id, evaluation, class_names",
          "make it again with `study evaluate`")
    assert not (tmp_path / "tables").exists() or not any((tmp_path / "tables").iterdir())
    assert main([str(a) for a in ["tables", "--records", record, "--out-dir", tmp_path / "tables"]]) == 0


def test_a_model_file_copied_over_checkpoint_pt_is_named(tiny_trained_run, synthetic_file, tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_trained_run, run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    shutil.copy(run_dir / "model.pt", run_dir / "checkpoint.pt")
    argv = ["train", "--data", synthetic_file, "--run-dir", run_dir, "--run-config", json.dumps(config),
            "--device", "cpu", "--threads", "1", "--no-progress"]
    fails(capsys, argv, f"{run_dir / 'checkpoint.pt'} is not a training checkpoint: it lacks model, optimizer",
          "a model.pt copied over it?", "put the run's own checkpoint.pt back")
    shutil.copy(tiny_trained_run / "checkpoint.pt", run_dir / "checkpoint.pt")
    assert main([str(a) for a in argv]) == 0


def test_a_synthetic_set_larger_than_memory_is_refused_before_allocating(tmp_path, capsys, ci_params):
    out = tmp_path / "s.pt"
    huge = {**ci_params.data.synthetic.model_dump(exclude_unset=True), "train_per_class": 10**9}
    argv = ["prepare", "--dataset", "synthetic", "--variant", "default", "--out", out, "--synthetic"]
    start = time.perf_counter()
    fails(capsys, [*argv, json.dumps(huge)], "synthetic data train_per_class=1,000,000,000: generating it needs about",
          "GiB of memory; valid here: train_per_class <= ")
    assert time.perf_counter() - start < 5 and not out.exists()
    assert main([str(a) for a in [*argv, json.dumps({**huge, "train_per_class": 2, "test_per_class": 1})]]) == 0


def test_ctrl_c_of_a_study_command_is_one_line_and_status_130(tmp_path):
    """SIGINT to the process group of a running `study train`, as a terminal's Ctrl-C sends it."""
    from study.config import load_params, plan_runs
    from study.data.prepared import prepare_dataset

    params = load_params(ROOT / "params.yaml", {"preset": "ci"}, PRESETS, SCHEMA)
    data = tmp_path / "s.pt"
    prepare_dataset("synthetic", "default", tmp_path / "raw", None, data,
                    synthetic={**params.data.synthetic.model_dump(exclude_unset=True), "train_per_class": 200})
    cfg = next(r for r in plan_runs(params) if r.config["model"] == "small_cnn").config
    proc = subprocess.Popen([sys.executable, "-m", "study.cli", "train", "--data", str(data), "--run-dir",
                             str(tmp_path / "run"), "--run-config", json.dumps({**cfg, "epochs": 50}),
                             "--device", "cpu", "--threads", "1"], stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    for line in proc.stderr:
        if line.startswith("training "):
            break
    os.killpg(proc.pid, signal.SIGINT)
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 130
    assert "Traceback" not in rest and rest.strip().splitlines()[-1] == "study train: interrupted", rest
