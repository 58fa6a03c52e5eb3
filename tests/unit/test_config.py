import pytest
import yaml
from helpers.params import changed

from study.config import (
    ConfigError,
    ConfigSpec,
    coerce_overrides,
    deep_merge,
    load_params,
    parse_fraction,
    plan_runs,
    resolve_evaluation,
)


def _load(repo_root, overrides=None, base=None):
    return load_params(
        repo_root / "params.yaml",
        overrides or {},
        presets_dir=repo_root / "workflow/presets",
        schema_path=repo_root / "workflow/schemas/params.schema.yaml",
        base=base,
    )


def test_parse_fraction_accepts_paper_notation():
    assert parse_fraction("8/255") == pytest.approx(8 / 255)
    assert parse_fraction(" 2 / 255 ") == pytest.approx(2 / 255)
    assert parse_fraction(0.5) == 0.5
    assert parse_fraction("0.25") == 0.25
    with pytest.raises(ConfigError, match="8/x"):
        parse_fraction("8/x")
    with pytest.raises(ConfigError):
        parse_fraction(True)


def test_deep_merge_overlays_nested_keys_and_replaces_lists():
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    merged = deep_merge(base, {"a": {"c": [3]}, "e": 2})
    assert merged == {"a": {"b": 1, "c": [3]}, "d": 1, "e": 2}
    assert base["a"]["c"] == [1, 2], "the base must not be modified"


def test_paper_is_the_default_with_published_settings(repo_root):
    params = _load(repo_root)
    assert params.preset == "paper"
    runs = plan_runs(params)
    # baseline: every model x method (standard, PGD-AT, TRADES for figure 3) x seed of its group
    groups = {g.group: g for g in params.experiments}
    baseline = [r for r in runs if "baseline" in r.groups]
    assert len(baseline) == len(groups["baseline"].models) * len(groups["baseline"].methods) * len(
        groups["baseline"].seeds)
    assert {r.config["method"] for r in baseline} == {"standard", "pgd_at", "trades"}
    # mitigation: every method x seed (FRL's parent, `at`, is one of the methods)
    assert len([r for r in runs if "mitigation" in r.groups]) == len(groups["mitigation"].methods) * len(
        groups["mitigation"].seeds)
    cfg = runs[0].config
    assert cfg["epochs"] == 200 and cfg["batch_size"] == 128
    assert cfg["optimizer"] == {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4, "nesterov": False}
    pgd = next(r for r in runs if r.config["method"] == "pgd_at").config["method_config"]["adversary"]
    assert pgd["eps"] == pytest.approx(8 / 255) and pgd["alpha"] == pytest.approx(2 / 255) and pgd["steps"] == 10
    # the seeds of the groups, each planned (the TRIX recipe's five among them)
    assert {r.config["seed"] for r in runs} == {s for g in groups.values() for s in g.seeds}


def test_preset_overlay_and_command_line_order(repo_root):
    demo = _load(repo_root, {"preset": "demo"})
    assert demo.preset == "demo"
    # the demo's "auto" variant is resolved to a real one at loading (tests/integration/test_data_sources.py)
    assert demo.data.variants["cifar10"] in ("official", "jpeg")
    # a command-line value wins over the preset that it selects
    over = _load(repo_root, {"preset": "demo", "train": {"epochs": 1}, "data": {"variants": {"cifar10": "jpeg"}}})
    assert over.train.epochs == 1
    assert over.data.variants["cifar10"] == "jpeg"


@pytest.mark.parametrize("override", [{"train.epochs": 3}, {"train": "{epochs: 3}"}, {"train": {"epochs": 3}},
                                      {"train": {"epochs": "3"}}])  # the last: as Snakemake's --config passes it
def test_overrides_as_users_type_them_merge_into_params(repo_root, override):
    """Dotted keys and YAML flow mappings (strings, as Snakemake and DVC pass them) set one
    nested value and keep its siblings."""
    base = _load(repo_root, {"preset": "ci"})
    over = _load(repo_root, {"preset": "ci", **override})
    assert over.train.epochs == 3 != base.train.epochs
    assert over.train.model_copy(update={"epochs": 3}) == base.train.model_copy(update={"epochs": 3})


