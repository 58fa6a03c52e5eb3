"""The mitigation protocol end to end in the engine: adaptive state survives a resume,
best and last checkpoints, fine-tuning from a parent run, the methods' config and plan."""

import copy
import json

import pandas as pd
import pytest
import torch
from helpers.params import changed

from study.config import (
    ConfigError,
    load_params,
    method_definition,
    plan_runs,
    resolve_evaluation,
    resolve_method,
    run_config,
)
from study.config.methods import resolved_method
from study.config.spec import ConfigSpec
from study.io import load_torch
from study.run_directory import load_trained_model
from study.train.engine import train_run
from study.train.policies import POLICY_KEYS, build_policies

ADAPTIVE = {
    "targets": {"type": "cfp", "temperature": 2.0},
    "epsilon": {"type": "remargin", "rate": 0.5},
    "loss": {"type": "trades", "beta": 6.0, "lambda2": 0.5},
    "weights": {"type": "frl", "rate": 0.5},
    "averaging": {"type": "fawa", "decay": 0.85, "start": 0.25, "threshold": 0.0},
    "regularizer": {"type": "cosine", "coef": 0.1},
}


@pytest.fixture()
def adaptive_config(tiny_run_config):
    cfg = copy.deepcopy(tiny_run_config)
    cfg["method"] = "every_policy"
    cfg["method_config"].update(copy.deepcopy(ADAPTIVE))
    # TRADES' loss needs its clean forward before the update (the BatchNorm statistics of trades_cfa)
    cfg["method_config"]["adversary"]["bn_stats"] = ["clean", "adv", "clean", "step", "clean"]
    cfg["validation"] = {"fraction": 0.1}
    # small: 20 images per class, 10% of them validation, 5 test images per class per epoch
    cfg["train_per_class"] = 20
    cfg["epoch_eval"]["per_class"] = 5
    return cfg


def test_resume_restores_every_adaptive_state(tmp_path, synthetic_splits, adaptive_config):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train_run(adaptive_config, synthetic_splits, straight, device="cpu", progress=False)
    first = train_run(adaptive_config, synthetic_splits, resumed, device="cpu", stop_after=2, progress=False)
    assert not first.finished
    state = load_torch(resumed / "checkpoint.pt")["policies"]
    assert state["targets"]["cfp"] is not None and state["averaging"]["average"] is not None
    train_run(adaptive_config, synthetic_splits, resumed, device="cpu", progress=False)

    a, b = pd.read_csv(straight / "epochs.csv"), pd.read_csv(resumed / "epochs.csv")
    pd.testing.assert_frame_equal(a, b)
    for name in ("model.pt", "model_best.pt"):
        wa, wb = load_torch(straight / name), load_torch(resumed / name)
        assert wa["epoch"] == wb["epoch"]
        for key in wa["state_dict"]:
            assert torch.equal(wa["state_dict"][key], wb["state_dict"][key]), (name, key)
    sa, sb = load_torch(straight / "checkpoint.pt"), load_torch(resumed / "checkpoint.pt")
    assert sa["best"] == sb["best"]
    for key in ("lam_nat", "lam_bndy"):
        assert torch.equal(sa["policies"]["weights"][key], sb["policies"]["weights"][key])
    assert torch.equal(sa["policies"]["epsilon"]["lam"], sb["policies"]["epsilon"]["lam"])

    # The records show the policies adapting: class-wise eps, weights and beta by epoch 3, and
    # eps moving from epoch to epoch (epoch 1's may already differ by class: FRL primes its
    # multipliers on the initial model's validation errors).
    first, later = (a[a["epoch"] == e].set_index("class") for e in (1, 3))
    assert not first["epsilon"].equals(later["epsilon"])
    for col in ("epsilon", "weight", "weight_boundary", "beta"):
        assert later[col].nunique() > 1, col
    assert (a["val_n"] > 0).all() and a["val_robust_acc"].notna().all()
    assert a.groupby("epoch")["cfp"].sum().round(6).isin([0.0, 1.0]).all()
    assert (a["averaged"] == 1).all(), "threshold 0: every epoch is averaged in"
    blob = load_torch(straight / "model.pt")
    assert "raw_state_dict" in blob, "an averaging method keeps its raw weights too"
    val = json.loads((straight / "validation.json").read_text())
    assert len(val["indices"]) == 10 * 2  # 10% of 20 per class
    meta = json.loads((straight / "meta.json").read_text())
    assert 1 <= meta["best_epoch"] <= 3
    model, _ = load_trained_model(straight, checkpoint="best")
    assert not model.training


