"""The demo preset spends its budget as docs/methods.md ("The demo's CPU recipe") says: the
standard and PGD-AT CIFAR-10 models on the whole training set, evaluated on at least 100 test
images per class, and the fairness methods fine-tuning that very PGD-AT model. Every expectation
is read from the preset and the plan, not typed in."""

from __future__ import annotations

import pytest
from helpers.params import changed

from study.config import load_params, plan_runs, resolve_evaluation
from study.config.plan import run_config

#: the targets' evaluation floor: at least 100 test images per class
MIN_TEST_PER_CLASS = 100
#: the baseline models train on at least half of CIFAR-10's 50,000 training images
MIN_TRAIN_SHARE = 0.5


@pytest.fixture(scope="module")
def demo():
    params = load_params(overrides={"preset": "demo"})
    return params, plan_runs(params)


def _group(params, name):
    return params.group(name)


def _baseline_runs(params, runs):
    return {r.config["method"]: r for r in runs if "baseline" in r.groups and r.dataset == "cifar10"}


def test_the_baseline_models_train_on_most_of_the_training_set(demo):
    from study.data.registry import DATASETS

    params, runs = demo
    baseline = _baseline_runs(params, runs)
    assert set(baseline) == set(_group(params, "baseline").methods) == {"standard", "pgd_at"}
    for run in baseline.values():
        per_class = run.config["train_per_class"]
        images = DATASETS["cifar10"].train_size if per_class is None else 10 * per_class
        assert images >= MIN_TRAIN_SHARE * DATASETS["cifar10"].train_size, run.run_id
        assert run.config["schedule"]["name"] == "cyclic"


def test_the_targets_evaluations_use_at_least_100_test_images_per_class(demo):
    params, runs = demo
    for run in _baseline_runs(params, runs).values():
        for name in ("clean", "pgd20"):
            assert name in run.evaluations
            ev = resolve_evaluation(params, name, dataset="cifar10")
            assert ev["test_per_class"] >= MIN_TEST_PER_CLASS, (name, ev)


def test_the_fairness_methods_fine_tune_the_baselines_pgd_at_model(demo):
    params, runs = demo
    parent = _baseline_runs(params, runs)["pgd_at"]
    group = _group(params, "mitigation")
    mitigation = [r for r in runs if "mitigation" in r.groups]
    assert sorted(r.config["method"] for r in mitigation) == sorted(group.methods)
    for run in mitigation:
        # the child's config names the parent's run id: the very model of figures 2 and 7
        assert run.config["init_from"] == parent.run_id
        assert run.checkpoints == ["best"] and "validation" in run.config
    # the parent trains once, as the baseline's run, and stays out of figure 13's runs
    assert "mitigation" not in parent.groups and "mitigation" not in parent.kinds


def test_a_parent_the_group_does_not_list_is_trained_but_not_compared(demo):
    params, runs = demo
    group = _group(params, "mitigation")
    child = next(r for r in runs if "mitigation" in r.groups)
    parent_cfg = run_config(params, group, child.config["model"], "pgd_at", 0, dataset="cifar10")
    by_id = {r.run_id: r for r in runs}
    # the parent computed in the mitigation group's context is the baseline's run, not a copy
    assert child.config["init_from"] in by_id
    assert by_id[child.config["init_from"]].config == parent_cfg
    # with the baseline group gone, the parent is still planned (it must be trained) but in no group
    robustness = params.set_fields()["robustness"]
    alone = changed(params, experiments=[group.model_dump(exclude_unset=True)], features=None,
                    robustness={**robustness, "groups": [group.group],
                                "corruptions": {**robustness["corruptions"], "groups": [group.group]}})
    planned = {r.run_id: r for r in plan_runs(alone)}
    assert planned[child.config["init_from"]].groups == []
    assert planned[child.config["init_from"]].evaluations == []
