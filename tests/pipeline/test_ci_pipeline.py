"""The ci preset's whole DAG for real: Snakemake (the cpu profile) up to the tables, then DVC's
four stages over the same DAG, the report, and what a changed setting makes stale."""

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml
from helpers.workflow import (
    BIN,
    DISCREPANCY_FIGURES,
    NOT_IN_CI_DAG,
    ROOT,
    ZOO_FIGURES,
    command_env,
    dag_outputs,
    evaluate_count,
    evaluate_jobs,
    evaluation_shards,
    expected_logs,
    figure_jobs,
    is_mitigation,
    job_stats,
    plain_runs,
    plan_preset,
    project_dry_run,
    robustness_runs,
    run_command,
    train_count,
)

from study.checkpoints import STUDY_CHECKPOINTS
from study.data.registry import get_dataset_info


def test_ci_pipeline_end_to_end_with_report_and_dvc(project, record_property):
    """Snakemake (the cpu profile) runs every job up to the tables; DVC then runs its four stages
    over the same DAG, its figures stage drawing the figures. (A stage rebuilds its outputs that
    are not persistent, so figures drawn before `dvc repro` would be drawn twice.)"""
    def snakemake(*options, targets=("results/figures/all",)):
        return [BIN / "snakemake", "--profile", "workflow/profiles/cpu", "--cores", "2", *options,
                "--config", "preset=ci", "--", *targets]

    out = run_command(snakemake(targets=("evaluate_all", "robustness_all")), project)
    assert " --threads 1 " in out and " --threads 2 " not in out  # the cpu profile: one thread per job
    params, runs, cons = plan_preset(project, "ci")

    # DVC: the same DAG through its stages, in a fresh repository of the copy.
    dvc = BIN / "dvc"
    study_params = yaml.safe_load((project / "params.yaml").read_text())
    study_params["preset"] = "ci"
    (project / "params.yaml").write_text(yaml.safe_dump(study_params, sort_keys=False))
    shutil.copytree(ROOT / "study", project / "study", ignore=shutil.ignore_patterns("__pycache__"))
    run_command(["git", "init", "-q"], project)
    run_command([dvc, "init", "-q"], project)
    run_command([dvc, "config", "core.analytics", "false"], project)
    # the stages read the values set for a run against params.yaml as committed (study/stage.py)
    run_command(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "."], project)
    run_command(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "ci"], project)
    repro = run_command([dvc, "repro"], project)
    assert all(f"Running stage '{stage}'" in repro for stage in ("data", "train", "evaluate", "figures"))
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    assert set(lock["stages"]) == {"resolve", "data", "train", "evaluate", "figures"}
    assert lock["stages"]["train"]["params"]["results/params.resolved.yaml"]["run.preset"] == "ci"  # what ran
    # what the stages' jobs made, DVC holds job by job (versions/), the constructed datasets among them
    from study.versions import record_outs, records

    recorded = {out for path in records(project) for out in record_outs(project, path)[0]}
    assert {f"data/constructed/{c.name}.pt" for c in cons} <= recorded
    assert "up to date" in run_command([dvc, "status"], project)

    # Every job that ran (the targets aside) has a log, left it and said something in it.
    ran = job_stats(out + repro)
    assert (train_count(ran), ran["construct"]) == (len(runs), len(cons))
    assert (evaluate_count(ran), ran["merge_shards"]) == evaluate_jobs(params, runs)
    # (the zoo's figures wait for its weights file: tests/pipeline/test_zoo_jobs.py)
    assert {fig: ran[fig] for fig in params.figures if fig not in ZOO_FIGURES} == figure_jobs(params, runs)
    logs = re.findall(r"^\s+log: (\S+)$", out + repro, re.M)
    assert len(logs) == ran["total"] - sum(n for rule, n in ran.items() if rule in NOT_IN_CI_DAG)
    assert expected_logs(params, runs) <= set(logs)
    for log in logs:
        assert (project / log).stat().st_size > 0, f"{log} is empty"

    manifest = (project / "results/ci/figures/all").read_text().splitlines()
    figures = [line.split("\t")[0] for line in manifest if not line.startswith("#")]
    assert {Path(f).parent.name for f in figures} == set(params.figures) - set(ZOO_FIGURES)
    for fig in figures:
        assert (project / fig).stat().st_size > 1000
    plain = plain_runs(runs)
    assert sum("fig07_epochs" in f for f in figures) == 2 * len(
        {(r.dataset, r.config["model"], r.config["method"]) for r in plain})  # PNG and PDF per panel
    # figure 12: bars and examples, PNG and PDF, of the models trained on the constructed sets
    assert sum("fig12_features" in f for f in figures) == 4 * len({c.source_run.dataset for c in cons}) > 0
    classwise = (project / "results/ci/tables/classwise.csv").read_text()
    rows = sum(get_dataset_info(r.dataset).num_classes * len(r.evaluations) * len(r.checkpoints) for r in runs)
    assert classwise.count("\n") == 1 + rows  # header + runs x evaluations x checkpoints x classes
    # the PNGs again, copied, in the folder DVC draws as image plots; `dvc plots show` renders
    # every one without an error (results/ci/figures' PDFs and tables would be errors)
    pngs = [f for f in figures if f.endswith(".png")]
    images = sorted(p.relative_to(project / "results/ci/figure_images").as_posix()
                    for p in (project / "results/ci/figure_images").rglob("*") if p.is_file())
    assert images == sorted(Path(f).relative_to("results/ci/figures").as_posix() for f in pngs)
    copies = project / "results/ci/figure_images"
    assert all((project / f).read_bytes() == (copies / Path(f).relative_to("results/ci/figures")).read_bytes()
               for f in pngs)
    shown_plots = run_command([dvc, "plots", "show", "--out", project / "plots"], project)
    assert "error" not in shown_plots.lower(), shown_plots
    drawn = sorted(p.name for p in (project / "plots").rglob("*.png"))
    assert drawn == sorted("workspace_results_ci_figure_images_" + i.replace("/", "_") for i in images)
    # the headline metrics: a file per model (a row of `dvc metrics show`), an entry per evaluation
    headline = {(f"results/ci/metrics/{r.dataset}__{r.config['model']}__{r.config['method']}.json", e)
                for r in plain for e in r.evaluations}
    metrics = {(p.relative_to(project).as_posix(), e): m for p in (project / "results/ci/metrics").glob("*.json")
               for e, m in json.loads(p.read_text()).items()}
    assert headline <= set(metrics)
    # (an evaluation a check flagged is not counted: its numbers are null, `flagged` says so)
    assert all("flagged" in metrics[k] or 0 <= metrics[k]["worst"] <= metrics[k]["mean"] <= 1
               and metrics[k]["worst_class"] for k in headline)
    text = run_command([dvc, "metrics", "show", "--json"], project)  # (stdout and stderr: the JSON and nothing)
    shown, _ = json.JSONDecoder().raw_decode(text[text.index("{"):])
    shown = {(path, e): m for path, data in shown[""]["data"].items() for e, m in data["data"].items()}
    # (DVC leaves out the null numbers of a flagged evaluation)
    assert {k: shown[k] for k in headline} == {k: {f: v for f, v in metrics[k].items() if v is not None}
                                                for k in headline}
    table = run_command([dvc, "metrics", "show"], project)
    print(table, file=sys.stderr)  # the readable headline: a row per model
    assert all(path in table for path, _ in headline)
    assert len(list((project / "data/constructed").glob("d_*.pt"))) == len(cons)
    # the robustness suite on the runs of its groups: checks written down and none failed, one
    # row per (run, evaluation) in the attack table, corruptions per class
    _, checked, corrupted = robustness_runs(params, runs)
    for run in checked:
        for at in ("" if c == "last" else f"@{c}" for c in run.checkpoints):
            checks = json.loads((project / "results/evaluations" / run.run_id / f"checks{at}.json").read_text())
            assert checks["status"] in ("pass", "flag"), checks
    attacks = pd.read_csv(project / "results/ci/tables/attacks.csv")
    assert len(attacks) == sum(len(r.evaluations) * len(r.checkpoints) for r in checked)  # one row per record
    assert {e for e, n in evaluation_shards(params).items() if n > 1} & set(attacks["eval"]), "a sharded evaluation"
    corruptions = pd.read_csv(project / "results/ci/tables/corruptions.csv")
    assert set(corruptions["run_id"]) == {r.run_id for r in corrupted}
    # figure 13: every mitigation method of the preset, best checkpoint (and last where
    # planned), in the table beside the figure
    mitigation = [r for r in runs if is_mitigation(r)]
    for dataset, model in {(r.dataset, r.config["model"]) for r in mitigation}:
        fig13 = pd.read_csv(project / f"results/ci/figures/fig13_mitigation/{dataset}__{model}__all.csv")
        panel = [r for r in mitigation if (r.dataset, r.config["model"]) == (dataset, model)]
        assert {r.config["method"] for r in panel} == set(fig13[fig13["checkpoint"] == "best"]["method"])
        # the study's checkpoints only: `published` (chosen on the test set) is no part of figure 13
        for run in panel:
            drawn = set(fig13[fig13["method"] == run.config["method"]]["checkpoint"])
            assert drawn == set(run.checkpoints) & set(STUDY_CHECKPOINTS)
        published = pd.read_csv(project / "results/ci/tables/classwise.csv").query("checkpoint == 'published'")
        assert set(published["run_id"]) == {r.run_id for r in mitigation if "published" in r.checkpoints} != set()
    for run in runs:
        run_dir = project / "results/runs" / run.run_id
        assert {"config.json", "checkpoint.pt", "model.pt", "epochs.csv", "meta.json"} <= {
            p.name for p in run_dir.iterdir()}

    # Snakemake, run again, finds everything that DVC's stages made up to date: it makes only the
    # user's results/figures/all (the figures stage's target is the preset's own manifest)
    ran = job_stats(run_command(snakemake(), project))
    assert ran.get("selected_figures") == 1 and ran["total"] == 1, ran
    assert "Nothing to be done" in run_command(snakemake(), project)

    # A killed update is finished by the same command: an evaluation job and a figure job of an
    # update (--forcerun) killed with SIGKILL once running (their outputs removed), `--unlock`,
    # then the headline command remakes both files, and its summary names them.
    record = f"results/evaluations/{runs[0].run_id}/{runs[0].evaluations[0]}.parquet"
    panel = next(f for f in figures if f.endswith(".png") and Path(f).parent.name not in DISCREPANCY_FIGURES)
    # (the panel first: a run whose target needs the tables remakes a missing record on its way)
    for target in (panel, record):
        _kill_once_running(snakemake("--cores", "1", "--forcerun", target, targets=(target,)), project, target)
        assert not (project / target).exists(), f"the kill left {target}"
        run_command(snakemake("--unlock"), project)
    remade = run_command(snakemake(), project)
    assert (project / record).is_file() and (project / panel).is_file(), remade
    summary = (project / "results/ci/run_summary.md").read_text()
    assert f"- remade: {record}" in summary and f"- remade: {panel}" in summary, summary
    assert "Nothing to be done" in run_command(snakemake(), project)

    # The price (study.cost) held against what the jobs measured: a report, not a timed assertion.
    record_property("summary", _cost_ratio_report(project))

    # The HTML report, with a caption per figure.
    run_command(snakemake("--report", "report.html"), project)
    report = (project / "report.html").read_text()
    assert "Wilson intervals" in report, "figure captions belong in the report"

    _each_preset_its_own_results(project, snakemake)

    # A changed robustness-evaluation setting makes the evaluations and the figures stale.
    study_params["robustness"]["corruptions"]["seed"] += 1
    (project / "params.yaml").write_text(yaml.safe_dump(study_params, sort_keys=False))
    stale = set(re.findall(r"^(\w+):$", run_command([dvc, "status"], project), re.M))
    assert "resolve" in stale and not stale & {"data", "train"}  # (resolve reads the whole of params.yaml)
    # the resolved params carry it to the stages that declare the robustness section, and to no other
    run_command([dvc, "repro", "resolve"], project)
    stale = set(re.findall(r"^(\w+):$", run_command([dvc, "status"], project), re.M))
    assert stale == {"evaluate", "figures"}


