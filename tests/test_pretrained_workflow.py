"""The pretrained-model rules in the real Snakemake DAG (ci preset, copied project)."""

import subprocess

import pytest
import yaml
from test_workflow import BIN, _copy_project, _env, _job_counts, _plan, _run

ENABLED = "preset=ci_pretrained"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The project plus a preset: ci with the pretrained models on (as the paper has them)."""
    project = _copy_project(tmp_path_factory.mktemp("project"))
    presets = project / "workflow" / "presets"
    overlay = yaml.safe_load((presets / "ci.yaml").read_text())
    overlay["pretrained"] = {"enabled": True, "weights_dir": "/placed/weights", "per_class": 2}
    (presets / "ci_pretrained.yaml").write_text(yaml.safe_dump(overlay))
    return project


def test_pretrained_jobs_only_when_enabled(project):
    off = _run([BIN / "snakemake", "-n", "--cores", "2", "--config", "preset=ci", "--", "all"], project)
    assert "evaluate_pretrained" not in _job_counts(off)
    on = _run([BIN / "snakemake", "-n", "-p", "--cores", "2", "--config", ENABLED, "--", "all"],
              project)
    counts = _job_counts(on)
    pretrained = _plan(project, "ci_pretrained")[0]["pretrained"]
    models_x_evaluations = len(pretrained["models"]) * len(pretrained["evaluations"])
    assert counts["evaluate_pretrained"] == models_x_evaluations > 1
    assert counts["prepare_imagenet"] == counts["pretrained_tables"] == 1
    # ruleorder: imagenet-val.pt is made by prepare_imagenet, not by the generic rule too.
    assert counts["prepare"] == _job_counts(off)["prepare"]
    assert "study evaluate-pretrained --model Salman2020Do_R50 --weights-dir /placed/weights" in on
    assert '"per_class": 2' in on and "results/pretrained/evaluations/resnet50_torchvision/pgd20_linf4.parquet" in on
    assert '"eps": 0.01568' in on  # 4/255, RobustBench's ImageNet Linf budget


def test_missing_imagenet_fails_with_placement_instructions(project):
    proc = subprocess.run(
        [BIN / "snakemake", "--cores", "1", "--config", ENABLED, "--", "data/prepared/imagenet-val.pt"],
        cwd=project, env=_env(), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0
    log = (project / "results/logs/prepare/imagenet-val.log").read_text()
    assert "data/raw/imagenet/val/<wnid>/<file>.JPEG" in log
