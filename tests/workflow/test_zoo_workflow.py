"""The model zoo in the real Snakemake DAG (copied project). The paper preset: one zoo-run job
per zoo entry (RobustBench's and torchvision's alike) and one job writing each entry's records
of each evaluation; ImageNet prepared once, with the zoo's options. The ci preset: its entry
appears only once its weights file is placed; then `study zoo-run` and the ordinary evaluate
rule evaluate it class-wise on a few synthetic images, and its tables and figures follow."""

import shutil
import subprocess

from helpers.workflow import BIN, command_env, plan_preset, project_dry_run


def test_paper_zoo_dag_has_one_job_per_model_and_evaluation(zoo_project):
    project, _ = zoo_project
    # ImageNet placed (an empty image folder will do for planning): its entries are in the plan
    # (without it they are left out: tests/workflow/test_headline.py)
    placed = project / "data/raw/imagenet/val"
    placed.mkdir(parents=True)
    try:
        dag = project_dry_run(["--cores", "8", "zoo_all"], project)  # the paper preset
        params = plan_preset(project, "paper")[0]
        from study.config.zoo import plan_zoo

        runs = plan_zoo(params, root=project)
    finally:
        shutil.rmtree(project / "data/raw/imagenet")
    zoo = params.zoo
    assert len(runs) == len(zoo.models) and {r.config["method"] for r in runs} == {"robustbench", "torchvision"}
    counts = dag.counts
    assert counts["zoo_run"] == len(zoo.models) and counts["prepare_imagenet"] == 1
    writers = {}
    for job in dag.jobs:
        for path in job.output:
            writers.setdefault(path, []).append(job.rule)
    sharded = 0
    for run in runs:
        assert writers[f"results/zoo/runs/{run.run_id}/model.pt"] == ["zoo_run"]
        for ev in run.evaluations:
            shards = params.evaluations[ev].shards
            sharded += shards if shards > 1 else 0
            rules = writers[f"results/zoo/evaluations/{run.run_id}/{ev}.parquet"]
            assert len(rules) == 1 and (rules[0] == "merge_shards" if shards > 1 else rules[0].startswith("evaluate_"))
    assert counts["evaluate_shard"] == sharded
    # ImageNet is made by prepare_imagenet only (ruleorder), with the zoo's subset options
    assert writers["data/prepared/imagenet-val.pt"] == ["prepare_imagenet"]
    (prepare,) = dag.of("prepare_imagenet")
    assert f'"per_class": {zoo.imagenet.per_class}' in prepare.shell
    # torchvision's ResNet-50: its zoo-run names the source and the file in the weights folder
    tv = next(m for m in zoo.models if m.source == "torchvision")
    command = next(j.shell for j in dag.of("zoo_run") if f'"file": "{tv.file}"' in j.shell)
    assert '"source": "torchvision"' in command and "zoo-imagenet-Linf-resnet50" in command
    assert any('"eps": 0.01568' in j.shell for j in dag.jobs)  # 4/255, RobustBench's ImageNet Linf budget


def test_missing_imagenet_fails_with_placement_instructions(zoo_project):
    project, _ = zoo_project
    proc = subprocess.run(
        [BIN / "snakemake", "--cores", "1", "--config", "preset=ci", "--", "data/prepared/imagenet-val.pt"],
        cwd=project, env=command_env(), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0
    log = (project / "results/logs/prepare/imagenet-val.log").read_text()
    assert "data/raw/imagenet/val/<wnid>/<file>.JPEG" in log
