"""Cluster scale: every job that runs a model asks for a GPU, memory and time that grow with the
model and the data, and the paper preset's dry run lists the whole grid."""

import ast
import re

import pytest
from helpers.groups import SHARED_FIXTURE_GROUPS
from helpers.workflow import ROOT, TRAIN_RULES, evaluate_count

from study.config import ConfigError
from study.config.evaluations import AutoAttackEvaluation, CleanEvaluation, PgdEvaluation
from study.config.spec import EvaluationSpec
from study.config.types import RunConfig, parse
from study.resources import evaluate_minutes, mem_mb, train_minutes
from study.workload import attack_steps

# `study` subcommands that load or train a model; their rules must declare gpu, mem_mb, runtime.
MODEL_COMMAND = re.compile(r"study (train|evaluate[\w-]*|check|corruptions|construct)\b")


def test_every_model_job_declares_gpu_memory_and_time(paper_dry_run, request):
    # make test (--dist loadgroup) runs the tests of the costly dry run on one worker
    assert [m.args for m in request.node.iter_markers("xdist_group")] == [("paper_dag",)]
    model_jobs = [j for j in paper_dry_run.jobs if MODEL_COMMAND.match(j.shell)]
    counts = paper_dry_run.counts
    model_rules = (*TRAIN_RULES, "check", "corruptions", "construct")
    assert len(model_jobs) == sum(counts.get(rule, 0) for rule in model_rules) + evaluate_count(counts) > 0
    for job in model_jobs:
        assert job.resources.get("gpu") == 1 and {"mem_mb", "runtime"} <= set(job.resources), (job.rule, job.shell)


def test_each_shared_fixture_group_names_a_fixture_of_its_module():
    """A renamed or moved fixture would silently lose its group (and be computed on both workers).
    A key is <module>.<fixture>: a test module's own fixture, or `conftest.` for a conftest's."""
    tests = ROOT / "tests"
    for where in SHARED_FIXTURE_GROUPS:
        module, name = where.split(".")
        files = sorted(tests.rglob(f"{module}.py"))
        assert files, f"{where}: no module {module}.py under tests/"
        fixtures = {node.name for f in files for node in ast.walk(ast.parse(f.read_text()))
                    if isinstance(node, ast.FunctionDef)
                    and any("fixture" in ast.unparse(d) for d in node.decorator_list)}
        assert name in fixtures, where


def _runtime(dag, rule: str, needle: str) -> int:
    (job,) = [j for j in dag.of(rule) if needle in j.wildcards.get("run_id", "")]
    return int(job.resources["runtime"])


def test_paper_runtime_grows_with_model_data_and_attack(paper_dry_run):
    out = paper_dry_run
    std = _runtime(out, "train", "cifar10-resnet18-standard-sgd0.1-step-wd0.0005-e200-s0")
    at = _runtime(out, "train", "cifar10-resnet18-pgd_at-sgd0.1-step-wd0.0005-e200-s0")
    big = _runtime(out, "train", "cifar10-resnet50-standard-sgd0.1-step-wd0.0005-e200-s0")
    tiny = _runtime(out, "train", "tinyimagenet-resnet18-standard-sgd0.1-step-wd0.0005-e200-s0")
    assert std < big and std < at and std < tiny


def _cfg(model="resnet18", dataset="cifar10", steps=0, per_class=None):
    """A complete run config (as `study plan` writes it), PGD-AT with `steps` steps or standard; typed."""
    return parse(RunConfig, _raw(model, dataset, steps, per_class), "run config")


def _raw(model="resnet18", dataset="cifar10", steps=0, per_class=None):
    adversary = {"eps": 8 / 255, "alpha": 2 / 255, "steps": steps} if steps else None
    return {"dataset": dataset, "data_variant": "official", "train_per_class": per_class, "model": model,
            "method": "at" if steps else "standard", "method_config": {"adversary": adversary},
            "optimizer": {"name": "sgd", "lr": 0.1, "weight_decay": 5e-4}, "schedule": {"name": "step"},
            "epochs": 10, "batch_size": 128, "epoch_eval": {"per_class": 10}, "seed": 0}


PGD20 = PgdEvaluation(type="pgd", norm="linf", eps=8 / 255, alpha=2 / 255, steps=20)
CLEAN = CleanEvaluation(type="clean")


def test_estimates_scale():
    assert train_minutes(_cfg(steps=10)) > train_minutes(_cfg())
    assert train_minutes(_cfg(per_class=100)) <= train_minutes(_cfg())
    assert evaluate_minutes(_cfg("wrn_28_10"), PGD20) > evaluate_minutes(_cfg("wrn_28_10"), CLEAN)
    # a resolved evaluation (named, as the evaluate jobs get it) reads alike
    named = EvaluationSpec.parse({**PGD20.model_dump(), "name": "pgd20"}).config
    assert evaluate_minutes(_cfg(), named) == evaluate_minutes(_cfg(), PGD20)
    standard = AutoAttackEvaluation(type="autoattack", norm="linf", eps=8 / 255)
    assert attack_steps(standard) == 100 + 900 + 900 + 5000 // 3
    assert attack_steps(PGD20.model_copy(update={"restarts": 2})) == 40
    assert mem_mb(_cfg(dataset="cifar10"), floor=0) > mem_mb(_cfg(dataset="mnist"), floor=0)
    # a model without a row of the table never reaches a price: the run config's type refuses it
    with pytest.raises(ConfigError, match="^run config: model: 'alexnet' is not one of small_cnn, "):
        _cfg(model="alexnet")
