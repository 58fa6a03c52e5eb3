"""The real Snakemake DAG and DVC stages, run on the `ci` preset in a copy of the project."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
WORKFLOW_FILES = ["Snakefile", "params.yaml", "dvc.yaml", "workflow", ".gitignore"]


def _env():
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("STUDY_DATA_MIRROR", None)
    return env


def _copy_project(dest: Path) -> Path:
    for name in WORKFLOW_FILES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name)
        else:
            shutil.copy2(src, dest / name)
    return dest


def _run(args, cwd, timeout=900):
    proc = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, args))} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout + proc.stderr


def _job_counts(output: str) -> dict[str, int]:
    table = output[output.index("Job stats:"):]
    counts = {}
    for line in table.splitlines()[3:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return _copy_project(tmp_path_factory.mktemp("project"))


def test_paper_preset_dry_run_lists_every_job(project):
    out = _run([BIN / "snakemake", "-n", "--cores", "8", "results/figures/all"], project)
    counts = _job_counts(out)
    # 2 models x 2 methods x 3 seeds; 2 evaluations each; figures 1, 2 per model, 7 per model and method
    assert counts["train"] == 12
    assert counts["evaluate"] == 24
    assert counts["prepare"] == 1
    assert counts["figure_classwise"] == 4
    assert counts["figure_epochs"] == 4
    # robustness (issue 4): AutoAttack and Square in 10 shards each, merged; checks and
    # CIFAR-10-C per run; figure 3 per model, 11 per model (PGD-AT), 14 per model and method
    assert counts["evaluate_shard"] == 12 * 2 * 10 and counts["merge_shards"] == 24
    assert counts["check"] == 12 and counts["corruptions"] == 12 and counts["figure_robustness"] == 2 + 2 + 4
    assert counts["total"] == 1 + 12 + 24 + 1 + 4 + 4 + 1 + 240 + 24 + 12 + 12 + 1 + 8
    assert "cifar10-official.pt" in out


def test_every_gpu_job_declares_its_resources(project):
    out = _run([BIN / "snakemake", "-n", "--cores", "8", "results/figures/all"], project)
    jobs = re.split(r"\n(?=(?:local)?rule )", out)
    gpu_jobs = [j for j in jobs if re.match(r"(local)?rule (train|evaluate|evaluate_shard):", j)]
    assert len(gpu_jobs) == 36 + 240
    for job in gpu_jobs:
        resources = re.search(r"resources: (.*)", job).group(1)
        for key in ("gpu=1", "mem_mb=", "runtime="):
            assert key in resources, (key, job[:300])


def test_profiles_parse(repo_root):
    slurm = yaml.safe_load((repo_root / "workflow/profiles/slurm/config.yaml").read_text())
    assert slurm["executor"] == "slurm"
    assert slurm["rerun-incomplete"] is True and slurm["retries"] >= 1
    assert {"mem_mb", "runtime", "slurm_partition"} <= set(slurm["default-resources"])
    local = yaml.safe_load((repo_root / "workflow/profiles/local/config.yaml").read_text())
    assert local["rerun-incomplete"] is True


def test_slurm_profile_is_accepted_by_snakemake(project):
    pytest.importorskip("snakemake_executor_plugin_slurm")
    out = _run([BIN / "snakemake", "-n", "--profile", "workflow/profiles/slurm", "--config", "preset=ci", "--",
                "results/figures/all"], project)
    assert _job_counts(out)["train"] == 2


def test_demo_preset_dry_run(project):
    out = _run([BIN / "snakemake", "-n", "--cores", "2", "--config", "preset=demo", "--", "results/figures/all"],
               project)
    counts = _job_counts(out)
    assert counts["train"] == 2 and counts["evaluate"] == 4 + 2  # + Square, unsharded in the demo
    assert counts["evaluate_shard"] == 4 and counts["corruptions"] == 2
    assert "cifar10-jpeg.pt" in out


def test_bad_config_is_reported_before_any_job(project):
    proc = subprocess.run(
        [BIN / "snakemake", "-n", "--cores", "1", "--config", "preset=nope"],
        cwd=project, env=_env(), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0
    assert "unknown preset 'nope'" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_ci_pipeline_end_to_end_with_report_and_dvc(project):
    def snakemake(*options):
        return [BIN / "snakemake", "--profile", "workflow/profiles/local", "--cores", "2", *options,
                "--config", "preset=ci", "--", "results/figures/all"]

    _run(snakemake(), project)

    manifest = (project / "results/figures/all").read_text().splitlines()
    figures = [line.split("\t")[0] for line in manifest if not line.startswith("#")]
    assert len(figures) == 8 + 2 + 2 + 4  # + figures 3, 11 and 14
    for fig in figures:
        assert (project / fig).stat().st_size > 1000
    assert {Path(f).parent.name for f in figures} == {
        "fig01_classwise_standard", "fig02_classwise_adversarial", "fig07_epochs",
        "fig03_frl_errors", "fig11_cfp", "fig14_corruptions"}
    classwise = (project / "results/tables/classwise.csv").read_text()
    evals = ("clean", "pgd3", "autoattack", "square")
    assert classwise.count("\n") == 1 + 2 * len(evals) * 10  # runs x evaluations x classes
    metrics = json.loads((project / "results/metrics.json").read_text())
    assert set(metrics) == {f"synthetic/small_cnn/{m}/{e}" for m in ("standard", "pgd_at") for e in evals}
    # issue 4: the checks of every run are written down and none failed
    for run_dir in (project / "results/runs").iterdir():
        checks = json.loads((project / "results/evaluations" / run_dir.name / "checks.json").read_text())
        assert checks["status"] in ("pass", "flag"), checks
    assert (project / "results/tables/attacks.csv").read_text().count("\n") == 1 + 2 * len(evals)
    for run_dir in (project / "results/runs").iterdir():
        assert {"config.json", "checkpoint.pt", "model.pt", "epochs.csv", "meta.json"} <= {
            p.name for p in run_dir.iterdir()}
    assert all((project / "results/logs").rglob("*.log"))

    # A second invocation finds everything up to date.
    again = _run(snakemake(), project)
    assert "Nothing to be done" in again

    # The HTML report, with a caption per figure.
    _run(snakemake("--report", "report.html"), project)
    report = (project / "report.html").read_text()
    assert "Wilson intervals" in report, "figure captions belong in the report"

    # DVC: the same DAG through its stages, in a fresh repository of the copy.
    dvc = BIN / "dvc"
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["preset"] = "ci"
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    shutil.copytree(ROOT / "study", project / "study", ignore=shutil.ignore_patterns("__pycache__"))
    _run(["git", "init", "-q"], project)
    _run([dvc, "init", "-q"], project)
    _run([dvc, "config", "core.analytics", "false"], project)
    out = _run([dvc, "repro"], project)
    assert "Running stage 'figures'" in out
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    assert set(lock["stages"]) == {"data", "train", "evaluate", "figures"}
    assert lock["stages"]["train"]["params"]["params.yaml"]["preset"] == "ci"
    status = _run([dvc, "status"], project)
    assert "up to date" in status
    shown = _run([dvc, "metrics", "show", "--json"], project)
    assert "synthetic/small_cnn/pgd_at/pgd3" in shown
