"""Intervals for figures averaged over training seeds that were scored on one test set.

What this replaces. Pooling the counts of S seeds (sum of correct over sum of n, then a
Wilson interval) treats the S * n predictions as independent draws. They are not: every
seed is scored on the same n test images, so the test-set sampling error is shared by all
seeds and does not shrink with S, and the seeds differ by more than binomial noise (the
training seed changes which classes a model gets right). The pooled interval is about
sqrt(S) too narrow where the test set dominates, and far too narrow where the seeds disagree.

The procedure (MOVER, "method of variance estimates recovery": Zou & Donner 2008,
Newcombe 2011). The estimate m is the mean of the S per-seed values. Its error has two
parts, each with its own interval:

- between seeds: the Student t half-width h = t_{S-1} * sd / sqrt(S), with sd the sample
  standard deviation (ddof=1) of the per-seed values;
- within a seed (test sampling): an interval [l_w, u_w] around m from the test images of
  one seed: Wilson at proportion m with the per-seed n for accuracies, a bootstrap over
  test samples for statistics such as the worst class.

They are added in squares on each side separately, so Wilson's asymmetry near 0 and 1 is
kept:  lo = m - sqrt(h^2 + (m - l_w)^2),  hi = m + sqrt(h^2 + (u_w - m)^2), clipped to [0, 1].

Why this one:
- one seed: h = 0, so the interval is exactly the within-seed one (Wilson for one model);
- identical seeds: sd = 0, so it is the interval of one seed: S copies of a model say no
  more about the test set than one;
- seeds that disagree: h dominates, with the t quantile that few seeds need (4.30 for 3
  seeds). A two-level bootstrap (seeds, then test images) was rejected: resampling 3 seeds
  never reaches past the extreme seeds, and its percentile interval is about
  t_2 / 1.96 * sqrt(3 / 2) = 2.7 times narrower than the t interval;
- it errs on the wide side: sd already holds the part of the test noise where seeds
  disagree image by image, and the within term adds one seed's whole test noise, an upper
  bound of the shared part (the variance of a per-image share of correct seeds is at most
  p(1 - p)); both are exact when the seeds agree on every image.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist

import numpy as np
import pandas as pd

from study.metrics.intervals import ArrayLike, wilson_interval


def _out(values: np.ndarray, index: pd.Index | None) -> ArrayLike:
    if index is not None:
        return pd.Series(values, index=index)
    return float(values) if values.ndim == 0 else values


def seed_interval(
    mean: ArrayLike,
    sd: ArrayLike,
    n_seeds: ArrayLike,
    within_lo: ArrayLike,
    within_hi: ArrayLike,
    z: float = 1.96,
    bounds: tuple[float, float] = (0.0, 1.0),
) -> tuple[ArrayLike, ArrayLike]:
    """Interval for a mean over seeds that share one test set (the module docstring has the why).

    `mean`, `sd` (ddof=1; ignored where n_seeds < 2) and `n_seeds` describe the per-seed
    values; [within_lo, within_hi] is the test-sampling interval of one seed around `mean`.
    The t quantile is taken at the two-sided level that `z` gives the normal (1.96: 95%).
    Elementwise on scalars, arrays and Series (a Series in gives Series out); NaN propagates.
    """
    if not z > 0:
        raise ValueError(f"z must be positive, got {z!r}")
    index = next((v.index for v in (mean, within_lo) if isinstance(v, pd.Series)), None)
    m, s, k, lo_w, hi_w = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in
                                                (mean, sd, n_seeds, within_lo, within_hi)))
    if (k < 1).any():
        raise ValueError("n_seeds must be at least 1")
    several = k >= 2
    t = np.zeros(m.shape)
    if several.any():
        from scipy import stats  # here: scipy.stats costs a second at import, and one seed never needs it

        t = np.where(several, stats.t.ppf(NormalDist().cdf(z), np.where(several, k - 1, 1)), 0.0)
    with np.errstate(invalid="ignore"):
        half = np.where(several, t * s / np.sqrt(k), 0.0)
        # A bootstrap interval of a nonlinear statistic (the worst class) can sit wholly on one
        # side of the plug-in value; that side then adds nothing rather than a negative length.
        below = np.maximum(m - lo_w, 0.0)
        above = np.maximum(hi_w - m, 0.0)
        lo = np.clip(m - np.sqrt(half**2 + below**2), *bounds)
        hi = np.clip(m + np.sqrt(half**2 + above**2), *bounds)
    return _out(lo, index), _out(hi, index)


def accuracy_seed_interval(
    mean: ArrayLike, sd: ArrayLike, n_seeds: ArrayLike, n: ArrayLike, z: float = 1.96
) -> tuple[ArrayLike, ArrayLike]:
    """seed_interval for an accuracy (a share of test samples): `mean` over seeds of the
    per-seed accuracies, `n` the test samples of one seed (their mean when seeds differ).
    The within-seed part is Wilson at `mean` with n samples, so one seed gives Wilson exactly."""
    size = np.asarray(n, dtype=float)
    # mean * n <= n holds exactly in floating point for mean <= 1, so Wilson accepts it.
    lo_w, hi_w = wilson_interval(np.asarray(mean, dtype=float) * size, size, z=z)
    if isinstance(mean, pd.Series):
        lo_w, hi_w = pd.Series(lo_w, index=mean.index), pd.Series(hi_w, index=mean.index)
    return seed_interval(mean, sd, n_seeds, lo_w, hi_w, z=z)


def seed_summary(
    frame: pd.DataFrame, by: Sequence[str], value: str = "acc", n: str = "n", z: float = 1.96
) -> pd.DataFrame:
    """Mean over seeds of the accuracy-like column `value` per `by` group, with its interval.

    Every row of a group is one seed's value, measured on `n` test samples. Rows whose
    value is NaN (no samples) are left out. Columns: by..., n_seeds, <value> (mean over
    seeds), <value>_std (ddof=1, NaN for one seed), n (mean per seed), ci_lo, ci_hi.
    """
    by = list(by)
    missing = [c for c in [*by, value, n] if c not in frame.columns]
    if missing:
        raise ValueError(f"table lacks column(s) {missing}; it has {list(frame.columns)}")
    rows = frame[frame[value].notna()]
    if rows.empty:
        raise ValueError(f"no non-NaN values in column {value!r}")
    # private names so that `value` or `n` may be called "mean", "std", ...
    out = rows.groupby(by, sort=False, dropna=False).agg(
        n_seeds=(value, "size"), _mean=(value, "mean"), _std=(value, "std"), _n=(n, "mean"),  # std: ddof=1
    ).reset_index()
    out["ci_lo"], out["ci_hi"] = accuracy_seed_interval(out["_mean"], out["_std"], out["n_seeds"], out["_n"], z=z)
    return out.rename(columns={"_mean": value, "_std": f"{value}_std", "_n": n})[
        [*by, "n_seeds", value, f"{value}_std", n, "ci_lo", "ci_hi"]]


# ---- Comparing with a published value measured on the same, whole test set ----
#
# A published value (CFA's Table 1) is a mean over the paper's seeds on the whole CIFAR-10 test set;
# its standard deviation is over seeds on that same fixed test set. Where our runs, too, are scored
# on the whole test set with at least two seeds, the question "is our value the published one on
# this test set" has no test-sampling term: the test set is the same on both sides, and what varies
# is training (and the attacks' random starts), which the spread over seeds measures. The interval
# is then a t interval over seeds alone (Welch for a difference of two methods). With one seed no
# spread can be estimated, and on a subset of the test set our value is a sample of the whole one:
# there the test-sampling term is added as above (MOVER with Wilson, `accuracy_seed_interval`).


def _t(z: float, df: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(NormalDist().cdf(z), df))


def whole_test_set_interval(values: Sequence[float] | np.ndarray, n: float, whole_test_set: bool,
                            z: float = 1.96, unseen_sd: float = 0.0) -> tuple[float, float]:
    """95% interval (at `z`) of the mean of per-seed accuracies `values`, each measured on `n`
    test samples: over seeds alone where `whole_test_set` and there are two or more seeds, else
    `accuracy_seed_interval` (seeds and test sampling). One seed shows no spread over seeds:
    `unseen_sd`, the sd over training seeds assumed for it, is then added in squares on each side
    as a known sd (z * unseen_sd, MOVER as above); 0 leaves one seed's Wilson interval."""
    v = np.asarray(values, dtype=float)
    if v.size < 1:
        raise ValueError("values must hold at least one seed's value")
    if not unseen_sd >= 0:
        raise ValueError(f"unseen_sd must be a standard deviation (>= 0), got {unseen_sd!r}")
    k, m = v.size, float(v.mean())
    if whole_test_set and k >= 2:
        half = _t(z, k - 1) * float(v.std(ddof=1)) / np.sqrt(k)
        return max(m - half, 0.0), min(m + half, 1.0)
    if k == 1 and unseen_sd > 0:
        lo_w, hi_w = accuracy_seed_interval(m, float("nan"), 1, float(n), z=z)  # Wilson: one seed's test sampling
        half = z * unseen_sd
        return max(m - float(np.hypot(half, m - lo_w)), 0.0), min(m + float(np.hypot(half, hi_w - m)), 1.0)
    sd = float(v.std(ddof=1)) if k > 1 else float("nan")
    lo, hi = accuracy_seed_interval(m, sd, k, float(n), z=z)
    return float(lo), float(hi)


