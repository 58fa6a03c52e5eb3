"""The real Snakemake DAG and DVC stages, run on the `ci` preset in a copy of the project.

Every expected count is derived from the preset's plan (study.config) and params, so the tests
stay right when the study grows."""

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from study.checkpoints import STUDY_CHECKPOINTS
from study.config import group_datasets, method_definition
from study.data.registry import get_dataset_info
from study.figures.catalog import FIGURE_KINDS
from study.record_names import record_name
from study.run_directory import setting_tuple

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# environment.yml: every rule names it (`conda:`), and Snakemake reads it for each job's metadata
WORKFLOW_FILES = ["Snakefile", "params.yaml", "dvc.yaml", "workflow", ".gitignore", "environment.yml"]
# Rules the ci DAG has no job of: targets that only gather other rules' outputs, the bench
# (it measures the machine; test_bench_target_... checks its DAG) and the zoo's ImageNet data
# (it needs the hand-placed ImageNet; tests/test_zoo_workflow.py checks the paper DAG's zoo jobs).
NOT_IN_CI_DAG = {"all", "data_all", "train_all", "evaluate_all", "robustness_all", "bench_all",
                 "bench", "prepare_imagenet"}
# The RobustBench zoo's rules and figures: in the ci DAG only once its weights are placed
# (tests/test_zoo_workflow.py places them and runs them).
ZOO_FIGURES = {"fig15_zoo_classwise": "zoo_classwise", "fig16_zoo_ranks": "zoo_ranks", "fig17_zoo_gap": "zoo_gap"}
NOT_IN_CI_DAG |= {"zoo_run", "zoo_tables", "zoo_robustness_tables", "zoo_all", *ZOO_FIGURES}
DISCREPANCY_FIGURES = ("fig04_discrepancy_datasets", "fig05_discrepancy_models", "fig06_discrepancy_optimization")


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
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    # where a slow test spends its time (shown by pytest -s, or beside a failure)
    print(f"[{time.perf_counter() - t0:6.1f} s] {' '.join(str(a) for a in args[:6])}", file=sys.stderr)
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


def _rules(project) -> set[str]:
    out = _run([BIN / "snakemake", "--list-rules", "--config", "preset=ci"], project)
    return {line.strip() for line in out.splitlines() if re.fullmatch(r"\w+", line.strip())}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return _copy_project(tmp_path_factory.mktemp("project"))


def _plan(project, preset):
    from study.config import constructions, load_params, plan_runs

    params = load_params(project / "params.yaml", {"preset": preset}, presets_dir=project / "workflow/presets",
                         schema_path=project / "workflow/schemas/params.schema.yaml")
    runs = plan_runs(params)
    return params, runs, (constructions(params, runs) if params.get("features") else [])


def _is_mitigation(run) -> bool:
    return any(g.startswith("mitigation") for g in run.groups)


def _plain(runs):
    """The runs of the class-wise figures: on the original data, outside the mitigation groups."""
    return [r for r in runs if not r.config.get("constructed") and not _is_mitigation(r)]


def _of_groups(runs, groups, datasets=None):
    return [r for r in runs if set(r.groups) & set(groups) and not r.config.get("constructed")
            and (datasets is None or r.dataset in datasets)]


def _robustness_runs(params, runs):
    """(runs of the robustness groups: figures 3 and 11; runs checked, at each of their
    checkpoints: those and the mitigation runs; runs of the corruption groups on its datasets)."""
    rob = params["robustness"]
    cc = rob.get("corruptions") or {}
    tabled = _of_groups(runs, rob["groups"])
    if "groups" in rob["checks"]:
        checked = _of_groups(runs, rob["checks"]["groups"])
    else:
        checked = tabled + [r for r in runs if _is_mitigation(r) and r not in tabled]
    return tabled, checked, _of_groups(runs, cc.get("groups") or rob["groups"], cc.get("datasets", []))


def _shards(params) -> dict[str, int]:
    return {name: int(ev.get("shards", 1)) for name, ev in params["evaluations"].items()}


def _whole(run, checkpoint: str, shards: dict[str, int]) -> list[str]:
    """The evaluations of a run that its one evaluate job of `checkpoint` writes: all of them but
    the sharded ones of the last checkpoint (a job per shard and a merge each)."""
    return sorted(e for e in run.evaluations if checkpoint != "last" or shards.get(e, 1) == 1)


