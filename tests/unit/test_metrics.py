import numpy as np
import pandas as pd
import pytest

from study.metrics.classwise import class_accuracy, classwise_table, discrepancy, seed_aggregate, summary_table
from study.metrics.intervals import wilson_interval
from study.metrics.seeds import accuracy_seed_interval

NAMES = ["a", "b", "c", "d"]


def hand_samples() -> pd.DataFrame:
    # class a: 2/3 right, b: 1/2, c: 1/1, d: no samples
    return pd.DataFrame({
        "index": [0, 1, 2, 3, 4, 5],
        "label": [0, 0, 0, 1, 1, 2],
        "pred": [0, 0, 1, 1, 0, 2],
        "logit_0": np.zeros(6),
    })


# ---------------------------------------------------------------- wilson_interval

def test_wilson_matches_hand_values():
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)


def test_wilson_edges():
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.7225, abs=1e-4)
    lo, hi = wilson_interval(0, 0)
    assert np.isnan(lo) and np.isnan(hi)


def test_wilson_vectorised_keeps_series_index():
    lo, hi = wilson_interval(np.array([5, 0, 0]), np.array([10, 10, 0]))
    assert lo[:2] == pytest.approx([0.2366, 0.0], abs=1e-4)
    assert np.isnan(lo[2]) and np.isnan(hi[2])
    lo_s, hi_s = wilson_interval(pd.Series([5, 10], index=["x", "y"]), pd.Series([10, 10]).values)
    assert list(lo_s.index) == ["x", "y"]
    assert hi_s["y"] == 1.0


def test_wilson_narrower_with_more_samples_and_wider_with_larger_z():
    lo_small, hi_small = wilson_interval(50, 100)
    lo_big, hi_big = wilson_interval(500, 1000)
    assert hi_big - lo_big < hi_small - lo_small
    lo_z, hi_z = wilson_interval(50, 100, z=2.576)
    assert hi_z - lo_z > hi_small - lo_small


@pytest.mark.parametrize("k, n", [(11, 10), (-1, 10), (0, -1)])
def test_wilson_rejects_impossible_counts(k, n):
    with pytest.raises(ValueError, match="must"):
        wilson_interval(k, n)


# ---------------------------------------------------------------- class_accuracy

def test_class_accuracy_hand_table():
    table = class_accuracy(hand_samples(), NAMES)
    assert list(table.columns) == [
        "class", "class_name", "n", "correct", "acc", "ci_lo", "ci_hi", "acc_centered"
    ]
    assert table["class_name"].tolist() == NAMES
    assert table["n"].tolist() == [3, 2, 1, 0]
    assert table["correct"].tolist() == [2, 1, 1, 0]
    assert table["acc"].iloc[:3].tolist() == pytest.approx([2 / 3, 0.5, 1.0])
    assert np.isnan(table["acc"].iloc[3])
    assert np.isnan(table["ci_lo"].iloc[3]) and np.isnan(table["acc_centered"].iloc[3])
    mean = (2 / 3 + 0.5 + 1.0) / 3
    assert table["acc_centered"].iloc[:3].tolist() == pytest.approx([2 / 3 - mean, 0.5 - mean,
                                                                     1.0 - mean])
    assert table["acc_centered"].sum() == pytest.approx(0.0, abs=1e-12)
    assert (table["ci_lo"].iloc[:3] <= table["acc"].iloc[:3]).all()
    assert (table["ci_hi"].iloc[:3] >= table["acc"].iloc[:3]).all()