def _each_preset_its_own_results(project: Path, snakemake) -> None:
    """After the ci preset's run, every other preset (workflow/presets/) plans its own training
    jobs (those of its plan not trained yet: runs are shared, keyed by their configuration) and
    every panel of its own figures, none of which the ci preset's files stand for; a preset that
    shares the ci preset's runs makes only its own summary files, its run summary counts its own
    figures, and the user's `results/figures/all` follows the preset selected."""
    trained = {p.parent.name for p in (project / "results/runs").glob("*/model.pt")}
    presets = sorted(p.stem for p in (project / "workflow/presets").glob("*.yaml"))
    assert "ci" in presets and len(presets) > 1
    for preset in (p for p in presets if p != "ci"):
        dag = project_dry_run(["--cores", "2", "--config", f"preset={preset}", "--", "results/figures/all"], project)
        params, runs, _ = plan_preset(project, preset)
        assert train_count(dag.counts) == len({r.run_id for r in runs} - trained) > 0, preset
        drawn = figure_jobs(params, runs)
        assert {fig: dag.counts.get(fig, 0) for fig in drawn} == drawn, preset
        assert dag.counts["figures_all"] == dag.counts["selected_figures"] == 1, preset
        summaries = {f for f in dag_outputs(dag) if f.startswith("results/") and not f.startswith(
            ("results/runs/", "results/evaluations/", "results/logs/", "results/benchmarks/", "results/zoo/"))}
        assert all(f.startswith(f"results/{preset}/") for f in summaries - {"results/figures/all"}), preset

    # A preset that plans the ci preset's runs: nothing trained or evaluated again; its own tables,
    # figure and run summary; the ci preset's summary untouched.
    ci = yaml.safe_load((project / "workflow/presets/ci.yaml").read_text())
    fig01 = {**ci, "figures": ["fig01_classwise_standard"]}
    (project / "workflow/presets/ci_fig01.yaml").write_text(yaml.safe_dump(fig01))
    ci_summary = (project / "results/ci/run_summary.md").read_bytes()
    out = run_command([BIN / "snakemake", "--profile", "workflow/profiles/cpu", "--cores", "2", "--config",
                       "preset=ci_fig01", "--", "results/figures/all"], project)
    ran = job_stats(out)
    assert train_count(ran) == evaluate_count(ran) == 0 and ran["tables"] == ran["figures_all"] == 1, ran
    summary = (project / "results/ci_fig01/run_summary.md").read_text()
    assert "Made: 1 of 1 figures complete" in summary, summary
    assert (project / "results/ci/run_summary.md").read_bytes() == ci_summary
    assert (project / "results/figures/all").read_text().startswith("# the figures of preset ci_fig01 ")
    assert (project / "results/ci_fig01/tables/classwise.csv").is_file()
    # back to the ci preset: its figures are all made; only the user's manifest is made again
    out = run_command(snakemake(), project)
    ran = job_stats(out)
    assert ran.get("selected_figures") == 1 and ran["total"] == 1, out[-2000:]
    assert (project / "results/figures/all").read_text().startswith("# the figures of preset ci ")
    (project / "workflow/presets/ci_fig01.yaml").unlink()  # (workflow/presets: a dep of every DVC stage)


