"""The real Snakemake DAG and DVC stages, run on the `ci` preset in a copy of the project.

Every expected count is derived from the preset's plan (study.config) and params, so the tests
stay right when the study grows."""

import re
import subprocess

import yaml
from helpers.workflow import (
    BIN,
    NOT_IN_CI_DAG,
    TRAIN_RULES,
    ZOO_FIGURES,
    command_env,
    dag_outputs,
    evaluate_count,
    evaluate_jobs,
    figure_jobs,
    is_mitigation,
    plan_preset,
    project_dry_run,
    robustness_runs,
    rule_names,
    train_count,
    zoo_plan,
)

from study.config import method_definition
from study.figures.catalog import FIGURE_KINDS


def test_paper_preset_dry_run_lists_every_job(project, paper_dry_run):
    counts = paper_dry_run.counts
    params, runs, cons = plan_preset(project, "paper")
    assert train_count(counts) == len(runs)
    zoo, zoo_checked, zoo_corrupted = zoo_plan(params)
    assert counts["zoo_run"] == len(zoo) > 6  # the RobustBench zoo: evaluated like runs, never trained
    # sharded evaluations (AutoAttack, Square) are merged; the rest run whole
    evaluate, merges = evaluate_jobs(params, runs + zoo)
    assert (evaluate_count(counts), counts["merge_shards"]) == (evaluate, merges) and merges > 0
    assert counts.get("construct", 0) == len(cons)
    assert counts["prepare"] == len({(r.dataset, r.variant) for r in runs})
    # the baseline grid: every model x method x seed of its group, trained on the original data
    group = params.group("baseline")
    baseline = [r for r in runs if "baseline" in r.groups]
    assert len(baseline) == len(group.models) * len(group.methods) * len(group.seeds)
    assert {r.config["seed"] for r in baseline} == set(group.seeds)
    assert {fig: counts.get(fig, 0) for fig in params.figures} == figure_jobs(params, runs)
    # robustness: checks for every run of the robustness groups, CIFAR-10-C for their CIFAR-10 runs
    tabled, checked, corrupted = robustness_runs(params, runs)
    # (the zoo's checks and CIFAR-10-C feed results/<preset>/zoo/tables, a target of `all`, not of the figures)
    assert counts["check"] == sum(len(r.checkpoints) for r in checked) and zoo_checked and zoo_corrupted
    # CIFAR-10-C: every CIFAR-10 model of its groups, the fairness-trained ones included
    assert "mitigation" in params.robustness.corruptions.groups
    assert counts["corruptions"] == len(corrupted) > sum(r.dataset == "cifar10" for r in tabled)
    # mitigation: every method (and the run it fine-tunes) x model x seed of the mitigation
    # groups, with best and last checkpoints
    groups = [g for g in params.experiments if g.group.startswith("mitigation")]
    wanted = {(ds, model, name, seed) for g in groups for ds in g.dataset_names for model in g.models
              for m in g.methods for name in (m, method_definition(params, m).get("init_from")) if name
              for seed in g.seeds}
    mitigation = [r for r in runs if is_mitigation(r)]
    assert {(r.dataset, r.config["model"], r.config["method"], r.config["seed"]) for r in mitigation} == wanted
    assert len(mitigation) == len(wanted) and all(r.checkpoints == ["last", "best", "published"] for r in mitigation)
    assert "data/prepared/cifar10-official.pt" in dag_outputs(paper_dry_run)


def test_every_gpu_job_declares_its_resources(paper_dry_run):
    gpu_jobs = [j for j in paper_dry_run.jobs if j.rule in TRAIN_RULES or j.rule == "construct"
                or j.rule.startswith("evaluate_") and j.rule != "evaluate_all"]
    counts = paper_dry_run.counts
    assert len(gpu_jobs) == train_count(counts) + evaluate_count(counts) + counts.get("construct", 0) > 0
    for job in gpu_jobs:
        assert job.resources.get("gpu") == 1 and {"mem_mb", "runtime"} <= set(job.resources), (job.rule, job.resources)


def test_profiles_parse(repo_root):
    slurm = yaml.safe_load((repo_root / "workflow/profiles/slurm/config.yaml").read_text())
    assert slurm["executor"] == "slurm"
    assert slurm["rerun-incomplete"] is True and slurm["retries"] >= 1
    assert {"mem_mb", "runtime"} <= set(slurm["default-resources"])
    # partitions by the plugin's choice from partitions.yaml (tests/hardware/test_slurm_profile.py)
    assert slurm["slurm-partition-config"] == "partitions.yaml"
    local = yaml.safe_load((repo_root / "workflow/profiles/local/config.yaml").read_text())
    assert local["rerun-incomplete"] is True


def test_slurm_profile_is_accepted_by_snakemake(project):
    dag = project_dry_run(["--profile", "workflow/profiles/slurm", "--config", "preset=ci", "--",
                           "results/figures/all"],
                          project)
    _, runs, _ = plan_preset(project, "ci")
    assert train_count(dag.counts) == len(runs)