def test_class_accuracy_rejects_bad_input():
    with pytest.raises(ValueError, match="outside the valid classes"):
        class_accuracy(hand_samples(), ["a", "b"])
    dup = hand_samples().assign(index=[0, 0, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="repeats test indices"):
        class_accuracy(dup, NAMES)
    with pytest.raises(ValueError, match="integers"):
        class_accuracy(hand_samples().assign(pred=[0.0, 0, 1, 1, 0, 2]), NAMES)
    with pytest.raises(ValueError, match="lacks column"):
        class_accuracy(hand_samples().drop(columns="pred"), NAMES)


# ---------------------------------------------------------------- discrepancy

def test_discrepancy_hand_values():
    d = discrepancy(class_accuracy(hand_samples(), NAMES))
    assert d["worst_class"] == "b" and d["worst"] == pytest.approx(0.5)
    assert d["best_class"] == "c" and d["best"] == pytest.approx(1.0)
    assert d["gap"] == pytest.approx(0.5)
    assert d["mean"] == pytest.approx((2 / 3 + 0.5 + 1.0) / 3)
    assert d["overall"] == pytest.approx(4 / 6)
    assert d["std"] == pytest.approx(0.20787, abs=1e-5)  # population std of the 3 classes
    assert d["worst10"] == pytest.approx(0.5)  # 3 classes: just the worst one


def test_worst10_for_100_classes_is_mean_of_ten_lowest():
    rng = np.random.default_rng(1)
    acc = rng.permutation(np.arange(100) / 100)
    table = pd.DataFrame({"class": range(100), "class_name": [f"c{i}" for i in range(100)],
                          "acc": acc})
    d = discrepancy(table)
    assert d["worst10"] == pytest.approx(np.mean(np.arange(10) / 100))
    assert d["worst_class"] == f"c{int(np.argmin(acc))}"
    assert np.isnan(d["overall"])  # no counts in the table


def test_discrepancy_on_other_column_and_all_nan():
    table = class_accuracy(hand_samples(), NAMES)
    d = discrepancy(table, col="acc_centered")
    assert d["mean"] == pytest.approx(0.0, abs=1e-12)
    assert d["worst_class"] == "b"
    with pytest.raises(ValueError, match="no non-NaN"):
        discrepancy(table.assign(acc=np.nan))


# ---------------------------------------------------------------- tables

def two_eval_records():
    clean = hand_samples()
    attacked = hand_samples().assign(pred=[0, 1, 1, 0, 0, 2])  # a: 1/3, b: 0/2, c: 1/1
    base = {"run_id": "r1", "dataset": "toy", "data_variant": "full", "model": "m",
            "method": "standard", "seed": 3}
    return [({**base, "eval": "clean"}, clean), ({**base, "eval": "pgd20"}, attacked)]


def test_classwise_and_summary_tables():
    table = classwise_table(two_eval_records(), NAMES)
    ids = ["run_id", "dataset", "data_variant", "model", "method", "seed", "eval"]
    assert list(table.columns[:7]) == ids
    assert len(table) == 8
    assert table["seed"].tolist() == [3] * 8
    robust = table[table["eval"] == "pgd20"]
    assert robust["acc"].iloc[:3].tolist() == pytest.approx([1 / 3, 0.0, 1.0])

    summary = summary_table(table)
    assert list(summary.columns[:7]) == ids
    assert summary["eval"].tolist() == ["clean", "pgd20"]
    row = summary.set_index("eval").loc["pgd20"]
    assert row["worst_class"] == "b" and row["worst"] == 0.0
    assert row["mean"] == pytest.approx((1 / 3 + 0 + 1) / 3)
    assert row["overall"] == pytest.approx(2 / 6)
    assert row["gap"] == pytest.approx(1.0)


def test_classwise_table_rejects_inconsistent_records():
    recs = two_eval_records()
    with pytest.raises(ValueError, match="differ from the first"):
        classwise_table([recs[0], ({"eval": "pgd20"}, recs[1][1])], NAMES)
    with pytest.raises(ValueError, match="share the same identifiers"):
        classwise_table([recs[0], recs[0]], NAMES)
    with pytest.raises(ValueError, match="no records"):
        classwise_table([], NAMES)


def seed_table() -> pd.DataFrame:
    rows = [  # (seed, class, n, correct)
        (0, 0, 10, 8), (0, 1, 10, 4),
        (1, 0, 20, 12), (1, 1, 10, 5),
    ]
    df = pd.DataFrame(rows, columns=["seed", "class", "n", "correct"])
    return df.assign(model="m", eval="clean", class_name=df["class"].map({0: "x", 1: "y"}),
                     acc=df["correct"] / df["n"])


def test_seed_aggregate_hand_values():
    agg = seed_aggregate(seed_table(), by=["model", "eval"]).set_index("class")
    assert agg.loc[0, "n_seeds"] == 2
    assert agg.loc[0, "acc"] == pytest.approx(0.7)          # mean of 0.8 and 0.6
    assert agg.loc[0, "acc_std"] == pytest.approx(np.sqrt(0.02))  # ddof=1
    assert agg.loc[0, "n"] == 30 and agg.loc[0, "correct"] == 20
    assert agg.loc[0, "acc_pooled"] == pytest.approx(20 / 30)
    # over seeds and one seed's test images (mean n 15), not Wilson of the pooled 20 of 30
    assert (agg.loc[0, "ci_lo"], agg.loc[0, "ci_hi"]) == pytest.approx(
        accuracy_seed_interval(0.7, np.sqrt(0.02), 2, 15))
    assert agg.loc[0, "ci_hi"] - agg.loc[0, "ci_lo"] > np.subtract(*wilson_interval(20, 30)[::-1])
    assert agg.loc[1, "acc"] == pytest.approx(0.45)
    assert agg.loc[1, "acc_centered"] == pytest.approx(0.45 - (0.7 + 0.45) / 2)
    assert agg.loc[1, "class_name"] == "y"

    summary = summary_table(seed_aggregate(seed_table(), by=["model", "eval"]))
    assert summary.columns[:2].tolist() == ["model", "eval"]
    assert summary.loc[0, "overall"] == pytest.approx(29 / 50)
    assert summary.loc[0, "worst_class"] == "y"


def test_seed_aggregate_asks_for_missing_identifier():
    both = pd.concat([seed_table(), seed_table().assign(eval="pgd20")])
    with pytest.raises(ValueError, match=r"\['eval'\]"):
        seed_aggregate(both, by=["model"])
    with pytest.raises(ValueError, match="lacks column"):
        seed_aggregate(seed_table(), by=["dataset"])
