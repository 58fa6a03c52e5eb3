"""The zoo's jobs for real in the ci32 preset: placed weights give records, tables and figures;
missing weights fail the job with the file named."""

import subprocess

import pandas as pd
import yaml
from helpers.workflow import BIN, command_env, evaluate_count, evaluate_jobs, plan_preset, project_dry_run, run_command
from helpers.zoo import ENTRY
from helpers.zoo_workflow import PRESET

from study.evaluate.records import read_records

ZOO_FIGURES = ("fig15_zoo_classwise", "fig16_zoo_ranks", "fig17_zoo_gap")


def test_zoo_jobs_with_placed_weights_then_records_tables_figures(zoo_project, monkeypatch):
    """(Without the file, the ci DAG has no zoo job: tests/workflow/test_workflow.py.)"""
    project, weights = zoo_project
    monkeypatch.setenv("STUDY_WEIGHTS_DIR", str(weights))  # the weights folder (or zoo.weights_dir)
    config = ["--config", f"preset={PRESET}"]
    on = project_dry_run(["--cores", "2", *config, "--", "all"], project).counts
    assert on["zoo_run"] == 1 and on["zoo_tables"] == 1 and all(on[f] == 1 for f in ZOO_FIGURES)
    params, runs, _ = plan_preset(project, PRESET)
    # a zoo entry is one evaluate job (all its evaluations), beside those of the trained runs
    assert evaluate_count(on) == evaluate_jobs(params, runs)[0] + len(params.zoo.models)
    # Run the zoo's own part (figure 16 also waits for the study's class-wise table: dry run above).
    run_id = f"zoo-{ENTRY.dataset}-{ENTRY.threat_model}-{ENTRY.name}-on-synthetic"
    stem = f"results/{PRESET}/figures/{{}}/synthetic__Linf.png"  # the preset's own (workflow/rules/common.smk)
    run_command([BIN / "snakemake", "--cores", "2", *config, "--", f"results/{PRESET}/zoo/tables/robustbench.csv",
                 stem.format(ZOO_FIGURES[0]), stem.format(ZOO_FIGURES[2])], project)
    # the zoo's runs and evaluations are its own (results/zoo), never the trained runs' folders
    records, meta = read_records(project / f"results/zoo/evaluations/{run_id}/zoo_pgd.parquet")
    assert (project / f"results/zoo/runs/{run_id}/model.pt").is_file()
    assert (project / f"results/zoo/logs/evaluate/{run_id}").is_dir()
    assert not any((project / "results" / d / run_id).exists() for d in ("runs", "evaluations", "logs/evaluate"))
    assert len(records) == 2 * 10 and meta["run_config"]["zoo"]["name"] == ENTRY.name  # 2 images per class
    classwise = pd.read_csv(project / f"results/{PRESET}/zoo/tables/classwise.csv")
    assert set(classwise["eval"]) == {"zoo_clean", "zoo_pgd"} and classwise["class"].nunique() == 10
    table = pd.read_csv(project / f"results/{PRESET}/zoo/tables/robustbench.csv")
    assert table["reported_clean_pct"].notna().all() and not table["flag"].any()


def test_missing_zoo_weights_fail_the_job_with_the_file_named(zoo_project, tmp_path, monkeypatch):
    project, _ = zoo_project
    # require_weights off: the entry is in the DAG without its file; the dry run works
    monkeypatch.setenv("STUDY_WEIGHTS_DIR", str(tmp_path))
    presets = project / "workflow" / "presets"
    overlay = yaml.safe_load((presets / f"{PRESET}.yaml").read_text())
    overlay["zoo"]["require_weights"] = False
    (presets / "ci_zoo.yaml").write_text(yaml.safe_dump(overlay))
    config = ["--config", "preset=ci_zoo"]
    target = f"results/zoo/runs/zoo-cifar10-Linf-{ENTRY.name}-on-synthetic/model.pt"
    proc = subprocess.run([BIN / "snakemake", "--cores", "1", *config, "--", target], cwd=project, env=command_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    log = (project / f"results/logs/zoo/zoo-cifar10-Linf-{ENTRY.name}-on-synthetic.log").read_text()
    error = [line for line in log.splitlines() if line.startswith("study zoo-run: error:")]
    assert len(error) == 1 and str(tmp_path / "cifar10/Linf/Wong2020Fast.pt") in error[0]