def _evaluate_jobs(params, runs) -> tuple[int, int]:
    """(evaluate, merge_shards) jobs of a plan: one per (run, checkpoint) for all its evaluations
    but a sharded one of the last checkpoint, which has one per shard and a merge."""
    shards = _shards(params)
    whole = sum(bool(_whole(r, c, shards)) for r in runs for c in r.checkpoints)
    last = [e for r in runs if "last" in r.checkpoints for e in r.evaluations if shards.get(e, 1) > 1]
    return whole + sum(shards[e] for e in last), len(last)


def _evaluate_count(counts: dict[str, int]) -> int:
    """Jobs of the evaluate rules (one rule per set of evaluations, evaluate_shard) in job stats."""
    return sum(n for rule, n in counts.items()
               if rule.startswith("evaluate_") and rule != "evaluate_all")


#: the training rules: train, and those of runs that also write model_best.pt (a validation
#: split), model_published.pt (the published protocol) or both
TRAIN_RULES = ("train", "train_validated", "train_published", "train_validated_published")


def _train_count(counts: dict[str, int]) -> int:
    """Training jobs in job stats (TRAIN_RULES)."""
    return sum(counts.get(rule, 0) for rule in TRAIN_RULES)


def _zoo(params):
    from study.config.zoo import plan_zoo, zoo_checked, zoo_corrupted

    zoo = plan_zoo(params)
    return zoo, zoo_checked(params, zoo), zoo_corrupted(params, zoo)


def _zoo_panels(params) -> int:
    """Zoo figures: one panel per (dataset, threat model) with its robust evaluation."""
    robust = (params.get("zoo") or {}).get("figure_evaluations") or {}
    return len({(r.dataset, r.config["zoo"]["threat_model"]) for r in _zoo(params)[0]
                if robust.get(r.config["zoo"]["threat_model"]) in r.evaluations})


def _figure_jobs(params, runs) -> dict[str, int]:
    """Jobs per figure rule: one per panel (what the figure draws, from docs/study.md#figures)."""
    plain = _plain(runs)
    tabled, _, corrupted = _robustness_runs(params, runs)
    configs: dict[str, set] = {}
    for r in plain:
        configs.setdefault(r.dataset, set()).add((r.config["model"], r.config["method"], setting_tuple(r.run)))

    def panels(rs, method=None):
        return len({(r.dataset, r.config["model"], method or r.config["method"]) for r in rs})

    jobs = {
        "fig01_classwise_standard": panels([r for r in plain if r.config["method"] == "standard"]),
        "fig02_classwise_adversarial": panels([r for r in plain if r.config["method"] == "pgd_at"]),
        "fig03_frl_errors": panels(tabled, "all"),
        **{fig: 1 for fig in DISCREPANCY_FIGURES},  # one experiment group each
        "fig07_epochs": panels(plain),
        "fig08_rank_agreement": sum(len(c) > 1 for c in configs.values()),  # datasets with configurations to compare
        "fig09_confusion": panels(plain),
        "fig10_logit_similarity": panels(plain),
        "fig11_cfp": panels([r for r in tabled if r.config["method"] == "pgd_at"]),
        "fig12_features": 1 if params.get("features") else 0,
        "fig13_mitigation": panels([r for r in runs if _is_mitigation(r)], "all"),
        "fig13_policy_epochs": panels([r for r in runs if _is_mitigation(r)], "all"),
        "fig14_corruptions": panels(corrupted),
        **{fig: _zoo_panels(params) for fig in ZOO_FIGURES},
    }
    return {fig: n for fig, n in jobs.items() if fig in params["figures"] and n}


