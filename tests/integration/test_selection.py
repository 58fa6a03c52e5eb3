"""The best checkpoint as the papers select it: the score and its parts from a hand-built
validation epoch, and the engine's choice and record over a real run."""

import copy
import json

import pandas as pd
import pytest
import torch

from study.config.spec import ConfigSpec
from study.config.types import SelectionSettings
from study.io import load_torch
from study.train.engine import train_run
from study.train.policies import EpochStats
from study.train.selection import validation_score


def _val(correct, n):
    c = torch.tensor(correct, dtype=torch.float64)
    k = c.numel()
    zeros = torch.zeros(k, dtype=torch.float64)
    return EpochStats(1, zeros, zeros, torch.zeros(k, k, dtype=torch.float64),
                      torch.tensor(n, dtype=torch.float64), c, c.clone())


def test_score_parts_by_hand():
    # 3 classes of 10 validation images: 8, 5 and 2 robust-correct
    stats = _val([8, 5, 2], [10, 10, 10])
    mean = (8 + 5 + 2) / 30
    assert validation_score(stats, True, "mean") == pytest.approx({"mean": mean, "worst": 0.2, "score": mean})
    assert validation_score(stats, True, "mean_plus_worst")["score"] == pytest.approx(mean + 0.2)


def _parsed(cfg: dict):
    return ConfigSpec.parse(cfg).trained


def test_selection_defaults_and_rejects_unknown_scores(tiny_run_config):
    # the rule is the run's (its group's train.selection), never its method's
    assert _parsed(tiny_run_config).selection == SelectionSettings(score="mean", from_epoch=0.0)
    chosen = _parsed({**tiny_run_config, "selection": {"score": "mean_plus_worst", "from_epoch": 0.5}})
    assert chosen.selection == SelectionSettings(score="mean_plus_worst", from_epoch=0.5)
    with pytest.raises(ValueError, match=r"selection.score: .median. is not valid; expected one of mean, mean_plus"):
        _parsed({**tiny_run_config, "selection": {"score": "median"}})
    method = {**tiny_run_config["method_config"], "selection": {"score": "mean"}}
    with pytest.raises(ValueError, match=r"method_config.selection: unknown key"):
        _parsed({**tiny_run_config, "method_config": method})


def test_engine_chooses_by_the_runs_rule_and_records_the_parts(tmp_path, synthetic_splits, tiny_run_config):
    cfg = copy.deepcopy(tiny_run_config)
    cfg.update(epochs=4, train_per_class=20, validation={"fraction": 0.1})
    cfg["epoch_eval"]["per_class"] = 4
    cfg["selection"] = {"score": "mean_plus_worst", "from_epoch": 0.5}
    train_run(cfg, synthetic_splits, tmp_path / "r", device="cpu", progress=False)

    record = json.loads((tmp_path / "r" / "validation.json").read_text())
    epochs = record["epochs"]
    assert [e["epoch"] for e in epochs] == list(range(1, cfg["epochs"] + 1))
    for e in epochs:
        assert e["score"] == pytest.approx(e["mean"] + e["worst"])
        assert e["eligible"] == (e["epoch"] > 0.5 * cfg["epochs"])
    eligible = [e for e in epochs if e["eligible"]]
    best = max(eligible, key=lambda e: (e["score"], -e["epoch"]))
    assert record["best_epoch"] == best["epoch"]
    assert load_torch(tmp_path / "r" / "model_best.pt")["epoch"] == best["epoch"]


def test_validation_statistics_use_the_methods_own_attack(tmp_path, synthetic_splits, tiny_run_config):
    """With `validation_attack` at eps 0 the validation robust accuracy equals the clean one,
    while the test subset is still attacked by the epoch attack."""
    cfg = copy.deepcopy(tiny_run_config)
    cfg.update(epochs=1, train_per_class=20, validation={"fraction": 0.1})
    cfg["epoch_eval"]["per_class"] = 4
    cfg["epoch_eval"]["validation_attack"] = {**cfg["epoch_eval"]["attack"], "eps": 0.0}
    train_run(cfg, synthetic_splits, tmp_path / "r", device="cpu", progress=False)
    rows = pd.read_csv(tmp_path / "r" / "epochs.csv")
    assert (rows["val_robust_acc"] == rows["val_clean_acc"]).all()
    assert rows["robust_acc"].mean() < rows["clean_acc"].mean() or rows["clean_acc"].mean() == 0
