"""Each preset its own results (docs/reliability.md, "Each preset its own results"): the files
that summarize a preset lie under results/<preset>/, the runs stay shared, and the user's
`results/figures/all` and `results/reproduction.md` are the selected preset's. Dry runs only;
the real runs of two presets in one checkout: tests/pipeline/test_ci_pipeline.py."""

import shutil
import subprocess

import pytest
from helpers.workflow import BIN, command_env, copy_project, dag_outputs, plan_preset, project_dry_run, train_count

SHARED = ("results/runs/", "results/evaluations/", "results/logs/", "results/benchmarks/", "results/zoo/")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return copy_project(tmp_path_factory.mktemp("presets"))


@pytest.mark.parametrize("preset", ["ci", "demo"])
def test_a_presets_summary_files_are_its_own_and_the_users_targets_follow_it(project, preset):
    dag = project_dry_run(["--cores", "2", "--config", f"preset={preset}", "--",
                           "results/figures/all", "results/reproduction.md"], project)
    _, runs, _ = plan_preset(project, preset)
    assert train_count(dag.counts) == len(runs)
    (figures,) = dag.of("selected_figures")
    (reproduction,) = dag.of("selected_reproduction")
    assert figures.input == (f"results/{preset}/figures/all",) and figures.output == ("results/figures/all",)
    assert reproduction.input == (f"results/{preset}/reproduction.md",)
    summaries = {f for f in dag_outputs(dag) if f.startswith("results/") and not f.startswith(SHARED)}
    assert summaries - {"results/figures/all", "results/reproduction.md"} and all(
        f.startswith(f"results/{preset}/") for f in summaries - {"results/figures/all", "results/reproduction.md"})


def test_a_preset_named_as_a_shared_folder_is_refused_in_one_line(project):
    shutil.copy(project / "workflow/presets/ci.yaml", project / "workflow/presets/runs.yaml")
    try:
        proc = subprocess.run([BIN / "snakemake", "-n", "--cores", "1", "--config", "preset=runs", "--",
                               "results/figures/all"], cwd=project, env=command_env(), capture_output=True, text=True)
    finally:
        (project / "workflow/presets/runs.yaml").unlink()
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert ("preset 'runs' cannot have a results folder of its own (results/runs is shared by every preset): "
            "rename workflow/presets/runs.yaml") in out, out[-2000:]
    assert not (project / "results/runs").exists()
