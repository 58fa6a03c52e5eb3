"""The real Snakemake DAG and DVC stages, run on the `ci` preset in a copy of the project."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
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


def _plan(project, preset):
    from study.config import constructions, load_params, plan_runs

    params = load_params(project / "params.yaml", {"preset": preset}, presets_dir=project / "workflow/presets",
                         schema_path=project / "workflow/schemas/params.schema.yaml")
    runs = plan_runs(params)
    return params, runs, (constructions(params, runs) if params.get("features") else [])


def test_paper_preset_dry_run_lists_every_job(project):
    out = _run([BIN / "snakemake", "-n", "--cores", "8", "results/figures/all"], project)
    counts = _job_counts(out)
    params, runs, cons = _plan(project, "paper")
    assert counts["train"] == len(runs)
    # sharded evaluations (AutoAttack, Square: 10 shards each) are merged; the rest run whole
    sharded = [(r, e) for r in runs if "last" in r.checkpoints for e in r.evaluations if e in ("autoattack", "square")]
    last = sum(len(r.evaluations) for r in runs if "last" in r.checkpoints)
    best = sum(len(r.evaluations) for r in runs if "best" in r.checkpoints)
    assert counts["evaluate"] + counts["merge_shards"] == last and counts["evaluate_best"] == best
    assert counts["merge_shards"] == len(sharded) and counts["evaluate_shard"] == 10 * len(sharded)
    assert counts.get("construct", 0) == len(cons)
    # the baseline grid: 2 models x 3 methods x 3 seeds, trained on the original data
    baseline = [r for r in runs if "baseline" in r.groups]
    assert len(baseline) == 18 and {r.config["seed"] for r in baseline} == {0, 1, 2}
    assert counts["prepare"] == 5  # mnist, svhn, cifar10, cifar100, tinyimagenet
    assert counts["figure_discrepancy"] == 3  # figures 4, 5, 6
    assert counts["figure_rank_agreement"] == 5  # one per dataset
    # robustness: checks for every run of the robustness groups, CIFAR-10-C for their CIFAR-10 runs
    checked = [r for r in runs
               if set(r.groups) & set(params["robustness"]["groups"]) and not r.config.get("constructed")]
    assert counts["check"] == len(checked)
    # CIFAR-10-C: every CIFAR-10 model of its groups, the fairness-trained ones included
    corrupted = [r for r in runs if set(r.groups) & set(params["robustness"]["corruptions"]["groups"])
                 and r.dataset == "cifar10" and not r.config.get("constructed")]
    assert "mitigation" in params["robustness"]["corruptions"]["groups"]
    assert counts["corruptions"] == len(corrupted) > sum(r.dataset == "cifar10" for r in checked)
    # mitigation: 34 methods x 3 seeds on CIFAR-10 and on CIFAR-100, best and last checkpoints
    mitigation = [r for r in runs if any(g.startswith("mitigation") for g in r.groups)]
    assert len(mitigation) == 34 * 3 * 2 and all(r.checkpoints == ["last", "best"] for r in mitigation)
    assert counts["figure_mitigation"] == counts["figure_policy_epochs"] == 2
    assert "cifar10-official.pt" in out


def test_every_gpu_job_declares_its_resources(project):
    out = _run([BIN / "snakemake", "-n", "--cores", "8", "results/figures/all"], project)
    jobs = re.split(r"\n(?=(?:local)?rule )", out)
    gpu_rules = r"(local)?rule (train|evaluate|evaluate_shard|evaluate_best|construct):"
    gpu_jobs = [j for j in jobs if re.match(gpu_rules, j)]
    counts = _job_counts(out)
    assert len(gpu_jobs) == (counts["train"] + counts["evaluate"] + counts["evaluate_shard"] + counts["evaluate_best"]
                             + counts.get("construct", 0))
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
    _, runs, _ = _plan(project, "ci")
    assert _job_counts(out)["train"] == len(runs)


def test_demo_preset_dry_run(project):
    out = _run([BIN / "snakemake", "-n", "--cores", "2", "--config", "preset=demo", "--", "results/figures/all"],
               project)
    counts = _job_counts(out)
    _, runs, _ = _plan(project, "demo")
    assert counts["train"] == len(runs)
    last = sum(len(r.evaluations) for r in runs if "last" in r.checkpoints)
    assert counts["evaluate"] + counts["merge_shards"] == last
    # mitigation: 3 methods and FRL's parent, clean and PGD of their best checkpoints
    mitigation = [r for r in runs if "mitigation" in r.groups]
    assert len(mitigation) == 4 and counts["evaluate_best"] == 2 * len(mitigation)
    # the robustness suite on the two baseline runs: AutoAttack in 2 shards, Square whole, checks;
    # CIFAR-10-C for every CIFAR-10 model (baseline, LeNet, the four mitigation runs), none of MNIST
    assert counts["evaluate_shard"] == 4 and counts["check"] == 2
    cifar = [r for r in runs if r.dataset == "cifar10" and not r.config.get("constructed")
             and r.config["method"] != "pgd_at_l2"]
    assert counts["corruptions"] == len(cifar) == 7
    assert "cifar10-jpeg.pt" in out and "mnist-official.pt" in out


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
        return [BIN / "snakemake", "--profile", "workflow/profiles/cpu", "--cores", "2", *options,
                "--config", "preset=ci", "--", "results/figures/all"]

    out = _run(snakemake(), project)
    assert " --threads 1 " in out and " --threads 2 " not in out  # the cpu profile: one thread per job

    _, runs, _ = _plan(project, "ci")
    manifest = (project / "results/figures/all").read_text().splitlines()
    figures = [line.split("\t")[0] for line in manifest if not line.startswith("#")]
    assert {Path(f).parent.name for f in figures} == {
        "fig01_classwise_standard", "fig02_classwise_adversarial", "fig07_epochs",
        "fig04_discrepancy_datasets", "fig05_discrepancy_models", "fig06_discrepancy_optimization",
        "fig08_rank_agreement", "fig09_confusion", "fig10_logit_similarity", "fig12_features",
        "fig03_frl_errors", "fig11_cfp", "fig14_corruptions", "fig13_mitigation", "fig13_policy_epochs"}
    for fig in figures:
        assert (project / fig).stat().st_size > 1000
    original = [r for r in runs if not r.config.get("constructed")]
    panels = {(r.config["model"], r.config["method"]) for r in original
              if "baseline" in r.groups or "models" in r.groups}
    assert sum("fig07_epochs" in f for f in figures) >= 2 * len(panels)
    assert sum("fig12_features" in f for f in figures) == 4  # bars and examples, PNG and PDF
    classwise = (project / "results/tables/classwise.csv").read_text()
    records = sum(len(r.evaluations) * len(r.checkpoints) for r in runs)
    assert classwise.count("\n") == 1 + 10 * records  # header + runs x evaluations x checkpoints x classes
    metrics = json.loads((project / "results/metrics.json").read_text())
    assert {f"synthetic/{m}/{e}" for m in ("small_cnn/standard", "small_cnn/pgd_at", "lenet/standard")
            for e in ("clean", "pgd3")} <= set(metrics)
    assert len(list((project / "data/constructed").glob("d_*.pt"))) == 4
    # the robustness suite on the baseline runs: checks written down and none failed, one row
    # per (run, evaluation) in the attack table, corruptions per class
    baseline = [r for r in runs if "baseline" in r.groups]
    for run in baseline:
        checks = json.loads((project / "results/evaluations" / run.run_id / "checks.json").read_text())
        assert checks["status"] in ("pass", "flag"), checks
    attacks = pd.read_csv(project / "results/tables/attacks.csv")
    assert len(attacks) == sum(len(r.evaluations) for r in baseline)
    assert {"autoattack", "square"} <= set(attacks["eval"])
    corruptions = pd.read_csv(project / "results/tables/corruptions.csv")
    assert set(corruptions["run_id"]) == {r.run_id for r in baseline}
    # figure 13: every mitigation method of the paper grid, best checkpoint, in the table beside it
    fig13 = pd.read_csv(project / "results/figures/fig13_mitigation/synthetic__small_cnn__all.csv")
    paper = yaml.safe_load((project / "params.yaml").read_text())["experiments"]
    grid = next(g for g in paper if g["group"] == "mitigation")["methods"]
    assert set(grid) <= set(fig13[fig13["checkpoint"] == "best"]["method"])
    assert {"last", "best"} == set(fig13[fig13["method"] == "frl_reweight_remargin"]["checkpoint"])
    for run in runs:
        run_dir = project / "results/runs" / run.run_id
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


def test_bench_target_runs_study_bench_with_the_configured_setting(project):
    out = _run([BIN / "snakemake", "-n", "-p", "--cores", "2", "bench_all"], project)
    assert _job_counts(out) == {"bench": 1, "bench_all": 1, "total": 2}
    command = re.search(r"study bench --out results/bench/cpu\.json .*", out).group(0)
    assert "--device cpu --model preact_resnet18 --images 250 --test-images 40" in command
    # the GPU setting reads the prepared CIFAR-10 it names, so its DAG prepares that first
    out = _run([BIN / "snakemake", "-n", "--cores", "2", "results/bench/cuda.json"], project)
    assert _job_counts(out)["prepare"] == 1