def test_demo_preset_dry_run(project):
    dag = project_dry_run(["--cores", "2", "--config", "preset=demo", "--", "results/figures/all"], project)
    counts = dag.counts
    params, runs, cons = plan_preset(project, "demo")
    assert train_count(counts) == len(runs)
    assert (evaluate_count(counts), counts.get("merge_shards", 0)) == evaluate_jobs(params, runs)
    assert counts.get("construct", 0) == len(cons)
    # the robustness suite on the runs of its groups; CIFAR-10-C for those of the corruption
    # groups trained on CIFAR-10, none of MNIST
    _, checked, corrupted = robustness_runs(params, runs)
    assert counts["check"] == sum(len(r.checkpoints) for r in checked) and counts["corruptions"] == len(corrupted)
    assert {r.dataset for r in corrupted} == {"cifar10"} and any(r.dataset == "mnist" for r in runs)
    # figures with panels (the zoo's have none without placed weights: zoo.require_weights)
    assert {fig: counts[fig] for fig in params.figures if fig in counts} == figure_jobs(params, runs)
    assert "zoo_run" not in counts
    # no mirror (the subprocess's environment): the demo's `cifar10: auto` is the official download
    prepared = {f for f in dag_outputs(dag) if f.startswith("data/prepared/")}
    assert {"data/prepared/cifar10-official.pt", "data/prepared/mnist-official.pt"} <= prepared
    assert "data/prepared/cifar10-jpeg.pt" not in prepared




def test_ci_dag_has_a_job_of_every_rule_and_every_panel(project, ci_dry_run):
    """The ci preset is the end-to-end test of the workflow: its DAG runs every rule but the
    targets and those it cannot run (NOT_IN_CI_DAG), and every figure of the study."""
    rules, counts = rule_names(project), ci_dry_run.counts
    assert NOT_IN_CI_DAG <= rules, "an exception names no rule"
    assert not rules - NOT_IN_CI_DAG - set(counts), "rules without a job in the ci DAG"
    params, runs, cons = plan_preset(project, "ci")
    schema = yaml.safe_load((project / "workflow/schemas/params.schema.yaml").read_text())
    assert set(params.figures) == set(schema["properties"]["figures"]["items"]["enum"]) <= rules
    assert {fig: counts[fig] for fig in params.figures if fig not in ZOO_FIGURES} == figure_jobs(params, runs)
    assert train_count(counts) == len(runs) and counts["construct"] == len(cons)
    assert (evaluate_count(counts), counts.get("merge_shards", 0)) == evaluate_jobs(params, runs)
    # the zoo entry of the ci preset waits for its weights file (tests/pipeline/test_zoo_jobs.py places it)
    assert "zoo_run" not in counts and not set(ZOO_FIGURES) & set(counts)


def test_ci_dag_evaluates_the_published_checkpoint_of_the_runs_whose_group_lists_it(project, ci_dry_run):
    """ci's mitigation_last lists `published`: its runs' training declares model_published.pt and
    an evaluate job per run reads it, with `--checkpoint published`, into <evaluation>@published."""
    _, runs, _ = plan_preset(project, "ci")
    listed = {r.run_id for r in runs if "published" in r.checkpoints}
    assert listed and all("published_selection" in r.config for r in runs if r.run_id in listed)
    published = [j for j in ci_dry_run.jobs if re.search(r"--checkpoint published\b", j.shell)]
    evaluated = {re.search(r"--run-dir results/runs/(\S+)", j.shell).group(1) for j in published}
    assert evaluated == listed
    for run_id in listed:
        assert f"results/evaluations/{run_id}/pgd3@published.parquet" in dag_outputs(ci_dry_run)
    trained = {j.wildcards["run_id"]: j for j in ci_dry_run.of("train")}
    assert set(trained) == {r.run_id for r in runs}  # one rule trains every run
    for run_id in listed:
        assert f"results/runs/{run_id}/model_published.pt" in trained[run_id].output


def test_figure_rules_draw_every_registered_kind(ci_dry_run):
    """`study figure KIND` of every figure rule names a kind of study/figures/catalog.py, and
    every kind there is drawn by some figure."""
    kinds = {j.shell.split()[2] for j in ci_dry_run.jobs if j.shell.startswith("study figure ")}
    assert kinds, "figure jobs in the ci DAG"
    assert kinds == set(FIGURE_KINDS) - set(ZOO_FIGURES.values())  # the zoo's: tests/workflow/test_zoo_workflow.py


def test_bad_config_is_reported_before_any_job(project):
    proc = subprocess.run(
        [BIN / "snakemake", "-n", "--cores", "1", "--config", "preset=nope"],
        cwd=project, env=command_env(), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0
    assert "unknown preset 'nope'" in proc.stdout + proc.stderr



def test_bench_target_runs_study_bench_with_the_configured_setting(project):
    params, _, _ = plan_preset(project, "paper")
    dag = project_dry_run(["--cores", "2", "bench_all"], project)
    default = params.bench.default
    assert dag.counts == {"bench": len(default), "bench_all": 1, "total": len(default) + 1}
    cpu = params.bench.settings["cpu"]
    (command,) = [j.shell for j in dag.of("bench") if j.shell.startswith("study bench --out results/bench/cpu.json ")]
    assert (f"--device cpu --model {cpu.model} --images {cpu.images} --test-images {cpu.test_images}"
            in command)
    # the GPU setting reads the prepared CIFAR-10 it names, so its DAG prepares that first
    dag = project_dry_run(["--cores", "2", "results/bench/cuda.json"], project)
    assert dag.counts["prepare"] == 1
    assert params.bench.settings["cuda"].data in {f for j in dag.of("bench") for f in j.input}
