"""Explanation metrics (figures 4-6, 8-10) against values computed by hand."""

import numpy as np
import pandas as pd
import pytest

from study.metrics.confusion import confusion_matrix, logit_cosine_similarity, mean_logits
from study.metrics.discrepancy_intervals import bootstrap_discrepancy, discrepancy_summary
from study.metrics.rank import class_accuracy_matrix, rank_agreement


def _classwise(seed_counts):
    """seed -> list of (correct, n) per class, as classwise_table would give them."""
    rows = []
    for seed, counts in seed_counts.items():
        for c, (k, n) in enumerate(counts):
            rows.append({"dataset": "d", "eval": "clean", "seed": seed, "class": c, "class_name": f"c{c}",
                         "n": n, "correct": k, "acc": k / n})
    return pd.DataFrame(rows)


def test_discrepancy_summary_pools_seeds_and_keeps_their_spread():
    table = _classwise({0: [(8, 10), (2, 10), (5, 10)], 1: [(6, 10), (4, 10), (5, 10)]})
    out = discrepancy_summary(table, by=["dataset", "eval"], n_boot=200).set_index("stat")
    # pooled accuracies: 14/20 = 0.7, 6/20 = 0.3, 10/20 = 0.5
    assert out.loc["worst", "value"] == pytest.approx(0.3)
    assert out.loc["worst", "class_name"] == "c1"
    assert out.loc["best", "value"] == pytest.approx(0.7)
    assert out.loc["best", "class_name"] == "c0"
    assert out.loc["gap", "value"] == pytest.approx(0.4)
    assert out.loc["mean", "value"] == pytest.approx(0.5)
    assert out.loc["std", "value"] == pytest.approx(np.sqrt((0.04 + 0.04 + 0) / 3))
    # per seed: gap 0.6 (seed 0) and 0.2 (seed 1)
    assert out.loc["gap", "seed_min"] == pytest.approx(0.2)
    assert out.loc["gap", "seed_max"] == pytest.approx(0.6)
    assert out.loc["gap", "seed_mean"] == pytest.approx(0.4)
    assert out.loc["gap", "seed_values"] == "0.6;0.2"
    assert (out["n_seeds"] == 2).all()
    for stat in ("worst", "best", "gap", "std", "mean"):
        assert out.loc[stat, "ci_lo"] <= out.loc[stat, "value"] + 0.05
        assert out.loc[stat, "ci_hi"] >= out.loc[stat, "value"] - 0.05


def test_bootstrap_interval_is_degenerate_for_certain_classes_and_widens_with_fewer_samples():
    exact = bootstrap_discrepancy([10, 0], [10, 10])
    assert exact["gap"] == (1.0, 1.0) and exact["worst"] == (0.0, 0.0)
    small = bootstrap_discrepancy([5, 5], [10, 10], seed=1)
    large = bootstrap_discrepancy([500, 500], [1000, 1000], seed=1)
    assert small["gap"][1] - small["gap"][0] > large["gap"][1] - large["gap"][0]
    assert small["worst"][0] < 0.5 < small["best"][1]
    with pytest.raises(ValueError, match="correct must lie"):
        bootstrap_discrepancy([11], [10])


def test_rank_agreement_by_hand():
    wide = pd.DataFrame({"a": [0.1, 0.2, 0.3, 0.4], "b": [0.4, 0.3, 0.2, 0.1], "c": [0.1, 0.3, 0.2, 0.4]})
    rho = rank_agreement(wide, "spearman")
    tau = rank_agreement(wide, "kendall")
    assert rho.loc["a", "b"] == pytest.approx(-1.0)
    assert rho.loc["a", "a"] == pytest.approx(1.0)
    # ranks a = 1 2 3 4, c = 1 3 2 4: d^2 = 2, rho = 1 - 6*2 / (4*15) = 0.8
    assert rho.loc["a", "c"] == pytest.approx(0.8)
    # 6 pairs, one discordant (2,3): tau = (5 - 1) / 6
    assert tau.loc["a", "c"] == pytest.approx(4 / 6)
    assert tau.loc["c", "a"] == tau.loc["a", "c"]
    assert np.isnan(rank_agreement(wide.assign(d=0.5), "kendall").loc["a", "d"])
    with pytest.raises(ValueError, match="valid: spearman, kendall"):
        rank_agreement(wide, "pearson")


def test_class_accuracy_matrix_averages_seeds():
    table = pd.concat([
        _classwise({0: [(8, 10), (2, 10)], 1: [(6, 10), (4, 10)]}).assign(model="m1"),
        _classwise({0: [(1, 10), (9, 10)]}).assign(model="m2"),
    ])
    wide = class_accuracy_matrix(table, ["model", "eval"])
    assert list(wide.columns) == ["m1 | clean", "m2 | clean"]
    assert list(wide.index) == ["c0", "c1"]
    assert wide.loc["c0", "m1 | clean"] == pytest.approx(0.7)
    assert wide.loc["c1", "m2 | clean"] == pytest.approx(0.9)


def test_confusion_matrix_by_hand():
    samples = pd.DataFrame({"label": [0, 0, 0, 1, 1, 2], "pred": [0, 1, 1, 1, 1, 0]})
    counts = confusion_matrix(samples, 4, normalize=False)
    assert counts[0].tolist() == [1, 2, 0, 0]
    assert counts[2].tolist() == [1, 0, 0, 0]
    rates = confusion_matrix(samples, 4)
    assert rates[0].tolist() == pytest.approx([1 / 3, 2 / 3, 0, 0])
    assert rates[1, 1] == 1.0
    assert np.isnan(rates[3]).all()  # class 3 has no samples
    with pytest.raises(ValueError, match="outside 0..1"):
        confusion_matrix(samples, 2)


def test_mean_logit_cosine_similarity_by_hand():
    samples = pd.DataFrame({
        "label": [0, 0, 1, 2],
        "logit_0": [2.0, 0.0, 0.0, 1.0],
        "logit_1": [0.0, 2.0, 3.0, 1.0],
        "logit_2": [0.0, 0.0, 0.0, 0.0],
    })
    means = mean_logits(samples, 3)
    assert means[0].tolist() == [1.0, 1.0, 0.0]
    sim = logit_cosine_similarity(samples, 3)
    assert sim[0, 0] == pytest.approx(1.0)
    # (1,1,0).(0,3,0) / (sqrt2 * 3) = 1/sqrt2
    assert sim[0, 1] == pytest.approx(1 / np.sqrt(2))
    assert sim[1, 2] == pytest.approx(1 / np.sqrt(2))
    assert sim[0, 2] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="logit_3"):
        logit_cosine_similarity(samples, 4)
