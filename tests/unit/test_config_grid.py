"""Per-dataset settings, train grids and multi-dataset experiment groups."""

import pytest
from helpers.workflow import ROOT

from study.config import ConfigError, load_params, plan_runs, resolve_evaluation


def _only(group: str) -> dict:
    """The robustness suite of a study whose one experiment group is `group` (the suite names
    the groups it reads, and an unknown one is refused)."""
    return {"groups": [group], "checks": {"groups": [group]}, "corruptions": {"groups": [group]}}


def _load(preset="ci", **overrides):
    return load_params(ROOT / "params.yaml", {"preset": preset, **overrides},
                       presets_dir=ROOT / "workflow/presets", schema_path=ROOT / "workflow/schemas/params.schema.yaml")


def test_existing_run_ids_are_unchanged():
    # Recorded with the code before per-dataset settings and grids existed, when the ci preset's
    # synthetic images were 32 px (the image size is part of a run's config, hence of its id).
    # pgd_at's id changed once since (aa4430e6 before): its step forwards the clean batch after
    # the update, as CFA's train_epoch does (adversary.bn_stats, docs/methods.md).
    ci = {r.run_id for r in plan_runs(_load("ci", data={"synthetic": {"image_size": 32}}))}
    assert {"synthetic-small_cnn-standard-sgd0.05-step-wd0.0005-e2-s0-d93b928d",
            "synthetic-small_cnn-pgd_at-sgd0.05-step-wd0.0005-e2-s0-0cc424dc"} <= ci
    paper = {r.run_id for r in plan_runs(_load("paper"))}
    assert "cifar10-preact_resnet18-standard-sgd0.1-step-wd0.0005-e200-s0-02a32d46" in paper


def test_mnist_gets_its_own_attack_budget_and_evaluation():
    params = _load("paper")
    runs = plan_runs(params)
    mnist_at = next(r for r in runs if r.dataset == "mnist" and r.config["method"] == "pgd_at")
    adv = mnist_at.config["method_config"]["adversary"]
    assert (adv["eps"], adv["alpha"], adv["steps"]) == (0.3, 0.01, 40)
    assert mnist_at.evaluations == ["clean", "pgd40"]
    assert mnist_at.config["epoch_eval"]["attack"]["eps"] == 0.3
    assert mnist_at.config["augment"] == {"crop_padding": 0, "flip": False}
    cifar_at = next(r for r in runs if r.dataset == "cifar10" and r.config["method"] == "pgd_at")
    assert cifar_at.config["method_config"]["adversary"]["eps"] == pytest.approx(8 / 255)
    assert cifar_at.evaluations == params.evaluate.default == ["clean", "pgd20", "autoattack", "square"]
    ev = resolve_evaluation(params, "pgd40", dataset="mnist")
    assert (ev["eps"], ev["steps"], ev["name"]) == (0.3, 40, "pgd40")
    assert resolve_evaluation(params, "pgd10", dataset="mnist")["eps"] == 0.3
    assert resolve_evaluation(params, "pgd10")["eps"] == pytest.approx(8 / 255)
    with pytest.raises(ConfigError, match="unknown evaluation 'pgd40'"):
        resolve_evaluation(params, "pgd40", dataset="cifar10")


def test_optimization_grid_expands_every_setting():
    runs = [r for r in plan_runs(_load("paper")) if "optimization" in r.groups]
    settings = {(r.config["optimizer"]["name"], r.config["schedule"]["name"], r.config["optimizer"]["weight_decay"])
                for r in runs}
    assert len(settings) == 2 * 2 * 3
    assert len(runs) == 12 * 2 * 3  # settings x methods x seeds
    adam = next(r.config["optimizer"] for r in runs if r.config["optimizer"]["name"] == "adam")
    assert adam["lr"] == 0.001 and "momentum" not in adam and "nesterov" not in adam
    sgd = next(r for r in runs if r.config["optimizer"]["name"] == "sgd" and r.config["schedule"]["name"] == "step"
               and r.config["optimizer"]["weight_decay"] == 5e-4)
    assert "baseline" in sgd.groups  # the grid's default cell is the baseline's run, planned once


def test_grid_mapping_values_merge_and_later_keys_win():
    group = {"group": "g", "dataset": "synthetic", "models": ["small_cnn"], "methods": ["standard"], "seeds": [0],
             "grid": {"optimizer": [{"name": "adam", "lr": 0.01}], "optimizer.lr": [0.5, 0.25]}}
    runs = plan_runs(_load("ci", experiments=[group], features=None, robustness=_only("g")))  # no feature sources
    assert [r.config["optimizer"]["lr"] for r in runs] == [0.5, 0.25]
    assert {r.config["optimizer"]["name"] for r in runs} == {"adam"}


def test_group_over_several_datasets():
    group = {"group": "d", "datasets": ["synthetic", "mnist"], "models": ["small_cnn"], "methods": ["pgd_at"],
             "seeds": [0]}
    runs = plan_runs(_load("ci", experiments=[group], features=None, robustness=_only("d")))  # no feature sources
    assert [r.dataset for r in runs] == ["synthetic", "mnist"]
    assert runs[1].config["method_config"]["adversary"]["steps"] == 40


@pytest.mark.parametrize("override, message", [
    ({"per_dataset": {"mnist42": {"train": {"epochs": 1}}}}, "per_dataset: unknown dataset 'mnist42'"),
    ({"per_dataset": {"mnist": {"evaluations": {"pgd99": {"eps": 0.1}}}}}, "per_dataset.mnist"),
    ({"per_dataset": {"mnist": {"methods": {"pgd_at": {"adversary": {"steps": -1}}}}}}, "per_dataset.mnist"),
    ({"experiments": [{"group": "g", "dataset": "synthetic", "models": ["small_cnn"], "methods": ["standard"],
                       "seeds": [0], "grid": {"optimizer.lr": []}}]}, "grid"),
    ({"experiments": [{"group": "g", "dataset": "synthetic", "datasets": ["mnist"], "models": ["small_cnn"],
                       "methods": ["standard"], "seeds": [0]}]}, "experiments.0"),
])
def test_bad_per_dataset_and_grid_values_are_named(override, message):
    with pytest.raises(ConfigError, match=message):
        _load("ci", **override)