def test_override_coercion_keeps_plain_strings_and_names_bad_yaml():
    assert coerce_overrides({"preset": "demo", "a.b": "8/255", "c": "[0, 1]"}) == {
        "preset": "demo", "a": {"b": "8/255"}, "c": [0, 1]}
    with pytest.raises(ConfigError, match=r"train=.*not valid YAML"):
        coerce_overrides({"train": "{epochs: [5"})


def test_a_dotted_override_reaches_a_front_end_merged_config(repo_root):
    """Snakemake merges `--config train.epochs=3` into its config as a top-level key; that copy is dropped."""
    raw = yaml.safe_load((repo_root / "params.yaml").read_text())
    params = load_params(base={**raw, "train.epochs": 3}, overrides={"preset": "ci", "train.epochs": 3},
                         presets_dir=repo_root / "workflow/presets",
                         schema_path=repo_root / "workflow/schemas/params.schema.yaml")
    assert params.train.epochs == 3 and "train.epochs" not in params.set_fields()


def test_unknown_preset_lists_valid_ones(repo_root):
    with pytest.raises(ConfigError, match=r"unknown preset 'nope'.*ci.*demo.*paper"):
        _load(repo_root, {"preset": "nope"})


@pytest.mark.parametrize(
    "override, message",
    [
        ({"train": {"epochs": 0}}, "epochs"),
        ({"train": {"optimizer": {"name": "rmsprop"}}}, "rmsprop"),
        ({"experiments": [{"group": "g", "dataset": "imagenet42", "models": ["small_cnn"],
                           "methods": ["standard"], "seeds": [0]}]}, "unknown dataset 'imagenet42'"),
        ({"experiments": [{"group": "g", "dataset": "synthetic", "models": ["resnet9000"],
                           "methods": ["standard"], "seeds": [0]}]}, "unknown model 'resnet9000'"),
        ({"experiments": [{"group": "g", "dataset": "synthetic", "models": ["small_cnn"],
                           "methods": ["fgsm_magic"], "seeds": [0]}]}, "unknown method 'fgsm_magic'"),
        ({"data": {"variants": {"cifar10": "png"}}}, "png"),
        ({"bogus_section": 1}, "bogus_section"),
    ],
)
def test_bad_values_are_named(repo_root, override, message):
    with pytest.raises((ConfigError, ValueError), match=message):
        _load(repo_root, {"preset": "ci", **override})


def test_run_ids_are_keyed_by_the_resolved_config(repo_root):
    ci = _load(repo_root, {"preset": "ci"})
    runs = plan_runs(ci)
    ids = [r.run_id for r in runs]
    assert len(set(ids)) == len(ids)
    assert all(i.startswith(("synthetic-", "synthetic_d_")) for i in ids)
    # a changed hyperparameter is a new run; an unchanged config the same id
    same = plan_runs(_load(repo_root, {"preset": "ci"}))
    assert [r.run_id for r in same] == ids
    changed = plan_runs(_load(repo_root, {"preset": "ci", "train": {"optimizer": {"weight_decay": 0.001}}}))
    assert not set(r.run_id for r in changed) & set(ids)
    # presets never share run directories
    demo_ids = {r.run_id for r in plan_runs(_load(repo_root, {"preset": "demo"}))}
    assert not demo_ids & set(ids)


def test_run_id_slug_is_readable(ci_params):
    cfg = plan_runs(ci_params)[0].config
    rid = ConfigSpec.parse(cfg).run_id
    assert rid.split("-")[:4] == ["synthetic", "small_cnn", cfg["method"], "sgd0.05"]
    assert rid.endswith(f"-s{cfg['seed']}-" + rid.rsplit("-", 1)[1])


def test_resolve_evaluation_fills_defaults(ci_params):
    ev = resolve_evaluation(ci_params, "pgd3")
    assert ev["name"] == "pgd3" and ev["steps"] == 3
    assert ev["eps"] == pytest.approx(8 / 255)
    assert ev["test_per_class"] == ci_params.evaluate.test_per_class