def test_paper_preset_dry_run_lists_every_job(project, paper_dry_run):
    out = paper_dry_run
    counts = _job_counts(out)
    params, runs, cons = _plan(project, "paper")
    assert _train_count(counts) == len(runs)
    zoo, zoo_checked, zoo_corrupted = _zoo(params)
    assert counts["zoo_run"] == len(zoo) > 6  # the RobustBench zoo: evaluated like runs, never trained
    # sharded evaluations (AutoAttack, Square) are merged; the rest run whole
    evaluate, merges = _evaluate_jobs(params, runs + zoo)
    assert (_evaluate_count(counts), counts["merge_shards"]) == (evaluate, merges) and merges > 0
    assert counts.get("construct", 0) == len(cons)
    assert counts["prepare"] == len({(r.dataset, r.variant) for r in runs})
    # the baseline grid: every model x method x seed of its group, trained on the original data
    group = next(g for g in params["experiments"] if g["group"] == "baseline")
    baseline = [r for r in runs if "baseline" in r.groups]
    assert len(baseline) == len(group["models"]) * len(group["methods"]) * len(group["seeds"])
    assert {r.config["seed"] for r in baseline} == set(group["seeds"])
    assert {fig: counts.get(fig, 0) for fig in params["figures"]} == _figure_jobs(params, runs)
    # robustness: checks for every run of the robustness groups, CIFAR-10-C for their CIFAR-10 runs
    tabled, checked, corrupted = _robustness_runs(params, runs)
    # (the zoo's checks and CIFAR-10-C feed results/zoo/tables, a target of `all`, not of the figures)
    assert counts["check"] == sum(len(r.checkpoints) for r in checked) and zoo_checked and zoo_corrupted
    # CIFAR-10-C: every CIFAR-10 model of its groups, the fairness-trained ones included
    assert "mitigation" in params["robustness"]["corruptions"]["groups"]
    assert counts["corruptions"] == len(corrupted) > sum(r.dataset == "cifar10" for r in tabled)
    # mitigation: every method (and the run it fine-tunes) x model x seed of the mitigation
    # groups, with best and last checkpoints
    groups = [g for g in params["experiments"] if g["group"].startswith("mitigation")]
    wanted = {(ds, model, name, seed) for g in groups for ds in group_datasets(g) for model in g["models"]
              for m in g["methods"] for name in (m, method_definition(params, m).get("init_from")) if name
              for seed in g["seeds"]}
    mitigation = [r for r in runs if _is_mitigation(r)]
    assert {(r.dataset, r.config["model"], r.config["method"], r.config["seed"]) for r in mitigation} == wanted
    assert len(mitigation) == len(wanted) and all(r.checkpoints == ["last", "best", "published"] for r in mitigation)
    assert "cifar10-official.pt" in out


def test_every_gpu_job_declares_its_resources(paper_dry_run):
    out = paper_dry_run
    jobs = re.split(r"\n(?=\s*(?:local)?rule )", out)  # (an evaluate job is printed indented, in its group)
    gpu_rules = rf"\s*(local)?rule ({'|'.join(TRAIN_RULES)}|evaluate_(?!all:)\w+|construct):"
    gpu_jobs = [j for j in jobs if re.match(gpu_rules, j)]
    counts = _job_counts(out)
    assert len(gpu_jobs) == _train_count(counts) + _evaluate_count(counts) + counts.get("construct", 0)
    for job in gpu_jobs:
        resources = re.search(r"resources: (.*)", job).group(1)
        for key in ("gpu=1", "mem_mb=", "runtime="):
            assert key in resources, (key, job[:300])


def test_profiles_parse(repo_root):
    slurm = yaml.safe_load((repo_root / "workflow/profiles/slurm/config.yaml").read_text())
    assert slurm["executor"] == "slurm"
    assert slurm["rerun-incomplete"] is True and slurm["retries"] >= 1
    assert {"mem_mb", "runtime"} <= set(slurm["default-resources"])
    # partitions by the plugin's choice from partitions.yaml (tests/test_slurm_profile.py)
    assert slurm["slurm-partition-config"] == "partitions.yaml"
    local = yaml.safe_load((repo_root / "workflow/profiles/local/config.yaml").read_text())
    assert local["rerun-incomplete"] is True


def test_slurm_profile_is_accepted_by_snakemake(project):
    pytest.importorskip("snakemake_executor_plugin_slurm")
    out = _run([BIN / "snakemake", "-n", "--profile", "workflow/profiles/slurm", "--config", "preset=ci", "--",
                "results/figures/all"], project)
    _, runs, _ = _plan(project, "ci")
    assert _train_count(_job_counts(out)) == len(runs)


