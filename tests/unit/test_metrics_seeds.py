"""Intervals over several seeds scored on the same test images (study.metrics.seeds) and the
tables and figures that use them."""

import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection

from study.figures.features import plot_feature_classwise
from study.figures.mitigation import mitigation_table
from study.figures.robustness import cfp_over_seeds, plot_cfp, pooled_accuracy
from study.metrics.classwise import class_accuracy, classwise_table, seed_aggregate
from study.metrics.discrepancy_intervals import bootstrap_discrepancy, discrepancy_summary
from study.metrics.intervals import wilson_interval
from study.metrics.robustness import class_false_positive
from study.metrics.seeds import accuracy_seed_interval, seed_interval, seed_summary

NAMES = ["spread", "steady"]
PER_CLASS = 200
# class "spread": the seeds disagree far beyond binomial noise; class "steady": every seed
# predicts every test image the same way.
SPREAD = (0.2, 0.5, 0.8)
STEADY = 0.6
T975_2DF = 4.303  # Student's t, 97.5% quantile, 2 degrees of freedom (printed tables)


def seed_records(spread=SPREAD, steady=STEADY, per_class=PER_CLASS, ids=None):
    """One per-sample record per seed, all on the same test images (index 0..2*per_class-1)."""
    labels = np.repeat([0, 1], per_class)
    records = []
    for seed, acc in enumerate(spread):
        pred = labels.copy()
        wrong0 = np.arange(per_class) >= round(acc * per_class)
        wrong1 = np.arange(per_class) >= round(steady * per_class)
        pred[:per_class][wrong0] = 1
        pred[per_class:][wrong1] = 0
        frame = pd.DataFrame({"index": np.arange(labels.size), "label": labels, "pred": pred})
        records.append(({**(ids or {}), "run_id": f"r{seed}", "seed": seed, "eval": "clean"}, frame))
    return records


def per_seed_table(**kwargs) -> pd.DataFrame:
    return classwise_table(seed_records(**kwargs), NAMES)


def width(lo, hi):
    return hi - lo


# ---------------------------------------------------------------- the procedure

def test_seeds_that_disagree_get_an_interval_over_their_spread_not_the_pooled_one():
    seeds = per_seed_table()
    row = seed_aggregate(seeds, by=["eval"]).set_index("class").loc[0]
    per_seed = seeds[seeds["class"] == 0]
    assert row["acc"] == pytest.approx(per_seed["acc"].mean())
    assert row["ci_lo"] <= per_seed["acc"].min() and row["ci_hi"] >= per_seed["acc"].max()
    pooled = wilson_interval(per_seed["correct"].sum(), per_seed["n"].sum())
    # the old interval: 600 "independent" predictions, far narrower than the seeds' spread
    assert pooled[0] > per_seed["acc"].min() and pooled[1] < per_seed["acc"].max()
    assert width(row["ci_lo"], row["ci_hi"]) > 5 * width(*pooled)


def test_identical_seeds_give_one_seeds_interval_which_pooling_narrows_by_root_seeds():
    seeds = per_seed_table()
    row = seed_aggregate(seeds, by=["eval"]).set_index("class").loc[1]
    one = seeds[(seeds["class"] == 1) & (seeds["seed"] == 0)].iloc[0]
    assert row["acc_std"] == 0
    assert (row["ci_lo"], row["ci_hi"]) == pytest.approx(wilson_interval(one["correct"], one["n"]), rel=1e-12)
    pooled = wilson_interval(row["correct"], row["n"])
    assert width(row["ci_lo"], row["ci_hi"]) / width(*pooled) == pytest.approx(math.sqrt(len(SPREAD)), rel=0.02)


def test_nearly_identical_seeds_stay_close_to_the_within_seed_interval():
    accs = (0.60, 0.605, 0.61)
    seeds = per_seed_table(spread=accs)
    row = seed_aggregate(seeds, by=["eval"]).set_index("class").loc[0]
    within = wilson_interval(row["acc"] * PER_CLASS, PER_CLASS)
    assert width(row["ci_lo"], row["ci_hi"]) == pytest.approx(width(*within), rel=0.05)
    assert width(row["ci_lo"], row["ci_hi"]) >= width(*within)


