"""The statistics of the report: a mean over seeds with its seed-aware 95% interval (study.metrics.seeds;
Wilson for one seed), a difference between two methods by MOVER (Newcombe 2011), and a class
ranking compared by Spearman's rho with a 95% bootstrap interval over the test samples of each class."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from study.metrics import seed_aggregate
from study.metrics.seeds import accuracy_seed_interval
from study.reproduction.matching import GROUP

BOOTSTRAP_DRAWS = 2000


class Estimate(NamedTuple):
    """A mean over seeds (or a rank correlation) and its 95% interval."""

    value: float
    lo: float
    hi: float
    seeds: int


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


def accuracy_estimate(values: pd.Series, n: pd.Series) -> Estimate:
    """Mean over seeds of an accuracy measured on `n` test samples per seed, seed-aware interval."""
    seeds = int(values.size)
    sd = float(values.std(ddof=1)) if seeds > 1 else math.nan
    lo, hi = accuracy_seed_interval(float(values.mean()), sd, seeds, float(n.mean()))
    return Estimate(float(values.mean()), float(lo), float(hi), seeds)


def difference(a: Estimate, b: Estimate) -> Estimate:
    """a - b for two independent estimates; MOVER keeps each side's asymmetry."""
    value = a.value - b.value
    lo = value - math.hypot(a.value - a.lo, b.hi - b.value)
    hi = value + math.hypot(a.hi - a.value, b.value - b.lo)
    return Estimate(value, lo, hi, min(a.seeds, b.seeds))


def class_estimate(rows: pd.DataFrame, name: str) -> Estimate | None:
    """The accuracy of class `name` over seeds; None when the runs have no such class."""
    per_class = rows[rows["class_name"] == name]
    if per_class.empty:
        return None
    return accuracy_estimate(per_class["acc"].reset_index(drop=True), per_class["n"].reset_index(drop=True))


def ranked(rows: pd.DataFrame) -> pd.DataFrame:
    """The run group's classes aggregated over seeds, weakest first."""
    per_class = seed_aggregate(rows, by=[*GROUP, "eval"])
    # stable: of tied classes the first in class order, as discrepancy's worst and best class
    return per_class[per_class["acc"].notna()].sort_values("acc", kind="stable")


def rank_correlation(classes: pd.DataFrame, order: Mapping[str, float], seed: int = 0) -> Estimate | None:
    """Spearman's rho of our class accuracies (`classes`, from `ranked`) with the published order,
    with a 95% percentile bootstrap interval: each class's correct count drawn again from its test samples."""
    names = [n for n in classes["class_name"] if n in order]
    if len(names) < 3:
        return None
    table = classes.set_index("class_name").loc[names]
    published = np.array([order[n] for n in names], dtype=float)
    acc, n = table["acc_pooled"].to_numpy(float), table["n"].to_numpy(float)

    def rho(values: np.ndarray) -> np.ndarray:
        ours = rankdata(values, axis=-1)
        a = ours - ours.mean(axis=-1, keepdims=True)
        b = rankdata(published) - rankdata(published).mean()
        with np.errstate(invalid="ignore", divide="ignore"):
            return (a @ b) / np.sqrt((a * a).sum(axis=-1) * (b @ b))

    rng = np.random.default_rng(seed)
    draws = rng.binomial(n.astype(int), acc, size=(BOOTSTRAP_DRAWS, len(names))) / np.maximum(n, 1)
    boot = rho(draws)
    lo, hi = np.nanpercentile(boot, [2.5, 97.5])
    return Estimate(float(rho(acc)), float(lo), float(hi), int(classes["n_seeds"].max()))