def test_demo_preset_dry_run(project):
    out = _run([BIN / "snakemake", "-n", "--cores", "2", "--config", "preset=demo", "--", "results/figures/all"],
               project)
    counts = _job_counts(out)
    params, runs, cons = _plan(project, "demo")
    assert _train_count(counts) == len(runs)
    assert (_evaluate_count(counts), counts.get("merge_shards", 0)) == _evaluate_jobs(params, runs)
    assert counts.get("construct", 0) == len(cons)
    # the robustness suite on the runs of its groups; CIFAR-10-C for those of the corruption
    # groups trained on CIFAR-10, none of MNIST
    _, checked, corrupted = _robustness_runs(params, runs)
    assert counts["check"] == sum(len(r.checkpoints) for r in checked) and counts["corruptions"] == len(corrupted)
    assert {r.dataset for r in corrupted} == {"cifar10"} and any(r.dataset == "mnist" for r in runs)
    # figures with panels (the zoo's have none without placed weights: zoo.require_weights)
    assert {fig: counts[fig] for fig in params["figures"] if fig in counts} == _figure_jobs(params, runs)
    assert "zoo_run" not in counts
    # no mirror (the subprocess's environment): the demo's `cifar10: auto` is the official download
    assert "cifar10-official.pt" in out and "cifar10-jpeg.pt" not in out and "mnist-official.pt" in out


@pytest.fixture(scope="module")
def ci_dry_run(project):
    # `all`: the figures and everything else the study makes (reports beside the figures)
    return _run([BIN / "snakemake", "-n", "-p", "--cores", "2", "--config", "preset=ci", "--", "all"], project)


def test_ci_dag_has_a_job_of_every_rule_and_every_panel(project, ci_dry_run):
    """The ci preset is the end-to-end test of the workflow: its DAG runs every rule but the
    targets and those it cannot run (NOT_IN_CI_DAG), and every figure of the study."""
    rules, counts = _rules(project), _job_counts(ci_dry_run)
    assert NOT_IN_CI_DAG <= rules, "an exception names no rule"
    assert not rules - NOT_IN_CI_DAG - set(counts), "rules without a job in the ci DAG"
    params, runs, cons = _plan(project, "ci")
    schema = yaml.safe_load((project / "workflow/schemas/params.schema.yaml").read_text())
    assert set(params["figures"]) == set(schema["properties"]["figures"]["items"]["enum"]) <= rules
    assert {fig: counts[fig] for fig in params["figures"] if fig not in ZOO_FIGURES} == _figure_jobs(params, runs)
    assert _train_count(counts) == len(runs) and counts["construct"] == len(cons)
    assert (_evaluate_count(counts), counts.get("merge_shards", 0)) == _evaluate_jobs(params, runs)
    # the zoo entry of the ci preset waits for its weights file (tests/test_zoo_workflow.py places it)
    assert "zoo_run" not in counts and not set(ZOO_FIGURES) & set(counts)


def test_ci_dag_evaluates_the_published_checkpoint_of_the_runs_whose_group_lists_it(project, ci_dry_run):
    """ci's mitigation_last lists `published`: its runs' training declares model_published.pt and
    an evaluate job per run reads it, with `--checkpoint published`, into <evaluation>@published."""
    _, runs, _ = _plan(project, "ci")
    listed = {r.run_id for r in runs if "published" in r.checkpoints}
    assert listed and all("published_selection" in r.config for r in runs if r.run_id in listed)
    evaluated = set(re.findall(r"--run-dir results/runs/(\S+) [^\n]*--checkpoint published", ci_dry_run))
    assert evaluated == listed
    for run_id in listed:
        assert f"results/evaluations/{run_id}/pgd3@published.parquet" in ci_dry_run
    counts = _job_counts(ci_dry_run)
    assert counts["train_validated_published"] == sum("published_selection" in r.config for r in runs)


def test_figure_rules_draw_every_registered_kind(ci_dry_run):
    """`study figure KIND` of every figure rule names a kind of study/figures/catalog.py, and
    every kind there is drawn by some figure."""
    kinds = set(re.findall(r"^Shell command: study figure (\S+)", ci_dry_run, re.M))
    assert kinds == set(FIGURE_KINDS) - set(ZOO_FIGURES.values())  # the zoo's: tests/test_zoo_workflow.py


