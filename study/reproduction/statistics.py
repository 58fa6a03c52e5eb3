"""The statistics of the report: a mean over seeds with its 95% interval (study.metrics.seeds:
over seeds alone where our runs, like the paper's, are scored on the whole test set with two or
more seeds; with test sampling added on a subset or for one seed), a difference between two
methods (Welch, or MOVER), a class ranking compared by Spearman's rho (a permutation test against
random class orders; a seed-aware bootstrap interval), and the probability that a named class is
the weakest and the gap between classes of two run groups (the same bootstrap).

The bootstrap is seed-aware: each draw resamples the seeds (with replacement) and averages each
class over the chosen seeds, then draws the test images of each class again (binomial), once for
all seeds, since every seed was scored on the same test set. Pooling the seeds' counts instead
would treat S seeds on one test set as S times the test images.

One seed shows no spread over seeds, though models trained with other seeds differ: its interval
and its bootstrap assume the seed sd of `UNSEEN_SEED_SD` (the module's constant says where it comes
from), so that one seed is not read as if training were repeatable."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from study.metrics.classwise import seed_aggregate
from study.metrics.seeds import difference_interval, whole_test_set_interval
from study.reproduction.matching import GROUP

BOOTSTRAP_DRAWS = 2000
PERMUTATIONS = 10000
#: the sd over training seeds that one seed cannot show, per statistic (a fraction of accuracy): the
#: largest sd over seeds that the published tables report for it (study.published: CFA's Table 1, 5
#: seeds, mean class accuracy 0.8 points, the worst class 2.4 points; DAFA's and TRIX's tables stay
#: under both). One class's accuracy, which the worst class is, takes the worst class's; the
#: bootstrap of the class order (`class_draws`) moves each class by it independently.
UNSEEN_SEED_SD = {"mean": 0.008, "worst": 0.024, "class": 0.024}


class Estimate(NamedTuple):
    """A mean over seeds (or a rank correlation, or a probability) and its 95% interval.

    `p_value`: a ranking's permutation p-value; `detectable`: a ranking's smallest rho the
    permutation test detects, a named-class claim's smallest gap to the next class it detects
    (NaN where the row's interval says it)."""

    value: float
    lo: float
    hi: float
    seeds: int
    p_value: float = math.nan
    detectable: float = math.nan


class ClassAccuracy(NamedTuple):
    name: str
    acc: float
    lo: float
    hi: float


def per_seed(rows: pd.DataFrame) -> pd.DataFrame:
    """Per seed: mean class accuracy with its test samples, and the worst class with its samples."""
    by_seed = rows.groupby("seed", sort=True)
    worst_n = rows.loc[rows["acc"].notna()].sort_values("acc", kind="stable").groupby("seed")["n"].first()
    return pd.DataFrame({"mean": by_seed["acc"].mean(), "n": by_seed["n"].sum(),
                         "worst": by_seed["acc"].min(), "worst_n": worst_n})


def _unseen_sd(statistic: str) -> float:
    if statistic not in UNSEEN_SEED_SD:
        raise ValueError(f"no seed sd is assumed for statistic {statistic!r}; one of {sorted(UNSEEN_SEED_SD)}")
    return UNSEEN_SEED_SD[statistic]


def accuracy_estimate(values: pd.Series | np.ndarray, n: pd.Series | np.ndarray, whole_test_set: bool,
                      statistic: str) -> Estimate:
    """Mean over seeds of an accuracy `statistic` ("mean", "worst" or "class") measured on `n` test
    samples per seed, with its interval (study.metrics.seeds.whole_test_set_interval; one seed adds
    the statistic's `UNSEEN_SEED_SD`)."""
    v = np.asarray(values, dtype=float)
    lo, hi = whole_test_set_interval(v, float(np.mean(n)), whole_test_set, unseen_sd=_unseen_sd(statistic))
    return Estimate(float(v.mean()), lo, hi, int(v.size))


def difference_estimate(ours: pd.Series | np.ndarray, ours_n: pd.Series | np.ndarray,
                        theirs: pd.Series | np.ndarray, theirs_n: pd.Series | np.ndarray,
                        whole_test_set: bool, statistic: str) -> Estimate:
    """Our method minus its control, per-seed accuracies `statistic` ("mean" or "worst") of each
    (study.metrics.seeds.difference_interval; a side of one seed adds the statistic's `UNSEEN_SEED_SD`)."""
    a, b = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    value, lo, hi = difference_interval(a, float(np.mean(ours_n)), b, float(np.mean(theirs_n)), whole_test_set,
                                        unseen_sd=_unseen_sd(statistic))
    return Estimate(value, lo, hi, int(min(a.size, b.size)))


def class_estimate(rows: pd.DataFrame, name: str, whole_test_set: bool = False) -> Estimate | None:
    """The accuracy of class `name` over seeds; None when the runs have no such class."""
    per_class = rows[rows["class_name"] == name]
    if per_class.empty:
        return None
    return accuracy_estimate(per_class["acc"].to_numpy(float), per_class["n"].to_numpy(float), whole_test_set,
                             "class")


def ranked(rows: pd.DataFrame) -> pd.DataFrame:
    """The run group's classes aggregated over seeds, weakest first."""
    per_class = seed_aggregate(rows, by=[*GROUP, "eval"])
    # stable: of tied classes the first in class order, as discrepancy's worst and best class
    return per_class[per_class["acc"].notna()].sort_values("acc", kind="stable")


class ClassDraws(NamedTuple):
    """The classes of one run group: names, the mean over seeds of each, and bootstrap draws of it."""

    names: tuple[str, ...]
    observed: np.ndarray  # (classes,)
    draws: np.ndarray  # (BOOTSTRAP_DRAWS, classes)
    seeds: int


def class_draws(rows: pd.DataFrame, seed: int = 0, draws: int = BOOTSTRAP_DRAWS,
                unseen_sd: float = UNSEEN_SEED_SD["class"]) -> ClassDraws:
    """The seed-aware bootstrap of a run group's class accuracies (module docstring). Classes
    without test samples in some seed are left out."""
    measured = rows[rows["acc"].notna() & (rows["n"] > 0)]
    seeds, seed_at = np.unique(measured["seed"].to_numpy(), return_inverse=True)
    classes, class_at = np.unique(measured["class"].to_numpy(), return_inverse=True)
    acc, n = np.full((seeds.size, classes.size), np.nan), np.full((seeds.size, classes.size), np.nan)
    acc[seed_at, class_at] = measured["acc"].to_numpy(float)
    n[seed_at, class_at] = measured["n"].to_numpy(float)
    complete = ~(np.isnan(acc).any(axis=0) | np.isnan(n).any(axis=0))
    name_of = dict(zip(measured["class"], measured["class_name"].astype(str), strict=True))
    names = tuple(name_of[c] for c in classes[complete])
    observed, means = bootstrap_classes(acc[:, complete], n[:, complete], seed, draws, unseen_sd)
    return ClassDraws(names, observed, means, acc.shape[0])


def bootstrap_classes(acc: np.ndarray, n: np.ndarray, seed: int = 0, draws: int = BOOTSTRAP_DRAWS,
                      unseen_sd: float = UNSEEN_SEED_SD["class"]) -> tuple[np.ndarray, np.ndarray]:
    """(observed, draws): the mean over seeds of each class of `acc` (seeds x classes, each class
    measured on `n` test samples) and `draws` seed-aware bootstrap draws of it. One seed shows no
    spread over seeds: each draw then moves each class by a normal of sd `unseen_sd` (a class's
    seed sd assumed, `UNSEEN_SEED_SD`)."""
    if acc.ndim != 2 or acc.shape != n.shape:
        raise ValueError(f"acc and n must both be seeds x classes, got shapes {acc.shape} and {n.shape}")
    if not unseen_sd >= 0:
        raise ValueError(f"unseen_sd must be a standard deviation (>= 0), got {unseen_sd!r}")
    rng = np.random.default_rng(seed)
    k = acc.shape[0]
    observed = acc.mean(axis=0)
    means = acc[rng.integers(k, size=(draws, k))].mean(axis=1)
    if k > 1:
        # resampling S seeds spreads their mean by sqrt((S - 1) / S) of its standard error (the
        # plug-in variance): widened back, so that 3 seeds do not look 1.2 times as sure as they are
        means = observed + np.sqrt(k / (k - 1)) * (means - observed)
    elif unseen_sd > 0:
        # resampling one seed draws it again and again: the seed variance that other seeds would
        # show is not in it, and without it one model's class order would pass for every model's
        means = means + rng.normal(0.0, unseen_sd, size=means.shape)
    # the test images, drawn again once per draw and shared by every seed: the seeds were scored on
    # one test set, so its sampling error does not shrink with their number
    size = np.rint(n.mean(axis=0)).astype(np.int64)
    means = means + rng.binomial(size, observed, size=(draws, observed.size)) / np.maximum(size, 1) - observed
    return observed, means


def spread_difference(rows: pd.DataFrame, base: pd.DataFrame, seed: int = 0) -> Estimate:
    """The gap between classes (best minus worst class accuracy, over seeds) of `rows` minus that
    of `base`, with a seed-aware bootstrap 95% interval (each group drawn on its own, as in
    `class_draws`). The basic bootstrap: the maximum minus the minimum of noisy class means is
    larger than the true gap, and the draws, noisier still, more so; reflecting the draws' spread
    about the observed value takes that bias back out."""
    ours, theirs = class_draws(rows, seed), class_draws(base, seed + 1)
    observed = float(np.ptp(ours.observed) - np.ptp(theirs.observed))
    draws = np.ptp(ours.draws, axis=1) - np.ptp(theirs.draws, axis=1)
    q_lo, q_hi = np.percentile(draws, [2.5, 97.5])
    return Estimate(observed, float(2 * observed - q_hi), float(2 * observed - q_lo), min(ours.seeds, theirs.seeds))


def _rho(ours: np.ndarray, published_ranks: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row of `ours` (values) with each row of `published_ranks` (ranks)."""
    a = rankdata(ours, axis=-1)
    a = a - a.mean(axis=-1, keepdims=True)
    b = published_ranks - published_ranks.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(axis=-1) / np.sqrt((a * a).sum(axis=-1) * (b * b).sum(axis=-1))


def rank_correlation(rows: pd.DataFrame, order: Mapping[str, float], seed: int = 0) -> Estimate | None:
    """Spearman's rho of our class accuracies (mean over seeds) with the published order: its
    seed-aware 95% bootstrap interval, its p-value against random class orders (the published
    ranks permuted over the classes) and the rho those orders reach in 5% of cases (`detectable`).
    None for fewer than three published classes in the runs."""
    classes = class_draws(rows, seed)
    keep = [i for i, name in enumerate(classes.names) if name in order]
    if len(keep) < 3:
        return None
    published = rankdata([order[classes.names[i]] for i in keep])
    observed = float(_rho(classes.observed[keep], published))
    boot = _rho(classes.draws[:, keep], published)
    lo, hi = np.nanpercentile(boot, [2.5, 97.5])
    rng = np.random.default_rng(seed + 1)
    null = _rho(classes.observed[keep], rng.permuted(np.tile(published, (PERMUTATIONS, 1)), axis=1))
    p_value = (1 + int(np.sum(null >= observed - 1e-12))) / (1 + PERMUTATIONS)
    return Estimate(observed, float(lo), float(hi), classes.seeds, p_value, float(np.quantile(null, 0.95)))


def weakest_probability(rows: pd.DataFrame, name: str, seed: int = 0) -> Estimate | None:
    """The probability that class `name` is the weakest of the run group, over the seed-aware
    bootstrap (ties share the draw), as `value` (and `lo`, `hi`); `detectable`: the smallest
    gap between it and the weakest other class that the runs detect (2.8 bootstrap standard
    deviations of that gap). None when the runs have no such class."""
    classes = class_draws(rows, seed)
    if name not in classes.names:
        return None
    return weakest_estimate(classes.draws, classes.names.index(name), classes.seeds)


def weakest_estimate(draws: np.ndarray, i: int, seeds: int) -> Estimate:
    """`weakest_probability` of class `i` from the bootstrap `draws` (draws x classes) of `seeds` seeds."""
    lowest = draws.min(axis=1)
    ties = (draws == lowest[:, None]).sum(axis=1)
    probability = float(np.mean(np.where(draws[:, i] == lowest, 1.0 / ties, 0.0)))
    others = np.delete(draws, i, axis=1).min(axis=1)
    gap_sd = float(np.std(draws[:, i] - others, ddof=1))
    return Estimate(probability, probability, probability, seeds, detectable=(1.96 + 0.8416) * gap_sd)