def test_fine_tuning_starts_from_the_parent_and_checks_it(tmp_path, synthetic_splits, tiny_run_config):
    small = {**copy.deepcopy(tiny_run_config), "train_per_class": 10,
             "epoch_eval": {**tiny_run_config["epoch_eval"], "per_class": 2}}
    parent = {**small, "epochs": 1, "method": "standard", "method_config": {"adversary": None}}
    parent_dir = tmp_path / ConfigSpec.parse(parent).run_id
    train_run(parent, synthetic_splits, parent_dir, device="cpu", progress=False)
    child = {**small, "epochs": 1, "init_from": parent_dir.name,
             "optimizer": {**tiny_run_config["optimizer"], "lr": 1e-12}}
    train_run(child, synthetic_splits, tmp_path / "child", device="cpu", progress=False,
              init_from=parent_dir / "model.pt")
    # with a vanishing learning rate, the child's weights are the parent's
    p, c = load_torch(parent_dir / "model.pt")["state_dict"], load_torch(tmp_path / "child" / "model.pt")["state_dict"]
    assert torch.allclose(p["fc.weight"], c["fc.weight"], atol=1e-6)
    assert json.loads((tmp_path / "child" / "meta.json").read_text())["init_from"] == parent_dir.name

    wrong = {**child, "init_from": "some-other-run-12345678"}
    with pytest.raises(ValueError, match="12345678"):
        train_run(wrong, synthetic_splits, tmp_path / "wrong", device="cpu", progress=False,
                  init_from=parent_dir / "model.pt")
    with pytest.raises(ValueError, match="--init-from"):
        train_run(wrong, synthetic_splits, tmp_path / "wrong2", device="cpu", progress=False)


def test_frl_without_validation_split_is_refused(tmp_path, synthetic_splits, tiny_run_config):
    cfg = copy.deepcopy(tiny_run_config)
    cfg["method_config"]["weights"] = {"type": "frl"}
    with pytest.raises(ValueError, match="train.validation"):
        train_run(cfg, synthetic_splits, tmp_path / "r", device="cpu", progress=False)


def test_methods_inherit_from_base_and_children_carry_their_parent(ci_params):
    params = ci_params
    group = params.group("mitigation")
    trades_cfa = run_config(params, group, "small_cnn", "trades_cfa", 0)["method_config"]
    # trades_cfa is trades_normalized (CFA's TRADES baseline) plus the calibration
    assert trades_cfa["loss"] == {"type": "trades", "beta": 6, "normalize": True, "lambda2": 0.5, "warmup": 0.05}
    assert trades_cfa["epsilon"] == {"type": "cfa", "lambda": 0.3, "warmup": 0.05}
    assert trades_cfa["adversary"]["bn_mode"] == "eval" and trades_cfa["adversary"]["steps"] == 3
    frl = run_config(params, group, "small_cnn", "frl_reweight_remargin", 0)
    parent = run_config(params, group, "small_cnn", "at", 0)
    assert frl["init_from"] == ConfigSpec.parse(parent).run_id
    assert frl["epochs"] == 1 and frl["optimizer"]["lr"] == 0.001 and frl["method_config"]["loss"]["beta"] == 1
    assert "init_from" not in frl["method_config"] and "train" not in frl["method_config"]
    # a changed parent is a new child
    methods = params.set_fields()["methods"]
    params = changed(params, methods={**methods, "at": {**methods["at"], "adversary": {"steps": 4}}})
    assert run_config(params, group, "small_cnn", "frl_reweight_remargin", 0)["init_from"] != frl["init_from"]


