"""FRL errors, CFP, confusion matrices and worst-10% against hand-computed values."""

import numpy as np
import pandas as pd
import pytest

from study.metrics.robustness import (
    class_false_positive,
    confusion_matrix,
    frl_errors,
    frl_summary,
)
from study.metrics.worst import worst_fraction_mean, worst_value

# 3 classes, 2 samples each.
LABELS = [0, 0, 1, 1, 2, 2]
CLEAN = pd.DataFrame({"index": range(6), "label": LABELS, "pred": [0, 0, 1, 2, 2, 2]})
ADV = pd.DataFrame({"index": range(6), "label": LABELS, "pred": [0, 1, 1, 0, 1, 1]})


def test_frl_errors_by_hand():
    e = frl_errors(CLEAN, ADV, ["a", "b", "c"]).set_index("class_name")
    # a: clean 2/2, robust 1/2; b: clean 1/2, robust 1/2; c: clean 2/2, robust 0/2
    assert e.loc["a", ["standard_error", "boundary_error", "robust_error"]].tolist() == [0.0, 0.5, 0.5]
    assert e.loc["b", ["standard_error", "boundary_error", "robust_error"]].tolist() == [0.5, 0.0, 0.5]
    assert e.loc["c", ["standard_error", "boundary_error", "robust_error"]].tolist() == [0.0, 1.0, 1.0]
    s = frl_summary(e)
    assert s["robust_error_avg"] == pytest.approx(2 / 3) and s["robust_error_worst"] == 1.0
    assert s["standard_error_worst"] == 0.5 and s["boundary_error_avg"] == pytest.approx(0.5)


def test_frl_counts_a_sample_robust_only_if_also_clean_correct():
    clean = CLEAN.assign(pred=[1, 0, 1, 1, 2, 2])  # sample 0 wrong clean, right under attack
    adv = ADV.assign(pred=[0, 0, 1, 1, 2, 2])
    e = frl_errors(clean, adv, ["a", "b", "c"]).set_index("class_name")
    assert e.loc["a", "robust_error"] == 0.5 and e.loc["a", "boundary_error"] == 0.0


def test_frl_on_an_attacked_subset_and_rejects_samples_missing_clean():
    e = frl_errors(CLEAN, ADV.iloc[:4], ["a", "b", "c"]).set_index("class_name")
    assert e["n"].tolist() == [2, 2, 0]
    with pytest.raises(ValueError, match="not in the clean record"):
        frl_errors(CLEAN.iloc[:4], ADV, ["a", "b", "c"])


def test_cfp_and_confusion_by_hand():
    # misclassified under attack: 1->1? no: sample1 (0->1), sample3 (1->0), 4 (2->1), 5 (2->1): 4 wrong
    cfp = class_false_positive(ADV, 3)
    assert cfp.tolist() == [0.25, 0.75, 0.0]
    cm = confusion_matrix(ADV, 3)
    assert cm.tolist() == [[1, 1, 0], [1, 1, 0], [0, 2, 0]]
    assert class_false_positive(CLEAN.assign(pred=LABELS), 3).tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="outside"):
        confusion_matrix(ADV.assign(pred=[0, 0, 0, 0, 0, 3]), 3)


def test_worst_fraction_mean():
    assert worst_fraction_mean([0.9, 0.5, 0.7]) == 0.5
    vals = np.linspace(0, 0.99, 100)
    assert worst_fraction_mean(vals) == pytest.approx(vals[:10].mean())


def test_worst_value_is_the_weakest_class_for_ten_and_the_weakest_tenth_for_a_hundred():
    rng = np.random.default_rng(0)
    ten = rng.uniform(size=10)
    assert worst_value(ten) == ten.min()
    hundred = rng.uniform(size=100)
    assert worst_value(hundred) == pytest.approx(np.sort(hundred)[:10].mean())
    # along the class axis of a bootstrap array, row by row
    rows = rng.uniform(size=(5, 100))
    assert np.allclose(worst_value(rows, axis=-1), np.sort(rows, axis=1)[:, :10].mean(axis=1))