def test_feature_runs_train_on_each_constructed_set(repo_root):
    from study.config import constructions

    params = _load(repo_root)
    runs = plan_runs(params)
    cons = constructions(params, runs)
    assert [c.kind for c in cons] == ["d_r", "d_nr", "d_rand", "d_det"]
    by_id = {r.run_id: r for r in runs}
    robust = next(c for c in cons if c.kind == "d_r").source_run
    assert robust.config["method"] == "pgd_at_l2"
    assert robust.config["method_config"]["adversary"]["norm"] == "l2"
    assert robust.config["method_config"]["adversary"]["eps"] == 0.5
    standard = next(c for c in cons if c.kind == "d_nr").source_run
    assert standard.config["method"] == "standard" and "baseline" in standard.groups
    # the sources are evaluated like the models trained on their datasets
    assert {"pgd_l2_025", "pgd_l2_05"} <= set(by_id[standard.run_id].evaluations)
    trained = [r for r in runs if r.config.get("constructed")]
    assert sorted(r.config["constructed"]["kind"] for r in trained) == ["d_det", "d_nr", "d_r", "d_rand"]
    assert all(r.config["constructed"]["source_run"] in by_id for r in trained)
    assert all(r.run_id.startswith("cifar10_" + r.config["constructed"]["kind"] + "-") for r in trained)
    # a changed construction setting is a new dataset and a new run
    changed = _load(repo_root, {"features": {"construct": {"representation": {"steps": 10}}}})
    new = {r.run_id for r in plan_runs(changed) if r.config.get("constructed")}
    assert new != {r.run_id for r in trained}
    # unknown names are refused
    with pytest.raises(ConfigError, match="features.train.evaluations"):
        _load(repo_root, {"features": {"train": {"evaluations": ["nope"]}}})


def test_run_config_typo_is_one_line_naming_path_and_valid_keys(ci_params):
    cfg = next(r for r in plan_runs(ci_params) if r.config["method"] == "pgd_at").config
    run = ConfigSpec.parse(cfg).trained
    assert run.optimizer.momentum == 0.9 and run.method_config.adversary.steps == 3
    bad = {**cfg, "optimizer": {**cfg["optimizer"], "weight_decey": 0.1},
           "schedule": {**cfg["schedule"], "name": "cosine"}, "epoch_eval": {**cfg["epoch_eval"], "per_class": 0}}
    with pytest.raises(ValueError) as err:
        ConfigSpec.parse(bad)
    message = str(err.value)
    assert "\n" not in message and message.startswith("run config: ")
    assert "optimizer.weight_decey: unknown key (valid keys: betas, lr, momentum, name, nesterov, weight_decay)" \
        in message
    assert "schedule.name: 'cosine' is not valid; expected one of step, cyclic, constant" in message
    assert "epoch_eval.per_class: 0 is not valid; expected an integer >= 1" in message


def test_typo_in_a_groups_train_overrides_fails_the_plan(repo_root):
    params = _load(repo_root, {"preset": "ci"})
    groups = params.set_fields()["experiments"]
    params = changed(params, experiments=[{**groups[0], "train": {"epoch": 3}}, *groups[1:]])
    with pytest.raises(ConfigError, match=r"experiment group 'baseline' on synthetic, method 'standard': train: "
                                          r"epoch: unknown key \(valid keys: augment, batch_size, epoch_eval, epochs"):
        plan_runs(params)


def test_groups_are_selected_by_their_declared_kind(repo_root):
    runs = plan_runs(_load(repo_root, {"preset": "ci"}))
    mitigation = {r.run_id for r in runs if "mitigation" in r.kinds}
    assert mitigation and all({"mitigation", "mitigation_last"} & set(r.groups) for r in runs if r.run_id in mitigation)
    params = _load(repo_root, {"preset": "ci"})
    groups = params.set_fields()["experiments"]
    params = changed(params, experiments=[*groups[:-1], {**groups[-1], "group": "fairness_last"}])
    renamed = {r.run_id for r in plan_runs(params) if "mitigation" in r.kinds}
    assert renamed == mitigation  # the kind, not the group's name, says which runs are figure 13's
