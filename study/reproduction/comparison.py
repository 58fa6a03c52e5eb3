"""The report's rows: each published value beside one run group of ours (or none: not in this
preset), and each published value that has a baseline as the method minus its baseline.

A row whose recipe differs from the published one is not compared as equal: its verdict is
"recipe differs". Protocol notes that do not change what is measured (our best checkpoint is
chosen on a validation split, the papers' on the test set; fewer seeds) are stated beside it. A
row whose evaluation a check flagged or failed is not counted (study.metrics.trust) and says so.
A ranking whose runs differ from the published recipe only as a CPU-scale recipe does (fewer
epochs or training images, a one-cycle schedule, another copy of the same data:
matching.cpu_recipe) is still compared: its verdict says "at reduced scale".
A row agrees when our interval meets the published value's (mean +- 1.96 sd where the paper gives
sd); a ranking agrees when rho's interval lies above 0."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from study.published import BY_ID, PUBLISHED, Published
from study.reproduction.matching import (
    annotate,
    baseline_group,
    baseline_of,
    candidates,
    closest_groups,
    cpu_recipe,
    flagged,
    notes,
    scale_reductions,
    setting,
)
from study.reproduction.statistics import (
    ClassAccuracy,
    Estimate,
    accuracy_estimate,
    class_estimate,
    difference,
    per_seed,
    rank_correlation,
    ranked,
)

Z95 = 1.96


@dataclass(frozen=True)
class Row:
    """One line of the report: a published value and one run group of ours (or none: not in this
    preset). For a difference row (`published.baseline` set) ours and the published value are
    the method minus its baseline. `reduced_scale`: how the runs were trained at a smaller scale
    than the published recipe (fewer epochs or training images, as the demo preset's CPU recipe)."""

    published: Published
    setting: str = ""
    estimate: Estimate | None = None
    classes: tuple[ClassAccuracy, ...] = ()
    differences: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    flagged: str = ""
    seeds: int = 0
    difference_of: str = ""  # difference rows: "<method> minus <baseline>"
    reduced_scale: tuple[str, ...] = ()
    #: the differences that a CPU-scale recipe makes (matching.cpu_recipe), scale reductions included
    cpu_recipe: tuple[str, ...] = ()

    @property
    def published_value(self) -> float | None:
        p = self.published
        if not self.difference_of:
            return p.value
        return p.value - BY_ID[p.baseline].value

    @property
    def published_sd(self) -> float | None:
        p = self.published
        if not self.difference_of:
            return p.sd
        base = BY_ID[p.baseline]
        return math.hypot(p.sd, base.sd) if p.sd is not None and base.sd is not None else None

    @property
    def verdict(self) -> str:
        if self.estimate is None:
            return "-" if self.setting else "not in this preset"
        if self.flagged:
            return "flagged by checks: not counted"
        ranking = self.published.statistic == "rank"
        if self.differences and ranking and self.reduced_scale and set(self.differences) <= set(self.cpu_recipe):
            # a ranking is a direction, which a smaller recipe can show; a value's size it cannot
            return ("agrees" if self.estimate.lo > 0 else "does not agree") + " at reduced scale"
        if self.differences:
            return "recipe differs: not compared"
        if ranking:
            return "agrees" if self.estimate.lo > 0 else "does not agree"
        value, sd = self.published_value, self.published_sd or 0.0
        meets = self.estimate.lo <= value + Z95 * sd and self.estimate.hi >= value - Z95 * sd
        return "agrees" if meets else "differs"


def _value_row(p: Published, rows: pd.DataFrame, differences: tuple[str, ...]) -> Row:
    seeds = per_seed(rows)
    classes: tuple[ClassAccuracy, ...] = ()
    if p.statistic == "mean":
        estimate = accuracy_estimate(seeds["mean"], seeds["n"])
    elif p.statistic == "worst":
        estimate = accuracy_estimate(seeds["worst"], seeds["worst_n"])
    elif p.statistic == "class":
        estimate = class_estimate(rows, p.class_name)
        if estimate is None:
            differences = (*differences, f"no class {p.class_name} in these runs")
    else:
        by_class = ranked(rows)
        classes = tuple(ClassAccuracy(str(r.class_name), float(r.acc), float(r.ci_lo), float(r.ci_hi))
                        for r in by_class.itertuples())
        estimate = rank_correlation(by_class, dict(p.order))
        if estimate is None:
            differences = (*differences, "none of the published classes in these runs")
    n_seeds = int(rows["seed"].nunique())
    return Row(p, setting(rows), estimate, classes, differences, notes(p, n_seeds), flagged(rows), n_seeds,
               reduced_scale=scale_reductions(p, rows.iloc[0]), cpu_recipe=cpu_recipe(p, rows.iloc[0]))


def _difference_row(table: pd.DataFrame, params: Mapping, p: Published, rows: pd.DataFrame,
                    differences: tuple[str, ...]) -> Row | None:
    base_method = baseline_of(params, str(rows["method"].iloc[0]), BY_ID[p.baseline].method)
    base = baseline_group(table, params, rows, base_method)
    if base is None:
        return None
    column, n = ("worst", "worst_n") if p.statistic == "worst" else ("mean", "n")
    ours, theirs = per_seed(rows), per_seed(base)
    estimate = difference(accuracy_estimate(ours[column], ours[n]), accuracy_estimate(theirs[column], theirs[n]))
    flags = "; ".join(f for f in (flagged(rows), flagged(base)) if f)
    return Row(p, setting(rows, base), estimate, (), differences, notes(p, estimate.seeds), flags, estimate.seeds,
               difference_of=f"{rows['method'].iloc[0]} minus {base['method'].iloc[0]}",
               reduced_scale=scale_reductions(p, rows.iloc[0]), cpu_recipe=cpu_recipe(p, rows.iloc[0]))


def compare(classwise: pd.DataFrame, params: Mapping) -> tuple[list[Row], list[Row]]:
    """(value rows, difference rows): every published value with each closest run group of ours,
    or one row without a run group (not in this preset); and every published value that has a
    baseline, as the method minus its own-form baseline."""
    table = annotate(classwise, params)
    values: list[Row] = []
    deltas: list[Row] = []
    for p in PUBLISHED:
        groups = closest_groups(p, candidates(table, params, p))
        values += [_value_row(p, g, d) for g, d in groups] or [Row(p)]
        if p.baseline is not None:
            made = [_difference_row(table, params, p, g, d) for g, d in groups]
            deltas += [r for r in made if r is not None] or [Row(p, difference_of="-")]
    return values, deltas