def test_bad_config_is_reported_before_any_job(project):
    proc = subprocess.run(
        [BIN / "snakemake", "-n", "--cores", "1", "--config", "preset=nope"],
        cwd=project, env=_env(), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0
    assert "unknown preset 'nope'" in proc.stdout + proc.stderr


def _expected_logs(params, runs) -> set[str]:
    """The logs that training and evaluation must leave: one per run, one per (run, checkpoint)
    evaluate job (its evaluations joined by +), a sharded one's per shard and its merge's."""
    logs = {f"results/logs/train/{r.run_id}.log" for r in runs}
    shards = _shards(params)
    for r in runs:
        where = f"results/logs/evaluate/{r.run_id}"
        for c in r.checkpoints:
            if whole := _whole(r, c, shards):
                logs.add(f"{where}/{record_name('+'.join(whole), c)}.log")
        for e in (e for e in r.evaluations if "last" in r.checkpoints and shards.get(e, 1) > 1):
            logs |= {f"{where}/shards/{e}/{i}-of-{shards[e]}.log" for i in range(shards[e])}
            logs.add(f"{where}/{e}-merge.log")
    return logs


def _stats(output: str) -> dict[str, int]:
    """Jobs per rule over every Snakemake invocation in `output` (DVC runs one per stage)."""
    counts: dict[str, int] = {}
    for start in (m.start() for m in re.finditer("Job stats:", output)):
        for rule, n in _job_counts(output[start:]).items():
            counts[rule] = counts.get(rule, 0) + n
    return counts


@pytest.mark.slow
def test_ci_pipeline_end_to_end_with_report_and_dvc(project):
    """Snakemake (the cpu profile) runs every job up to the tables; DVC then runs its four stages
    over the same DAG, its figures stage drawing the figures. (A stage rebuilds its outputs that
    are not persistent, so figures drawn before `dvc repro` would be drawn twice.)"""
    def snakemake(*options, targets=("results/figures/all",)):
        return [BIN / "snakemake", "--profile", "workflow/profiles/cpu", "--cores", "2", *options,
                "--config", "preset=ci", "--", *targets]

    out = _run(snakemake(targets=("evaluate_all", "robustness_all")), project)
    assert " --threads 1 " in out and " --threads 2 " not in out  # the cpu profile: one thread per job
    params, runs, cons = _plan(project, "ci")

    # DVC: the same DAG through its stages, in a fresh repository of the copy.
    dvc = BIN / "dvc"
    study_params = yaml.safe_load((project / "params.yaml").read_text())
    study_params["preset"] = "ci"
    (project / "params.yaml").write_text(yaml.safe_dump(study_params, sort_keys=False))
    shutil.copytree(ROOT / "study", project / "study", ignore=shutil.ignore_patterns("__pycache__"))
    _run(["git", "init", "-q"], project)
    _run([dvc, "init", "-q"], project)
    _run([dvc, "config", "core.analytics", "false"], project)
    # the stages read the values set for a run against params.yaml as committed (study/stage.py)
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "."], project)
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "ci"], project)
    repro = _run([dvc, "repro"], project)
    assert all(f"Running stage '{stage}'" in repro for stage in ("data", "train", "evaluate", "figures"))
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    assert set(lock["stages"]) == {"data", "train", "evaluate", "figures"}
    assert lock["stages"]["train"]["params"]["params.yaml"]["preset"] == "ci"
    assert "data/constructed" in {o["path"] for o in lock["stages"]["train"]["outs"]}
    assert "up to date" in _run([dvc, "status"], project)

    # Every job that ran (the targets aside) has a log, left it and said something in it.
    ran = _stats(out + repro)
    assert (_train_count(ran), ran["construct"]) == (len(runs), len(cons))
    assert (_evaluate_count(ran), ran["merge_shards"]) == _evaluate_jobs(params, runs)
    # (the zoo's figures wait for its weights file: tests/test_zoo_workflow.py)
    assert {fig: ran[fig] for fig in params["figures"] if fig not in ZOO_FIGURES} == _figure_jobs(params, runs)
    logs = re.findall(r"^\s+log: (\S+)$", out + repro, re.M)
    assert len(logs) == ran["total"] - sum(n for rule, n in ran.items() if rule in NOT_IN_CI_DAG)
    assert _expected_logs(params, runs) <= set(logs)
    for log in logs:
        assert (project / log).stat().st_size > 0, f"{log} is empty"

    manifest = (project / "results/figures/all").read_text().splitlines()
    figures = [line.split("\t")[0] for line in manifest if not line.startswith("#")]
    assert {Path(f).parent.name for f in figures} == set(params["figures"]) - set(ZOO_FIGURES)
    for fig in figures:
        assert (project / fig).stat().st_size > 1000
    plain = _plain(runs)
    assert sum("fig07_epochs" in f for f in figures) == 2 * len(
        {(r.dataset, r.config["model"], r.config["method"]) for r in plain})  # PNG and PDF per panel
    # figure 12: bars and examples, PNG and PDF, of the models trained on the constructed sets
    assert sum("fig12_features" in f for f in figures) == 4 * len({c.source_run.dataset for c in cons}) > 0
    classwise = (project / "results/tables/classwise.csv").read_text()
    rows = sum(get_dataset_info(r.dataset).num_classes * len(r.evaluations) * len(r.checkpoints) for r in runs)
    assert classwise.count("\n") == 1 + rows  # header + runs x evaluations x checkpoints x classes
    # the PNGs again, copied, in the folder DVC draws as image plots; `dvc plots show` renders
    # every one without an error (results/figures' PDFs and tables would be errors)
    pngs = [f for f in figures if f.endswith(".png")]
    images = sorted(p.relative_to(project / "results/figure_images").as_posix()
                    for p in (project / "results/figure_images").rglob("*") if p.is_file())
    assert images == sorted(Path(f).relative_to("results/figures").as_posix() for f in pngs)
    copies = project / "results/figure_images"
    assert all((project / f).read_bytes() == (copies / Path(f).relative_to("results/figures")).read_bytes()
               for f in pngs)
    shown_plots = _run([dvc, "plots", "show", "--out", project / "plots"], project)
    assert "error" not in shown_plots.lower(), shown_plots
    drawn = sorted(p.name for p in (project / "plots").rglob("*.png"))
    assert drawn == sorted("workspace_results_figure_images_" + i.replace("/", "_") for i in images)
    # the headline metrics: a file per model (a row of `dvc metrics show`), an entry per evaluation
    headline = {(f"results/metrics/{r.dataset}__{r.config['model']}__{r.config['method']}.json", e)
                for r in plain for e in r.evaluations}
    metrics = {(p.relative_to(project).as_posix(), e): m for p in (project / "results/metrics").glob("*.json")
               for e, m in json.loads(p.read_text()).items()}
    assert headline <= set(metrics)
    # (an evaluation a check flagged is not counted: its numbers are null, `flagged` says so)
    assert all("flagged" in metrics[k] or 0 <= metrics[k]["worst"] <= metrics[k]["mean"] <= 1
               and metrics[k]["worst_class"] for k in headline)
    text = _run([dvc, "metrics", "show", "--json"], project)  # (stdout and stderr: the JSON and nothing)
    shown, _ = json.JSONDecoder().raw_decode(text[text.index("{"):])
    shown = {(path, e): m for path, data in shown[""]["data"].items() for e, m in data["data"].items()}
    # (DVC leaves out the null numbers of a flagged evaluation)
    assert {k: shown[k] for k in headline} == {k: {f: v for f, v in metrics[k].items() if v is not None}
                                                for k in headline}
    table = _run([dvc, "metrics", "show"], project)
    print(table, file=sys.stderr)  # the readable headline: a row per model
    assert all(path in table for path, _ in headline)
    assert len(list((project / "data/constructed").glob("d_*.pt"))) == len(cons)
    # the robustness suite on the runs of its groups: checks written down and none failed, one
    # row per (run, evaluation) in the attack table, corruptions per class
    _, checked, corrupted = _robustness_runs(params, runs)
    for run in checked:
        for at in ("" if c == "last" else f"@{c}" for c in run.checkpoints):
            checks = json.loads((project / "results/evaluations" / run.run_id / f"checks{at}.json").read_text())
            assert checks["status"] in ("pass", "flag"), checks
    attacks = pd.read_csv(project / "results/tables/attacks.csv")
    assert len(attacks) == sum(len(r.evaluations) * len(r.checkpoints) for r in checked)  # one row per record
    assert {e for e, n in _shards(params).items() if n > 1} & set(attacks["eval"]), "a sharded evaluation"
    corruptions = pd.read_csv(project / "results/tables/corruptions.csv")
    assert set(corruptions["run_id"]) == {r.run_id for r in corrupted}
    # figure 13: every mitigation method of the preset, best checkpoint (and last where
    # planned), in the table beside the figure
    mitigation = [r for r in runs if _is_mitigation(r)]
    for dataset, model in {(r.dataset, r.config["model"]) for r in mitigation}:
        fig13 = pd.read_csv(project / f"results/figures/fig13_mitigation/{dataset}__{model}__all.csv")
        panel = [r for r in mitigation if (r.dataset, r.config["model"]) == (dataset, model)]
        assert {r.config["method"] for r in panel} == set(fig13[fig13["checkpoint"] == "best"]["method"])
        # the study's checkpoints only: `published` (chosen on the test set) is no part of figure 13
        for run in panel:
            drawn = set(fig13[fig13["method"] == run.config["method"]]["checkpoint"])
            assert drawn == set(run.checkpoints) & set(STUDY_CHECKPOINTS)
        published = pd.read_csv(project / "results/tables/classwise.csv").query("checkpoint == 'published'")
        assert set(published["run_id"]) == {r.run_id for r in mitigation if "published" in r.checkpoints} != set()
    for run in runs:
        run_dir = project / "results/runs" / run.run_id
        assert {"config.json", "checkpoint.pt", "model.pt", "epochs.csv", "meta.json"} <= {
            p.name for p in run_dir.iterdir()}

    # Snakemake, run again, finds everything that DVC's stages made up to date.
    assert "Nothing to be done" in _run(snakemake(), project)

    # The HTML report, with a caption per figure.
    _run(snakemake("--report", "report.html"), project)
    report = (project / "report.html").read_text()
    assert "Wilson intervals" in report, "figure captions belong in the report"

    # A changed robustness-evaluation setting makes the evaluations and the figures stale.
    study_params["robustness"]["corruptions"]["seed"] += 1
    (project / "params.yaml").write_text(yaml.safe_dump(study_params, sort_keys=False))
    stale = set(re.findall(r"^(\w+):$", _run([dvc, "status"], project), re.M))
    assert stale == {"evaluate", "figures"}



