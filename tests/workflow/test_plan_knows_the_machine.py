"""A plan that knows the machine and the network (docs/reliability.md): a plan priced over a
week on this machine is refused in one line before any job; a dataset whose host does not
answer is left out of the plan in seconds, and a plan left with nothing stops at once; the
jobs find `study` when Snakemake is started as .venv/bin/snakemake without the environment on
PATH; the run summary groups what is not made by cause."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.workflow import BIN, ROOT, command_env, copy_project

from study.config import Params, load_params, plan_runs
from study.config.zoo import plan_zoo
from study.preflight import CONFIRM_KEY, NOT_PLACED, OFFLINE, PRICE_LIMIT_HOURS, Item, price_refusal


def _params(preset: str, **overrides) -> Params:
    return load_params(ROOT / "params.yaml", {"preset": preset, **overrides}, presets_dir=ROOT / "workflow/presets",
                       schema_path=ROOT / "workflow/schemas/params.schema.yaml")


def _closed_port() -> int:
    with socket.socket() as sock:  # bound, then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _snakemake(project: Path, *args: str, env: dict | None = None, timeout: int = 300):
    return subprocess.run([BIN / "snakemake", *args], cwd=project, env=env or command_env(), capture_output=True,
                          text=True, timeout=timeout)


def test_the_paper_preset_is_refused_on_this_machine_in_one_line(tmp_path):
    project = copy_project(tmp_path)
    t0 = time.perf_counter()
    proc = _snakemake(project, "--cores", "8", "results/figures/all")
    assert proc.returncode == 1
    assert time.perf_counter() - t0 < 60
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("refused: preset paper would keep this machine (") and "days by its estimated price" in line
    for way_out in ("--config preset=demo:", "on one H100", "--profile workflow/profiles/slurm",
                    f"--config {CONFIRM_KEY}=true"):
        assert way_out in line, line
    assert not (project / "results").exists() and not (project / "data").exists()  # no job started


def test_ci_and_demo_fit_the_limit_and_the_key_confirms_the_paper_preset():
    for preset in ("ci", "demo"):
        params = _params(preset)
        assert price_refusal(params, plan_runs(params), plan_zoo(params), ROOT) is None, preset
    paper = _params("paper")
    runs, zoo = plan_runs(paper), plan_zoo(paper)
    assert f"{PRICE_LIMIT_HOURS / 24:.0f}-day limit" in price_refusal(paper, runs, zoo, ROOT)
    confirmed = _params("paper", **{CONFIRM_KEY: True})  # the documented --config key loads
    assert confirmed.confirm_price is True and price_refusal(confirmed, runs, zoo, ROOT) is None


def test_an_unreachable_data_host_leaves_the_plan_empty_and_stops_in_seconds(tmp_path):
    project = copy_project(tmp_path)
    env = {**command_env(), "STUDY_DATA_URL_BASE": f"http://127.0.0.1:{_closed_port()}"}
    for _ in range(2):  # the second reads the answers the first kept in .snakemake/
        t0 = time.perf_counter()
        proc = _snakemake(project, "--cores", "2", "--config", "preset=demo", "--", "results/figures/all", env=env)
        assert proc.returncode == 1 and time.perf_counter() - t0 < 30, proc.stderr
        left = [line for line in proc.stderr.splitlines() if line.startswith("left out of the plan (offline): dataset")]
        assert len(left) == 2 and all("connection refused" in line and "STUDY_DATA_MIRROR" in line for line in left)
        assert proc.stderr.strip().endswith("supply what it names and run the same command again")
        assert "Building DAG" not in proc.stderr and not (project / "data" / "raw").exists()
    assert "connection refused" in (project / ".snakemake/study-hosts.json").read_text()


def test_snakemake_from_the_venv_finds_study_without_the_environment_on_path(tmp_path):
    project = copy_project(tmp_path)
    env = {**command_env(), "PATH": "/usr/bin:/bin"}  # no .venv/bin: the rules' `study` is found beside sys.executable
    proc = _snakemake(project, "--cores", "1", "--config", "preset=ci", "--", "data_all", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list((project / "data/prepared").glob("synthetic*.pt"))


def _run_summary():
    spec = importlib.util.spec_from_file_location("run_summary", ROOT / "workflow/rules/run_summary.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("run_summary", module)
    spec.loader.exec_module(module)
    return module


def test_the_run_summary_groups_what_is_not_made_by_cause(tmp_path):
    rs = _run_summary()
    parts = [Item("dataset mnist (official)", "left out", "2 runs", "put the archives in data/raw/", OFFLINE),
             Item("zoo weights, 3 models", "left out", "a, b, c", "copy the files", OFFLINE, 3),
             Item("ImageNet validation set", "left out", "2 zoo models", "put the ILSVRC2012 archives in place",
                  NOT_PLACED)]
    long_error = "study prepare: error: cifar10.tar.gz is not available; download: " + "x" * 900
    failed = [rs.FailedJob("prepare", ("data/prepared/cifar10.pt",), ("logs/p.log",), long_error),
              rs.FailedJob("train", ("results/runs/a/model.pt",) * 30, ("logs/a.log",), "interrupted", True),
              rs.FailedJob("train", ("results/runs/b/model.pt",), (), "study train: error: NaN loss"),
              rs.FailedJob("train", ("results/runs/c/model.pt",), (), "study train: error: NaN loss")]
    text = rs.summary({}, [], ["left out of the plan (offline): dataset mnist"], failed, "demo", ok=False, parts=parts)
    causes = text.split("Why, by cause (details below):\n")[1].split("\n\n")[0].splitlines()
    assert causes == [
        "- offline: 2 datasets, 3 weight files (2 left out of the plan, 1 download failed): set STUDY_DATA_MIRROR / "
        "STUDY_WEIGHTS_DIR to folders holding the files (docs/usage.md)",
        "- not placed: the ImageNet validation set: put the ILSVRC2012 archives in place",
        "- interrupted: 1 job: run the same command again (finished jobs are kept, these start over)",
        "- error in rule train: 2 jobs: the error line of each below; fix it and run the same command again",
    ]
    assert max(map(len, text.splitlines())) < 300
    assert "- train (results/runs/a/model.pt +29 more): interrupted [log: logs/a.log]" in text


@pytest.fixture(autouse=True)
def _no_data_variables(monkeypatch):
    for var in ("STUDY_DATA_MIRROR", "STUDY_DATA_URL_BASE", "STUDY_WEIGHTS_DIR", "STUDY_WEIGHTS_URL_BASE"):
        monkeypatch.delenv(var, raising=False)
    assert "STUDY_DATA_URL_BASE" not in os.environ