def difference_interval(a: Sequence[float] | np.ndarray, a_n: float, b: Sequence[float] | np.ndarray, b_n: float,
                        whole_test_set: bool,
                        z: float = 1.96, unseen_sd: float = 0.0) -> tuple[float, float, float]:
    """(mean(a) - mean(b), lo, hi): the difference of two methods' per-seed accuracies. Whole test
    set, two or more seeds each: Welch's t interval (Welch-Satterthwaite degrees of freedom). Else
    MOVER (Newcombe 2011) of each side's `whole_test_set_interval`, which keeps each side's asymmetry;
    a side of one seed adds `unseen_sd`, the seed sd it cannot show, as there."""
    va, vb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    value = float(va.mean() - vb.mean())
    if whole_test_set and va.size >= 2 and vb.size >= 2:
        qa, qb = va.var(ddof=1) / va.size, vb.var(ddof=1) / vb.size
        se = float(np.sqrt(qa + qb))
        if se == 0.0:
            return value, value, value
        df = (qa + qb) ** 2 / (qa**2 / (va.size - 1) + qb**2 / (vb.size - 1))
        half = _t(z, df) * se
        return value, value - half, value + half
    a_lo, a_hi = whole_test_set_interval(va, a_n, False, z, unseen_sd)
    b_lo, b_hi = whole_test_set_interval(vb, b_n, False, z, unseen_sd)
    ma, mb = float(va.mean()), float(vb.mean())
    lo = value - float(np.hypot(ma - a_lo, b_hi - mb))
    hi = value + float(np.hypot(a_hi - ma, mb - b_lo))
    return value, lo, hi
