"""A configuration a job would fail on is refused where the plan is made, by every front end, in
seconds and one line (issue 49, item 4): before, a compared method without `differs_in` passed
`study plan`, `study preflight` and the DAG, trained and evaluated for 21 minutes on the ci preset
and failed in the last job (the reproduction report); and the paper plan's `trades_cfa_published`,
whose FAWA reads a validation split its groups did not hold, failed at its train job's setup.

The bad value is set with the command line's own override (`--config-overrides`, the values the
workflow hands on from Snakemake's `--config`), on the params.yaml and presets of the checkout."""

import subprocess
import time

import pytest
from helpers.commands import run_study
from helpers.workflow import BIN, command_env, copy_project

#: what the refusal must name: the bad value's place, and what is valid
NO_DIFFERS_IN = ("method 'cw_critical' is compared with 'at' in experiment group 'mitigation' but declares no "
                 "`differs_in`", "(heads: targets, epsilon, loss, weights, averaging, regularizer, adversary, "
                 "init_from, validation_attack, train)")
NO_SPLIT = ("experiment group 'published_dafa', method 'trades_cfa_published': run config: validation: null",
            "averaging type 'fawa' (FAWA's threshold)", "set train.validation (e.g. {fraction: 0.02})")
#: "within seconds": a refusal reads the params and plans, nothing else (about one second here)
SECONDS = 20


def _refused(command: str, preset: str, overrides: str, repo_root) -> str:
    t0 = time.perf_counter()
    proc = run_study(command, "--preset", preset, "--config-overrides", overrides, cwd=repo_root, check=False)
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"study {command}: error: "), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert elapsed < SECONDS, f"study {command} took {elapsed:.1f} s to refuse"
    return lines[0]


@pytest.mark.parametrize("preset", ["paper", "ci"])
def test_study_plan_refuses_a_compared_method_without_differs_in(repo_root, preset):
    line = _refused("plan", preset, '{"methods.cw_critical.differs_in": null}', repo_root)
    assert all(part in line for part in NO_DIFFERS_IN), line
    assert f"presets/{preset}.yaml + command-line overrides: " in line


def test_study_plan_and_preflight_refuse_the_paper_plan_whose_cfa_holds_out_no_split(repo_root):
    # the paper plan as it was before CFA's split (issue 49, item 5): trades_cfa_published without its train
    for command in ("plan", "preflight"):
        line = _refused(command, "paper", '{"methods.trades_cfa_published.train": null}', repo_root)
        assert all(part in line for part in NO_SPLIT), line
    # and as committed, it plans
    assert run_study("plan", "--preset", "paper", cwd=repo_root).stdout.startswith("preset paper: ")


def test_the_dag_refuses_a_compared_method_without_differs_in(tmp_path):
    """Snakemake (and so `dvc repro`, whose stages run it) plans with the same library: a dry run
    stops before any job, naming the method."""
    project = copy_project(tmp_path)
    t0 = time.perf_counter()
    proc = subprocess.run([BIN / "snakemake", "-n", "--cores", "1", "--config", "preset=ci",
                           "methods={cw_critical: {differs_in: null}}", "--", "all"], cwd=project,
                          env=command_env(), capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - t0
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert "WorkflowError" in output and all(part in output for part in NO_DIFFERS_IN), output[-3000:]
    assert "Traceback" not in output and "Job stats" not in output
    assert elapsed < SECONDS, f"the dry run took {elapsed:.1f} s to refuse"