def test_one_seed_is_the_wilson_interval_of_its_counts():
    single = classwise_table(seed_records()[:1], NAMES)
    agg = seed_aggregate(single, by=["eval"])
    wilson = class_accuracy(seed_records()[0][1], NAMES)
    assert agg["ci_lo"].tolist() == pytest.approx(wilson["ci_lo"].tolist(), rel=1e-12)
    assert agg["ci_hi"].tolist() == pytest.approx(wilson["ci_hi"].tolist(), rel=1e-12)
    assert agg["n_seeds"].tolist() == [1, 1]


def test_the_halves_add_in_squares_with_the_t_quantile_of_the_seeds():
    accs = np.array([0.45, 0.5, 0.56])  # inside (0, 1) after widening: no clipping
    n = 2000
    lo, hi = accuracy_seed_interval(accs.mean(), accs.std(ddof=1), len(accs), n)
    w_lo, w_hi = wilson_interval(accs.mean() * n, n)
    seed_half = T975_2DF * accs.std(ddof=1) / math.sqrt(len(accs))
    assert lo == pytest.approx(accs.mean() - math.hypot(seed_half, accs.mean() - w_lo), abs=1e-4)
    assert hi == pytest.approx(accs.mean() + math.hypot(seed_half, w_hi - accs.mean()), abs=1e-4)


def test_seed_interval_keeps_series_clips_to_unit_range_and_checks_its_input():
    lo, hi = accuracy_seed_interval(pd.Series([0.5, 0.98, np.nan], index=list("xyz")),
                                    pd.Series([0.3, 0.02, 0.1], index=list("xyz")), 3, 100)
    assert list(lo.index) == list("xyz")
    assert lo["x"] == 0.0 and hi["x"] == 1.0 and hi["y"] == 1.0
    assert np.isnan(lo["z"]) and np.isnan(hi["z"])
    # an interval of a nonlinear statistic may lie on one side of the estimate: that side adds nothing
    assert seed_interval(0.5, 0.0, 2, 0.3, 0.45) == pytest.approx((0.3, 0.5))
    with pytest.raises(ValueError, match="n_seeds"):
        seed_interval(0.5, 0.1, 0, 0.4, 0.6)
    with pytest.raises(ValueError, match="z must"):
        seed_interval(0.5, 0.1, 2, 0.4, 0.6, z=0)


def test_seed_summary_counts_only_seeds_with_samples():
    seeds = per_seed_table()
    gone = seeds.assign(acc=np.where((seeds["seed"] == 2) & (seeds["class"] == 0), np.nan, seeds["acc"]))
    out = seed_summary(gone, ["class"]).set_index("class")
    assert out.loc[0, "n_seeds"] == 2 and out.loc[1, "n_seeds"] == 3
    kept = seeds[(seeds["class"] == 0) & (seeds["seed"] < 2)]["acc"]
    expected = accuracy_seed_interval(kept.mean(), kept.std(ddof=1), 2, PER_CLASS)
    assert (out.loc[0, "ci_lo"], out.loc[0, "ci_hi"]) == pytest.approx(expected)
    with pytest.raises(ValueError, match="lacks column"):
        seed_summary(seeds, ["class"], value="cfp")


# ---------------------------------------------------------------- call sites

def test_discrepancy_summary_interval_covers_the_seeds_and_is_the_bootstrap_for_identical_seeds():
    spread = discrepancy_summary(per_seed_table(), by=["eval"], n_boot=300).set_index("stat")
    for stat in ("worst", "best", "gap", "mean"):
        seeds = np.array(spread.loc[stat, "seed_values"].split(";"), dtype=float)
        assert spread.loc[stat, "ci_lo"] <= seeds.min() and spread.loc[stat, "ci_hi"] >= seeds.max(), stat

    same = per_seed_table(spread=(0.3,) * 3)
    one = same[same["seed"] == 0].sort_values("class")
    boot = bootstrap_discrepancy(one["correct"], one["n"], n_boot=300)
    out = discrepancy_summary(same, by=["eval"], n_boot=300).set_index("stat")
    for stat in ("worst", "best", "gap", "std", "mean"):
        assert (out.loc[stat, "ci_lo"], out.loc[stat, "ci_hi"]) == pytest.approx(boot[stat]), stat


