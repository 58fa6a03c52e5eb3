"""The report's verdicts are calibrated: simulated studies, with fixed seeds, run through the
report's own statistics (study.reproduction.statistics) and verdicts (Row.verdict), not a copy.

A simulated arm: CFA's Table 1 row as the truth (mean and worst class; cat the worst class, the
other nine spread evenly above it); each seed moves every class by a shared shift and each class
by its own, then draws each class's test images (binomial), so that the measured mean and worst
class vary over seeds by the published sds (which are spreads of measured values, test-image
noise included). Each seed draws its test outcomes afresh: the seeds disagree image by image, as
models trained with other seeds do.

Rates (printed with `pytest -s`): at no true effect a difference row with a published nonzero
effect agrees at most 5% of the time; random class orders agree at most 5%; a class that is not
the weakest agrees as the weakest at most 5%; at the published effect, with 5 seeds and CIFAR-10's
1,000 test images per class, the rows of CFA's claim (each +CFA method minus its control, best
checkpoint, AutoAttack, mean and worst class) agree at least 80% of the time."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from study.data.classes import CIFAR10_CLASS_NAMES
from study.published import BY_ID, PUBLISHED
from study.reproduction.comparison import Row
from study.reproduction.statistics import difference_estimate, per_seed, rank_correlation, weakest_probability
from study.reproduction.verdicts import AGREES

CAT = CIFAR10_CLASS_NAMES.index("cat")
#: the difference rows CFA's claim rests on: each +CFA method minus its control, best checkpoint, AutoAttack
# CFA Table 1's differences (the later papers' rows have smaller seeds-to-effect ratios, and
# the TRIX authors' table is a rerun: the power claim is CFA's)
CLAIM_ROWS = tuple(p.id for p in PUBLISHED if p.baseline is not None and p.checkpoint == "best"
                   and p.recipe.kind == "autoattack" and p.paper == "wei2023")


def _profile(mean: float, worst: float) -> np.ndarray:
    """Ten class accuracies: cat at `worst`, the others evenly spread from 8 points above it, at `mean`."""
    steps = np.linspace(0.0, 1.0, 9)
    spread = (10 * mean - worst - 9 * (worst + 0.08)) / steps.sum()
    out = np.empty(10)
    out[CAT] = worst
    out[[c for c in range(10) if c != CAT]] = worst + 0.08 + spread * steps
    return out


def _table(rng: np.random.Generator, truth: np.ndarray, seeds: int, n: int, shared_sd: float,
           class_sd: float) -> pd.DataFrame:
    """Class-wise records (the table's columns that the statistics read) of one simulated arm."""
    rows = []
    for seed in range(seeds):
        acc = np.clip(truth + rng.normal(0.0, shared_sd) + rng.normal(0.0, class_sd, truth.size), 0.0, 1.0)
        correct = rng.binomial(n, acc)
        rows += [{"seed": seed, "class": c, "class_name": CIFAR10_CLASS_NAMES[c], "n": n, "acc": correct[c] / n}
                 for c in range(truth.size)]
    return pd.DataFrame(rows)


def _arm(rng: np.random.Generator, mean_row: str, worst_row: str, seeds: int, n: int,
         shift: tuple[float, float] = (0.0, 0.0)) -> pd.DataFrame:
    """An arm whose truth is a published row pair (its mean and worst class, moved by `shift`) and
    whose measured values vary over seeds as the published sds say. A published sd is the spread of
    measured values on the fixed test set, test-image noise included, so the shared and per-class
    shifts make up what the binomial draw of the test images leaves: mean sd^2 = shared^2 + class^2
    / 10 + its binomial variance, worst sd^2 = shared^2 + class^2 + its binomial variance."""
    mean, worst = BY_ID[mean_row], BY_ID[worst_row]
    truth = _profile(mean.value + shift[0], worst.value + shift[1])
    binomial_mean = float(np.mean(truth * (1 - truth) / n)) / truth.size
    binomial_worst = float(truth[CAT] * (1 - truth[CAT]) / n)
    mean_var, worst_var = max(mean.sd**2 - binomial_mean, 0.0), max(worst.sd**2 - binomial_worst, 0.0)
    class_var = max(worst_var - mean_var, 0.0) * 10 / 9
    shared = math.sqrt(max(mean_var - class_var / 10, 0.0))
    return _table(rng, truth, seeds, n, shared, math.sqrt(class_var))


def _pair_ids(published_id: str) -> tuple[str, str]:
    stem = published_id.rsplit("_", 1)[0]
    return f"{stem}_mean", f"{stem}_worst"


def difference_agreement(published_id: str, effect: float, seeds: int, n: int, studies: int, seed: int = 0) -> float:
    """The share of simulated studies whose difference row agrees: the control as its published row,
    the method at the control plus `effect` times the published difference."""
    p = BY_ID[published_id]
    control, method = _pair_ids(p.baseline), _pair_ids(p.id)
    shift = tuple(effect * (BY_ID[m].value - BY_ID[c].value) for m, c in zip(method, control, strict=True))
    column, n_column = ("worst", "worst_n") if p.statistic == "worst" else ("mean", "n")
    rng = np.random.default_rng(seed)
    agree = 0
    for _ in range(studies):
        ours = per_seed(_arm(rng, *control, seeds, n, shift))  # the method: the control's truth, shifted
        theirs = per_seed(_arm(rng, *control, seeds, n))
        whole = n >= p.recipe.test_per_class
        estimate = difference_estimate(ours[column], ours[n_column], theirs[column], theirs[n_column], whole)
        row = Row(p, setting="simulated", estimate=estimate, seeds=seeds, difference_of="method minus control")
        agree += row.verdict == AGREES
    return agree / studies


@pytest.mark.parametrize("published_id", ["cfa_at_cfa_best_autoattack_worst", "cfa_at_cfa_best_autoattack_mean"])
@pytest.mark.parametrize(("seeds", "n"), [(3, 1000), (1, 100)])
def test_no_true_effect_rarely_agrees_with_a_published_effect(published_id, seeds, n):
    rate = difference_agreement(published_id, 0.0, seeds, n, studies=400)
    print(f"false agreement, {published_id}, {seeds} seeds, {n} per class: {rate:.3f}")
    assert rate <= 0.05


def test_the_published_effect_with_five_seeds_on_the_whole_test_set_agrees():
    assert len(CLAIM_ROWS) == 6  # AT, TRADES, FAT + CFA; mean and worst class
    for published_id in CLAIM_ROWS:
        rate = difference_agreement(published_id, 1.0, 5, 1000, studies=200, seed=1)
        print(f"power, {published_id}, 5 seeds, 1000 per class: {rate:.3f}")
        assert rate >= 0.80, published_id


@pytest.mark.parametrize(("seeds", "studies"), [(1, 800), (3, 300)])
def test_random_class_orders_rarely_agree_with_the_published_ranking(seeds, studies):
    p = BY_ID["xu_pgd_at_rank_pgd"]
    rng = np.random.default_rng(seeds)
    agree = 0
    for _ in range(studies):
        truth = rng.permutation(np.linspace(0.2, 0.6, 10))  # an order unrelated to the published one
        estimate = rank_correlation(_table(rng, truth, seeds, 100, 0.0, 0.01), dict(p.order))
        agree += Row(p, setting="simulated", estimate=estimate, seeds=seeds).verdict == AGREES
    print(f"false agreement, random class orders, {seeds} seeds, 100 per class: {agree / studies:.3f}")
    assert agree / studies <= 0.05


@pytest.mark.parametrize(("gap", "seeds", "n"), [(0.01, 3, 1000), (0.02, 1, 100), (0.0, 1, 100)])
def test_a_class_that_is_not_the_weakest_rarely_agrees_as_the_weakest(gap, seeds, n):
    """Cat `gap` above the weakest class (airplane); at gap 0 the two tie and cat is not *the* weakest."""
    p = BY_ID["xu_standard_cat_weakest_clean"]
    rng = np.random.default_rng(7)
    agree, studies = 0, 400
    for _ in range(studies):
        truth = np.linspace(0.5, 0.9, 10)
        truth[CAT] = truth[0] + gap
        estimate = weakest_probability(_table(rng, truth, seeds, n, 0.0, 0.01), "cat")
        agree += Row(p, setting="simulated", estimate=estimate, seeds=seeds).verdict == AGREES
    print(f"false agreement, cat {gap:.2f} above the weakest, {seeds} seeds, {n} per class: {agree / studies:.3f}")
    assert agree / studies <= 0.05