def _policy_types(params, method: str) -> set[tuple[str, str]]:
    """The engine's policy classes a method builds, its adversary type, and whether it fine-tunes."""
    cfg = resolve_method(params, method)
    policies = build_policies(resolved_method(params, method), num_classes=10, epochs=2, class_counts=torch.ones(10))
    return {(key, type(getattr(policies, key)).__name__) for key in POLICY_KEYS} | {
        ("adversary", (cfg.get("adversary") or {}).get("type", "none")),
        ("init_from", str(bool(method_definition(params, method).get("init_from"))))}


def test_ci_mitigation_methods_use_every_policy_type_of_the_paper_grid(repo_root, ci_params):
    """The ci preset trains a few mitigation methods end to end; together they must exercise
    every policy type (and fine-tuning) that the paper's mitigation grid uses."""
    paper = load_params(repo_root / "params.yaml", {"preset": "paper"}, presets_dir=repo_root / "workflow/presets",
                        schema_path=repo_root / "workflow/schemas/params.schema.yaml")
    grid = paper.group("mitigation").methods
    runs = plan_runs(ci_params)
    mitigation = {r.config["method"]: r for r in runs if any(g.startswith("mitigation") for g in r.groups)}
    assert set(mitigation) <= set(grid), "the ci preset draws its methods from the paper's grid"
    used = set().union(*(_policy_types(ci_params, m) for m in mitigation))
    assert used == set().union(*(_policy_types(paper, m) for m in grid))
    assert all("best" in r.checkpoints for r in mitigation.values())
    assert any({"last", "best"} <= set(r.checkpoints) and r.init_from for r in mitigation.values())
    baseline = [r for r in runs if r.groups == ["baseline"]]
    assert all(r.checkpoints == ["last"] and "validation" not in r.config for r in baseline)


def test_bad_method_definitions_are_named(repo_root, ci_params):
    for change, message in [
        ({"trades": {"base": "nope"}}, "unknown method 'nope'"),
        ({"at": {"base": "trades"}, "trades": {"base": "at"}}, "circular"),
        ({"frl_reweight": {"init_from": "ghost"}}, "init_from names unknown method 'ghost'"),
        ({"trades": {"loss": {"type": "hinge"}}}, "hinge"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_params(repo_root / "params.yaml", {"preset": "ci", "methods": change},
                        presets_dir=repo_root / "workflow/presets",
                        schema_path=repo_root / "workflow/schemas/params.schema.yaml")


def test_frl_fine_tunes_its_parents_best_checkpoint_and_validates_with_pgd20(ci_params):
    """fair_robust starts from its best pre-trained model and drives its multipliers with
    PGD-20 on the validation split; a parent without a validation split gives its last."""
    params = ci_params
    group = params.group("mitigation")
    frl = run_config(params, group, "small_cnn", "frl_reweight", 0)
    assert frl["init_checkpoint"] == "best"
    attack = frl["epoch_eval"]["validation_attack"]
    pgd20 = resolve_evaluation(params, "pgd20")
    assert attack["steps"] == pgd20["steps"] == 20 and attack["eps"] == pgd20["eps"]
    assert "validation_attack" not in frl["method_config"]  # a run-level key, not a policy
    no_validation = group.model_copy(update={"train": {k: v for k, v in group.train.items() if k != "validation"}})
    assert run_config(params, no_validation, "small_cnn", "frl_reweight", 0)["init_checkpoint"] == "last"
    # plain methods carry neither key, so their run ids are unchanged
    plain = run_config(params, group, "small_cnn", "at", 0)
    assert "init_checkpoint" not in plain and "validation_attack" not in plain["epoch_eval"]
