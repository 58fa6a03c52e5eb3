"""Class-wise discrepancy of groups of runs (docs/study.md#figures, 4-6): worst class, best class,
max - min and standard deviation across classes, each with a 95% interval over seeds and test
samples and its spread over seeds.

The test-sample part comes from a class-stratified bootstrap of the test set computed from the
counts: resampling the n test images of a class with replacement leaves Binomial(n, k/n) of them
correct, so drawing those binomials is the same bootstrap as resampling the per-sample records,
without touching them. Over several seeds it is drawn with one seed's n (the seeds share the test
images) and combined with the t interval of the per-seed statistics by study.metrics.seeds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from study.metrics.seeds import seed_interval
from study.metrics.worst import weakest_class, worst_value

STATS = ("mean", "worst", "best", "gap", "std")


def _stats(acc: np.ndarray) -> dict[str, np.ndarray]:
    """Discrepancy statistics along the last axis (classes) of `acc`."""
    worst = worst_value(acc, axis=-1)
    best = acc.max(axis=-1)
    return {"mean": acc.mean(axis=-1), "worst": worst, "best": best, "gap": best - worst,
            "std": acc.std(axis=-1, ddof=0)}


def bootstrap_discrepancy(
    correct: Sequence[int] | np.ndarray,
    n: Sequence[int] | np.ndarray,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, tuple[float, float]]:
    """Percentile interval of each statistic in STATS from per-class counts (classes with n = 0
    are left out)."""
    correct = np.asarray(correct, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    if correct.shape != n.shape or correct.ndim != 1:
        raise ValueError(f"correct and n must be 1-D of equal length, got {correct.shape} and {n.shape}")
    if ((correct < 0) | (correct > n)).any():
        raise ValueError("correct must lie in [0, n] for every class")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    keep = n > 0
    if not keep.any():
        raise ValueError("no class has test samples")
    return _percentiles(correct[keep] / n[keep], n[keep], n_boot, seed, level)


def _percentiles(p: np.ndarray, n: np.ndarray, n_boot: int, seed: int, level: float) -> dict[str, tuple[float, float]]:
    """Percentile intervals of STATS for class accuracies p, each measured on n test images."""
    rng = np.random.default_rng(seed)
    draws = rng.binomial(n, p, size=(n_boot, len(n))) / n
    tail = (1 - level) / 2 * 100
    return {name: (float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail)))
            for name, values in _stats(draws).items()}


def discrepancy_summary(
    classwise: pd.DataFrame,
    by: Sequence[str],
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per (by..., stat) from a per-run class-wise table (classwise_table output).

    Columns: by..., stat, value (the statistic of the class accuracies pooled over seeds,
    correct / n), ci_lo / ci_hi (95% interval of `value`: the bootstrap over one seed's test
    samples, combined with the t interval of the per-seed statistics by seed_interval; the
    bootstrap alone for one seed), class_name (the class that is worst / best for those
    stats, empty otherwise), n_seeds, seed_mean, seed_min, seed_max (the statistic computed
    seed by seed) and seed_values (';'-joined, for dots).
    """
    by = list(by)
    needed = [*by, "class", "class_name", "n", "correct", "acc"]
    missing = [c for c in needed if c not in classwise.columns]
    if missing:
        raise ValueError(f"class-wise table lacks column(s) {missing}; it has {list(classwise.columns)}")
    if classwise.empty:
        raise ValueError("class-wise table is empty")
    replicate = "seed" if "seed" in classwise.columns else None
    rows = []
    for key, group in classwise.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        ids = dict(zip(by, key, strict=True))
        pooled = group.groupby("class", sort=True).agg(
            class_name=("class_name", "first"), n=("n", "sum"), correct=("correct", "sum"),
            measured=("n", lambda s: int((s > 0).sum())))
        pooled = pooled[pooled["n"] > 0]
        acc = (pooled["correct"] / pooled["n"]).to_numpy(dtype=float)
        value = {k: float(v) for k, v in _stats(acc).items()}
        # The seeds share the test images, so the test-sampling noise is that of one seed's n, not of the sum.
        per_seed_n = np.rint(pooled["n"] / pooled["measured"]).to_numpy(dtype=np.int64)
        within = _percentiles(acc, per_seed_n, n_boot, seed, 0.95)
        names = pooled["class_name"].astype(str).to_numpy()
        which = {"worst": names[weakest_class(acc)], "best": names[int(np.argmax(acc))]}
        per_seed: dict[str, list[float]] = {s: [] for s in STATS}
        for _, one in (group.groupby(replicate, sort=True) if replicate else [(None, group)]):
            values = one["acc"].dropna().to_numpy(dtype=float)
            for name, v in _stats(values).items():
                per_seed[name].append(float(v))
        for stat in STATS:
            seeds = np.asarray(per_seed[stat])
            sd = float(seeds.std(ddof=1)) if len(seeds) > 1 else float("nan")
            lo, hi = seed_interval(value[stat], sd, len(seeds), *within[stat])
            rows.append({**ids, "stat": stat, "value": value[stat], "ci_lo": lo, "ci_hi": hi,
                         "class_name": which.get(stat, ""), "n_seeds": len(seeds),
                         "seed_mean": float(seeds.mean()), "seed_min": float(seeds.min()),
                         "seed_max": float(seeds.max()),
                         "seed_values": ";".join(f"{v:.6g}" for v in seeds)})
    return pd.DataFrame(rows)