@pytest.mark.slow
def test_ci_estimate_against_the_benchmarks_its_jobs_measured(project):
    """The price (study.cost) held against the benchmark files the ci pipeline's jobs left (the
    test above, same project): estimate / measured per rule and in total, written to
    results/cost_ratio.md and printed. A report, not a timed assertion: asserted are only that
    every priced job left its benchmark file and that every ratio is finite and positive."""
    from study.cost import THROUGHPUT_TABLE, load_throughput, plan_jobs, ratio_report

    if not (project / "results/tables/classwise.csv").is_file():
        pytest.skip("needs the ci pipeline's run (test_ci_pipeline_end_to_end_with_report_and_dvc, above)")
    params, runs, _ = _plan(project, "ci")
    # (the zoo's jobs wait for its weights: no part of the ci DAG, tests/test_zoo_workflow.py)
    jobs = plan_jobs(params, runs, [], load_throughput(project / THROUGHPUT_TABLE))
    missing = [j.benchmark for j in jobs if not (project / j.benchmark).is_file()]
    assert not missing, f"priced jobs without a benchmark file: {missing[:5]}"
    text, ratios = ratio_report(jobs, project, "cpu-2core")
    (project / "results/cost_ratio.md").write_text(text)
    print(text, file=sys.stderr)
    assert ratios and all(math.isfinite(r) and r > 0 for r in ratios.values()), ratios

def test_bench_target_runs_study_bench_with_the_configured_setting(project):
    params, _, _ = _plan(project, "paper")
    out = _run([BIN / "snakemake", "-n", "-p", "--cores", "2", "bench_all"], project)
    default = params["bench"]["default"]
    assert _job_counts(out) == {"bench": len(default), "bench_all": 1, "total": len(default) + 1}
    cpu = params["bench"]["settings"]["cpu"]
    command = re.search(r"study bench --out results/bench/cpu\.json .*", out).group(0)
    assert (f"--device cpu --model {cpu['model']} --images {cpu['images']} --test-images {cpu['test_images']}"
            in command)
    # the GPU setting reads the prepared CIFAR-10 it names, so its DAG prepares that first
    out = _run([BIN / "snakemake", "-n", "--cores", "2", "results/bench/cuda.json"], project)
    assert _job_counts(out)["prepare"] == 1
    assert params["bench"]["settings"]["cuda"]["data"] in out
