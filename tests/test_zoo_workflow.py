"""The model zoo in the real Snakemake DAG (copied project). The paper preset: one zoo-run job
per zoo entry (RobustBench's and torchvision's alike) and one job writing each entry's records
of each evaluation; ImageNet prepared once, with the zoo's options. The ci preset: its entry
appears only once its weights file is placed; then `study zoo-run` and the ordinary evaluate
rule evaluate it class-wise on a few synthetic images, and its tables and figures follow."""

import re
import shutil
import subprocess

import pandas as pd
import pytest
import yaml
from test_workflow import BIN, _copy_project, _env, _evaluate_count, _evaluate_jobs, _job_counts, _plan, _run
from test_zoo import ENTRY, place_random_weights

from study.evaluate.records import read_records

ZOO_FIGURES = ("fig15_zoo_classwise", "fig16_zoo_ranks", "fig17_zoo_gap")


#: The ci preset with 32 px synthetic images: RobustBench's CIFAR architectures take no other size.
PRESET = "ci32"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    project = _copy_project(tmp_path_factory.mktemp("project"))
    presets = project / "workflow" / "presets"
    overlay = yaml.safe_load((presets / "ci.yaml").read_text())
    overlay["data"]["synthetic"]["image_size"] = 32
    (presets / f"{PRESET}.yaml").write_text(yaml.safe_dump(overlay))
    weights = tmp_path_factory.mktemp("weights")
    place_random_weights(weights)
    return project, weights


@pytest.mark.slow
def test_zoo_jobs_with_placed_weights_then_records_tables_figures(project, monkeypatch):
    """(Without the file, the ci DAG has no zoo job: tests/test_workflow.py.)"""
    project, weights = project
    monkeypatch.setenv("STUDY_WEIGHTS_DIR", str(weights))  # the weights folder (or zoo.weights_dir)
    config = ["--config", f"preset={PRESET}"]
    on = _job_counts(_run([BIN / "snakemake", "-n", "--cores", "2", *config, "--", "all"], project))
    assert on["zoo_run"] == 1 and on["zoo_tables"] == 1 and all(on[f] == 1 for f in ZOO_FIGURES)
    params, runs, _ = _plan(project, PRESET)
    # a zoo entry is one evaluate job (all its evaluations), beside those of the trained runs
    assert _evaluate_count(on) == _evaluate_jobs(params, runs)[0] + len(params["zoo"]["models"])
    # Run the zoo's own part (figure 16 also waits for the study's class-wise table: dry run above).
    run_id = f"zoo-{ENTRY.dataset}-{ENTRY.threat_model}-{ENTRY.name}-on-synthetic"
    stem = "results/figures/{}/synthetic__Linf.png"
    _run([BIN / "snakemake", "--cores", "2", *config, "--", "results/zoo/tables/robustbench.csv",
          stem.format(ZOO_FIGURES[0]), stem.format(ZOO_FIGURES[2])], project)
    # the zoo's runs and evaluations are its own (results/zoo), never the trained runs' folders
    records, meta = read_records(project / f"results/zoo/evaluations/{run_id}/zoo_pgd.parquet")
    assert (project / f"results/zoo/runs/{run_id}/model.pt").is_file()
    assert (project / f"results/zoo/logs/evaluate/{run_id}").is_dir()
    assert not any((project / "results" / d / run_id).exists() for d in ("runs", "evaluations", "logs/evaluate"))
    assert len(records) == 2 * 10 and meta["run_config"]["zoo"]["name"] == ENTRY.name  # 2 images per class
    classwise = pd.read_csv(project / "results/zoo/tables/classwise.csv")
    assert set(classwise["eval"]) == {"zoo_clean", "zoo_pgd"} and classwise["class"].nunique() == 10
    table = pd.read_csv(project / "results/zoo/tables/robustbench.csv")
    assert table["reported_clean_pct"].notna().all() and not table["flag"].any()