def _kill_once_running(argv: list, project: Path, target: str) -> None:
    """Start Snakemake on `argv` in a process group of its own, and SIGKILL the group once the
    job that makes `target` runs: its log written after the start, Snakemake having removed the
    job's outputs first (a kill at a moment no timing chooses)."""
    start = time.time()
    proc = subprocess.Popen(argv, cwd=project, env=command_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    log = None
    try:
        while time.time() - start < 300 and proc.poll() is None:
            # (the shared jobs' logs, results/logs, and the preset's summary jobs', results/ci/logs)
            logs = [p for p in (project / "results").rglob("*.log") if p.stat().st_mtime > start]
            log = next((p for p in logs if Path(target).stem.split("@")[0] in p.as_posix()), None)
            if log is not None and not (project / target).exists():
                break
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert log is not None, f"the job of {target} never started: {proc.stderr.read()[-2000:]}"


def _cost_ratio_report(project: Path) -> str:
    """The ci plan's price beside the benchmark files its jobs left: estimate / measured per
    rule and in total, written to results/cost_ratio.md and returned (the run's summary prints it:
    tests/pipeline/conftest.py). Asserted are only that every priced job left its benchmark file
    and that every ratio is finite and positive."""
    from study.cost import AUTOATTACK_ROW, THROUGHPUT_TABLE, load_throughput, plan_jobs, ratio_report

    params, runs, _ = plan_preset(project, "ci")
    # (the zoo's jobs wait for its weights: no part of the ci DAG, tests/pipeline/test_zoo_jobs.py);
    # root: AutoAttack's cascade priced from the run's own records (broken_by), as `study plan --cost` does
    jobs = plan_jobs(params, runs, [], load_throughput(project / THROUGHPUT_TABLE), root=project)
    assert any(j.autoattack and "this run's records" in j.cascade[0] for j in jobs), "AutoAttack not priced by records"
    assert jobs, "the ci plan prices no job"
    missing = [j.benchmark for j in jobs if not (project / j.benchmark).is_file()]
    assert not missing, f"priced jobs without a benchmark file: {missing[:5]}"
    text, ratios = ratio_report(jobs, project, "cpu-2core")
    (project / "results/cost_ratio.md").write_text(text)
    assert ratios and all(math.isfinite(r) and r > 0 for r in ratios.values()), ratios
    assert AUTOATTACK_ROW in ratios, text  # the cascade rule's own ratio
    return text