def test_mitigation_interval_widens_over_seeds_and_is_wilson_for_one():
    ids = {"dataset": "d", "model": "m", "method": "at"}
    seeds = per_seed_table(ids=ids)
    table = mitigation_table(seeds).iloc[0]
    worst = seeds.groupby("seed")["acc"].min()
    assert table["n_seeds"] == 3
    assert table["worst_lo"] <= worst.min() and table["worst_hi"] >= worst.max()
    # identical seeds keep the test-sampling width of one seed (a t interval alone would be a point)
    same = per_seed_table(spread=(0.3,) * 3, ids=ids)
    row = same[(same["seed"] == 0) & (same["class"] == 0)].iloc[0]
    assert (mitigation_table(same).iloc[0][["worst_lo", "worst_hi"]].tolist()
            == pytest.approx(wilson_interval(row["correct"], row["n"]), rel=1e-12))
    single = mitigation_table(seeds[seeds["seed"] == 1]).iloc[0]
    worst_row = seeds[seeds["seed"] == 1].sort_values("acc").iloc[0]
    assert (single["worst_lo"], single["worst_hi"]) == pytest.approx(
        wilson_interval(worst_row["correct"], worst_row["n"]), rel=1e-12)


def test_cfp_over_seeds_gives_one_bar_per_class_with_an_interval_over_the_seeds():
    rows = []
    for ids, frame in seed_records():
        wrong = int((frame["pred"] != frame["label"]).sum())
        rows.append(pd.DataFrame({**ids, "class": [0, 1], "class_name": NAMES, "misclassified": wrong,
                                  "cfp": class_false_positive(frame, len(NAMES))}))
    table = pd.concat(rows, ignore_index=True)
    out = cfp_over_seeds(table).set_index("class")
    for c in (0, 1):
        values = table.loc[table["class"] == c, "cfp"]
        assert out.loc[c, "cfp"] == pytest.approx(values.mean())
        assert out.loc[c, "ci_lo"] <= values.min() and out.loc[c, "ci_hi"] >= values.max()
    fig = plot_cfp(table, "t")
    assert len(fig.axes[0].patches) == len(NAMES)  # one bar per class, not one per class and seed

    one = cfp_over_seeds(table[table["seed"] == 0]).set_index("class")
    k = table[table["seed"] == 0].set_index("class")
    lo, hi = wilson_interval(k["cfp"] * k["misclassified"], k["misclassified"])
    assert one["ci_lo"].tolist() == pytest.approx(lo.tolist()) and one["ci_hi"].tolist() == pytest.approx(hi.tolist())


def test_corruption_accuracy_is_pooled_over_severities_within_a_run_and_averaged_over_runs():
    blocks = []
    for severity, spread in ((1, SPREAD), (2, tuple(a / 2 for a in SPREAD))):
        table = per_seed_table(spread=spread)
        blocks.append(table.assign(corruption="fog", severity=severity))
    rows = pd.concat(blocks, ignore_index=True)
    out = pooled_accuracy(rows, ["corruption", "class", "class_name"]).set_index("class")
    per_run = rows.groupby(["class", "run_id"])[["correct", "n"]].sum()
    acc = (per_run["correct"] / per_run["n"]).loc[0]
    assert out.loc[0, "acc"] == pytest.approx(acc.mean())
    assert out.loc[0, "n_seeds"] == len(SPREAD)
    assert out.loc[0, "ci_lo"] <= acc.min() and out.loc[0, "ci_hi"] >= acc.max()


def test_feature_figure_whiskers_cover_the_seeds():
    seeds = per_seed_table(ids={"dataset": "d", "model": "m", "method": "standard"}).assign(training="d_r")
    fig = plot_feature_classwise(seeds, "t")
    ax = fig.axes[0]
    segments = [seg for coll in ax.collections if isinstance(coll, LineCollection) for seg in coll.get_segments()]
    spread = seeds[seeds["class"] == 0]["acc"] * 100
    lo, hi = sorted(segments, key=lambda s: s[0][0])[0][:, 1]  # the whisker of class 0
    assert lo <= spread.min() and hi >= spread.max()