@pytest.mark.slow
def test_missing_zoo_weights_fail_the_job_with_the_file_named(project, tmp_path, monkeypatch):
    project, _ = project
    # require_weights off: the entry is in the DAG without its file; the dry run works
    monkeypatch.setenv("STUDY_WEIGHTS_DIR", str(tmp_path))
    presets = project / "workflow" / "presets"
    overlay = yaml.safe_load((presets / f"{PRESET}.yaml").read_text())
    overlay["zoo"]["require_weights"] = False
    (presets / "ci_zoo.yaml").write_text(yaml.safe_dump(overlay))
    config = ["--config", "preset=ci_zoo"]
    target = f"results/zoo/runs/zoo-cifar10-Linf-{ENTRY.name}-on-synthetic/model.pt"
    proc = subprocess.run([BIN / "snakemake", "--cores", "1", *config, "--", target], cwd=project, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    log = (project / f"results/logs/zoo/zoo-cifar10-Linf-{ENTRY.name}-on-synthetic.log").read_text()
    error = [line for line in log.splitlines() if line.startswith("study zoo-run: error:")]
    assert len(error) == 1 and str(tmp_path / "cifar10/Linf/Wong2020Fast.pt") in error[0]


def _outputs(dry_run: str) -> list[tuple[str, str]]:
    """(rule, output file) of every job of a dry run."""
    pairs = []
    for block in re.split(r"\n(?=\s*(?:local)?rule \w+:)", dry_run):
        rule = re.match(r"\s*(?:local)?rule (\w+):", block)
        outputs = re.search(r"^\s*output: (.*)$", block, re.M)
        if rule and outputs:
            pairs += [(rule.group(1), f.strip()) for f in outputs.group(1).split(",")]
    return pairs


def test_paper_zoo_dag_has_one_job_per_model_and_evaluation(project):
    project, _ = project
    # ImageNet placed (an empty image folder will do for planning): its entries are in the plan
    # (without it they are left out: tests/test_headline.py)
    placed = project / "data/raw/imagenet/val"
    placed.mkdir(parents=True)
    try:
        out = _run([BIN / "snakemake", "-n", "-p", "--cores", "8", "zoo_all"], project)  # the paper preset
        params = _plan(project, "paper")[0]
        from study.config.zoo import plan_zoo

        runs = plan_zoo(params, root=project)
    finally:
        shutil.rmtree(project / "data/raw/imagenet")
    zoo = params["zoo"]
    assert len(runs) == len(zoo["models"]) and {r.config["method"] for r in runs} == {"robustbench", "torchvision"}
    counts, outputs = _job_counts(out), _outputs(out)
    assert counts["zoo_run"] == len(zoo["models"]) and counts["prepare_imagenet"] == 1
    writers = {}
    for rule, path in outputs:
        writers.setdefault(path, []).append(rule)
    sharded = 0
    for run in runs:
        assert writers[f"results/zoo/runs/{run.run_id}/model.pt"] == ["zoo_run"]
        for ev in run.evaluations:
            shards = int(params["evaluations"][ev].get("shards", 1))
            sharded += shards if shards > 1 else 0
            rules = writers[f"results/zoo/evaluations/{run.run_id}/{ev}.parquet"]
            assert len(rules) == 1 and (rules[0] == "merge_shards" if shards > 1 else rules[0].startswith("evaluate_"))
    assert counts["evaluate_shard"] == sharded
    # ImageNet is made by prepare_imagenet only (ruleorder), with the zoo's subset options
    assert writers["data/prepared/imagenet-val.pt"] == ["prepare_imagenet"]
    assert f'"per_class": {zoo["imagenet"]["per_class"]}' in out
    # torchvision's ResNet-50: its zoo-run names the source and the file in the weights folder
    tv = next(m for m in zoo["models"] if m.get("source") == "torchvision")
    command = next(line for line in out.splitlines() if line.startswith("Shell command: study zoo-run")
                   and f'"file": "{tv["file"]}"' in line)
    assert '"source": "torchvision"' in command and "zoo-imagenet-Linf-resnet50" in command
    assert '"eps": 0.01568' in out  # 4/255, RobustBench's ImageNet Linf budget


def test_missing_imagenet_fails_with_placement_instructions(project):
    project, _ = project
    proc = subprocess.run(
        [BIN / "snakemake", "--cores", "1", "--config", "preset=ci", "--", "data/prepared/imagenet-val.pt"],
        cwd=project, env=_env(), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0
    log = (project / "results/logs/prepare/imagenet-val.log").read_text()
    assert "data/raw/imagenet/val/<wnid>/<file>.JPEG" in log
