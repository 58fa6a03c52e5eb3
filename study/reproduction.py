"""The reproduction report (results/reproduction.md): our numbers beside the published ones
that docs/study.md#expected-results states, with their sources under #published-numbers.

Every published claim is one `Claim` in CLAIMS. A claim is matched to the runs of the
class-wise table by what the runs are, not by their names, because names differ by preset
(the PGD evaluation is `pgd20` in the paper preset and `pgd3` in ci; PGD-AT is `pgd_at` in the
baseline group and `at` in the mitigation group):

- dataset and, where the claim names one, the architecture;
- the method: a run matches when its resolved policies (study.config.resolve_method) equal
  those of the claim's reference method;
- the checkpoint (`<evaluation>@best` is the best checkpoint on validation, else the last);
- the published recipe (SGD, step schedule, weight decay 5e-4), so the optimization group's
  Adam and cyclic runs do not stand in for it;
- the evaluation's settings from params: clean, or PGD / AutoAttack at L-inf 8/255; of several
  such PGD evaluations the one whose step count is nearest the published 20.

Ours is the mean over seeds with the seed-aware 95% interval of study.metrics.seeds (Wilson for
one seed). A difference between two methods combines their intervals by MOVER (Newcombe 2011),
the procedure study.metrics.seeds uses for its two error parts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from study.config import ConfigError, method_definition, resolve_evaluation, resolve_method
from study.io import atomic_write_text
from study.metrics import seed_aggregate, wilson_interval
from study.metrics.seeds import accuracy_seed_interval, seed_interval
from study.provenance import git_commit
from study.runs import SETTING_COLUMNS

PUBLISHED_EPS = 8 / 255
PUBLISHED_PGD_STEPS = 20
PUBLISHED_EPOCHS = 200  # PreAct-ResNet18 on CIFAR (Rice et al. 2020 settings, used by CFA and FAIR-TAT)
FRL_EPOCHS = 120  # FRL fine-tunes a PGD-AT model for 120 epochs
# A run with fewer than half the published epochs has not reached the published training
# regime (the lr is still at its first value, and PGD-AT's best checkpoint comes after the first decay).
SHORT_FRACTION = 0.5
PUBLISHED_RECIPE = {"optimizer": "sgd", "schedule": "step", "weight_decay": 5e-4}
# One run group is one configuration trained with several seeds.
GROUP = ["dataset", "data_variant", "model", "method", *SETTING_COLUMNS]

# How the report reads the expectations of docs/study.md#expected-results as ranges (fractions of the test set).
LOW_TO_MID_80S = (0.80, 0.86)
AROUND_50 = (0.47, 0.53)
A_FEW_POINTS = (0.02, 0.06)
SMALL_COST = (-0.03, 0.0)

_SECTION = "docs/study.md#expected-results; the published numbers behind them: docs/study.md#published-numbers"
_AT_NUMBERS = ("A PGD-AT PreAct-ResNet18 lands in the low-to-mid 80s clean and around 50% PGD-20 at its best "
               "checkpoint, with AutoAttack a few points lower.")
_STANDARD_RANK = "Standard training is already unequal (cat lowest)."
_AT_RANK = ("PGD-AT lowers clean accuracy for every class and widens the gap in both accuracy and robustness; "
            "the weakest classes are cat, then bird, deer and dog; the strongest car, ship and truck.")
_FAIRNESS = "Fairness methods raise the worst class by a few points at a small cost in the mean."
# CFA, FAIR-TAT and FRL on PGD-AT: the fairness methods that docs/study.md#expected-results compares with PGD-AT itself.
_FAIR_METHODS = ("pgd_at_cfa", "pgd_at_fairtat", "frl_reweight", "frl_remargin", "frl_reweight_remargin")
_WEAKEST4 = ("cat", "bird", "deer", "dog")
_STRONGEST3 = ("automobile", "ship", "truck")


@dataclass(frozen=True)
class Claim:
    """One published number or class ranking and what our runs must be to be compared with it.

    statistic: `mean` (mean class accuracy), `drop` (mean accuracy under `kind` minus under
    `other_kind`, same runs), `weakest` / `strongest` (the len(classes) weakest / strongest
    classes are `classes`; for `weakest` the first named is the weakest), `worst_change` /
    `mean_change` (worst-class / mean accuracy of the method minus that of `baseline`).
    """

    id: str
    text: str
    dataset: str
    model: str | None  # None: any architecture (the claim is about the dataset and the method)
    methods: tuple[str, ...]  # reference methods of params; runs match them by resolved policies
    kind: str  # clean | pgd | autoattack
    checkpoint: str  # best | last
    statistic: str
    published: tuple[float, float] | None = None
    classes: tuple[str, ...] = ()
    source: str = ""
    other_kind: str | None = None
    baseline: str | None = None
    epochs: int = PUBLISHED_EPOCHS


CLAIMS: tuple[Claim, ...] = (
    Claim("at_clean", "PGD-AT PreAct-ResNet18, clean accuracy (best checkpoint)", "cifar10", "preact_resnet18",
          ("pgd_at",), "clean", "best", "mean", published=LOW_TO_MID_80S, source=_AT_NUMBERS),
    Claim("at_pgd20", "PGD-AT PreAct-ResNet18, PGD-20 accuracy (best checkpoint)", "cifar10", "preact_resnet18",
          ("pgd_at",), "pgd", "best", "mean", published=AROUND_50, source=_AT_NUMBERS),
    Claim("at_autoattack_drop", "PGD-AT PreAct-ResNet18, AutoAttack below PGD-20 (best checkpoint)", "cifar10",
          "preact_resnet18", ("pgd_at",), "pgd", "best", "drop", published=A_FEW_POINTS, source=_AT_NUMBERS,
          other_kind="autoattack"),
    Claim("standard_weakest", "standard training: the weakest class is cat (clean)", "cifar10", None,
          ("standard",), "clean", "last", "weakest", classes=("cat",), source=_STANDARD_RANK),
    Claim("at_weakest_clean", "PGD-AT: weakest classes cat, then bird, deer, dog (clean)", "cifar10", None,
          ("pgd_at",), "clean", "last", "weakest", classes=_WEAKEST4, source=_AT_RANK),
    Claim("at_weakest_pgd", "PGD-AT: weakest classes cat, then bird, deer, dog (PGD)", "cifar10", None,
          ("pgd_at",), "pgd", "last", "weakest", classes=_WEAKEST4, source=_AT_RANK),
    Claim("at_strongest_clean", "PGD-AT: strongest classes car, ship, truck (clean)", "cifar10", None,
          ("pgd_at",), "clean", "last", "strongest", classes=_STRONGEST3, source=_AT_RANK),
    Claim("at_strongest_pgd", "PGD-AT: strongest classes car, ship, truck (PGD)", "cifar10", None,
          ("pgd_at",), "pgd", "last", "strongest", classes=_STRONGEST3, source=_AT_RANK),
    Claim("fair_worst_gain", "fairness method vs PGD-AT: worst-class PGD accuracy gain (best checkpoint)",
          "cifar10", None, _FAIR_METHODS, "pgd", "best", "worst_change", published=A_FEW_POINTS,
          source=_FAIRNESS, baseline="pgd_at"),
    Claim("fair_mean_cost", "fairness method vs PGD-AT: change of mean PGD accuracy (best checkpoint)",
          "cifar10", None, _FAIR_METHODS, "pgd", "best", "mean_change", published=SMALL_COST,
          source=_FAIRNESS, baseline="pgd_at"),
)


class Estimate(NamedTuple):
    """A mean over seeds and its 95% interval (fractions)."""

    value: float
    lo: float
    hi: float
    seeds: int


class ClassAccuracy(NamedTuple):
    name: str
    acc: float
    lo: float
    hi: float


class RunLength(NamedTuple):
    """How long a compared run group trained, beside the published length."""

    epochs: int
    published: int
    train_per_class: float  # NaN: the whole training set


@dataclass(frozen=True)
class Row:
    """One line of the report: a claim and one run group of ours (or none: not in this preset)."""

    claim: Claim
    setting: str = ""
    estimate: Estimate | None = None
    weakest: tuple[ClassAccuracy, ...] = ()
    strongest: tuple[ClassAccuracy, ...] = ()
    within: bool | None = None
    runs: tuple[RunLength, ...] = ()
    seeds: int = 0

    @property
    def short(self) -> bool:
        """Whether a compared run trained much shorter than published, or on a subset of the training set."""
        return any(_short(run) for run in self.runs)

    @property
    def difference(self) -> float | None:
        """Ours minus the nearest end of the published range; 0 inside it."""
        if self.estimate is None or self.claim.published is None:
            return None
        low, high = self.claim.published
        value = self.estimate.value
        return value - low if value < low else value - high if value > high else 0.0


# ------------------------------------------------------------------ matching runs to claims


def _evaluation_kind(params: Mapping, name: str, dataset: str) -> tuple[str | None, float]:
    """clean, pgd or autoattack (at the published L-inf 8/255) with the PGD step count; None otherwise."""
    try:
        ev = resolve_evaluation(params, name, dataset)
    except ConfigError:
        return None, math.nan
    if ev["type"] == "clean":
        return "clean", math.nan
    eps = float(ev.get("eps", math.nan))
    if ev.get("norm") != "linf" or not math.isclose(eps, PUBLISHED_EPS, rel_tol=1e-6):
        return None, math.nan
    if ev["type"] in ("pgd", "autoattack"):
        return ev["type"], float(ev.get("steps", math.nan))
    return None, math.nan


def _annotate(classwise: pd.DataFrame, params: Mapping) -> pd.DataFrame:
    """The class-wise table with each row's checkpoint, evaluation kind and PGD steps."""
    table = classwise.copy()
    parts = table["eval"].astype(str).str.partition("@")
    table["evaluation"] = parts[0]
    table["checkpoint"] = parts[2].where(parts[2] != "", "last")
    keys = list(zip(table["evaluation"], table["dataset"].astype(str), strict=True))
    kinds = {key: _evaluation_kind(params, *key) for key in set(keys)}
    table["kind"] = [kinds[key][0] for key in keys]
    table["steps"] = [kinds[key][1] for key in keys]
    return table


def _policies(params: Mapping, method: str) -> dict | None:
    try:
        return resolve_method(params, method)
    except ConfigError:
        return None


def _equivalent_methods(params: Mapping, present: Iterable[str], references: Iterable[str]) -> set[str]:
    """The methods of the table whose policies equal those of one of the reference methods."""
    wanted = [p for p in (_policies(params, r) for r in references) if p is not None]
    return {m for m in present if (p := _policies(params, m)) is not None and p in wanted}


def _published_recipe(table: pd.DataFrame) -> pd.Series:
    return ((table["optimizer"] == PUBLISHED_RECIPE["optimizer"]) & (table["schedule"] == PUBLISHED_RECIPE["schedule"])
            & np.isclose(table["weight_decay"].astype(float), PUBLISHED_RECIPE["weight_decay"]))


def _candidates(table: pd.DataFrame, claim: Claim, methods: set[str], kind: str) -> pd.DataFrame:
    keep = ((table["dataset"] == claim.dataset) & table["method"].isin(methods)
            & (table["checkpoint"] == claim.checkpoint) & (table["kind"] == kind) & _published_recipe(table))
    if "train_data" in table:  # models trained on a constructed feature dataset are another question
        keep &= table["train_data"].fillna("original") == "original"
    if claim.model is not None:
        keep &= table["model"] == claim.model
    return table[keep]


def _preferred_evaluation(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of one evaluation: of several PGD evaluations the one nearest PGD-20."""
    order = rows.assign(_distance=(rows["steps"] - PUBLISHED_PGD_STEPS).abs()).sort_values(
        ["_distance", "steps", "eval"], ascending=[True, False, True], na_position="last")
    return rows[rows["eval"] == order["eval"].iloc[0]]


def _groups(rows: pd.DataFrame) -> list[pd.DataFrame]:
    """One frame per run group (all seeds of one configuration), of its preferred evaluation."""
    if rows.empty:
        return []
    return [_preferred_evaluation(group) for _, group in rows.groupby(GROUP, sort=True, dropna=False)]


def _published_epochs(params: Mapping, method: str, default: int) -> int:
    try:
        fine_tuned = "init_from" in method_definition(params, method)
    except ConfigError:
        fine_tuned = False
    return FRL_EPOCHS if fine_tuned else default


def _run_length(params: Mapping, rows: pd.DataFrame, default: int) -> RunLength:
    first = rows.iloc[0]
    return RunLength(int(first["epochs"]), _published_epochs(params, str(first["method"]), default),
                     float(first["train_per_class"]) if pd.notna(first["train_per_class"]) else math.nan)


def _setting(rows: pd.DataFrame, versus: pd.DataFrame | None = None, minus: str | None = None) -> str:
    """The compared runs in words: model, method (vs the baseline's), evaluation (minus another), length."""
    first = rows.iloc[0]
    method = str(first["method"]) if versus is None else f"{first['method']} vs {versus['method'].iloc[0]}"
    parts = [str(first["model"]), method, str(first["eval"])]
    if first["kind"] == "pgd" and first["steps"] != PUBLISHED_PGD_STEPS:
        parts[-1] += f" ({first['steps']:g} PGD steps)"
    if minus is not None:
        parts[-1] += f" minus {minus}"
    parts.append(f"{int(first['epochs'])} epochs")
    if pd.notna(first["train_per_class"]):
        parts.append(f"{int(first['train_per_class'])} train images/class")
    if first["data_variant"] not in ("official", "default"):
        parts.append(f"{first['data_variant']} variant")
    return ", ".join(parts)


# ------------------------------------------------------------------ statistics over seeds


def _per_seed(rows: pd.DataFrame) -> pd.DataFrame:
    """Per seed: mean class accuracy with its test samples, and the worst class with its samples."""
    by_seed = rows.groupby("seed", sort=True)
    worst_n = rows.loc[rows["acc"].notna()].sort_values("acc", kind="stable").groupby("seed")["n"].first()
    return pd.DataFrame({"mean": by_seed["acc"].mean(), "n": by_seed["n"].sum(),
                         "worst": by_seed["acc"].min(), "worst_n": worst_n})


def _accuracy_estimate(values: pd.Series, n: pd.Series) -> Estimate:
    """Mean over seeds of an accuracy measured on `n` test samples per seed, seed-aware interval."""
    seeds = int(values.size)
    sd = float(values.std(ddof=1)) if seeds > 1 else math.nan
    lo, hi = accuracy_seed_interval(float(values.mean()), sd, seeds, float(n.mean()))
    return Estimate(float(values.mean()), float(lo), float(hi), seeds)


def _difference(a: Estimate, b: Estimate) -> Estimate:
    """a - b for two independent estimates; MOVER keeps each side's asymmetry."""
    value = a.value - b.value
    lo = value - math.hypot(a.value - a.lo, b.hi - b.value)
    hi = value + math.hypot(a.hi - a.value, b.value - b.lo)
    return Estimate(value, lo, hi, min(a.seeds, b.seeds))


def _paired_drop(a: pd.DataFrame, b: pd.DataFrame) -> Estimate | None:
    """Mean over seeds of a seed's accuracy under one evaluation minus under another.

    The seeds pair the two: a t interval over the per-seed differences, and within a seed the
    MOVER combination of the two Wilson intervals (it ignores that both score the same images,
    so it errs on the wide side, as study.metrics.seeds does)."""
    both = a[["mean", "n"]].merge(b[["mean", "n"]], left_index=True, right_index=True, suffixes=("_a", "_b"))
    if both.empty:
        return None
    diff = both["mean_a"] - both["mean_b"]
    pa, pb, na, nb = both["mean_a"].mean(), both["mean_b"].mean(), both["n_a"].mean(), both["n_b"].mean()
    la, ua = wilson_interval(pa * na, na)
    lb, ub = wilson_interval(pb * nb, nb)
    value = float(diff.mean())
    within_lo = value - math.hypot(pa - la, ub - pb)
    within_hi = value + math.hypot(ua - pa, pb - lb)
    sd = float(diff.std(ddof=1)) if len(diff) > 1 else math.nan
    lo, hi = seed_interval(value, sd, len(diff), within_lo, within_hi, bounds=(-1.0, 1.0))
    return Estimate(value, float(lo), float(hi), len(diff))


def _within(claim: Claim, estimate: Estimate) -> bool:
    low, high = claim.published
    return low <= estimate.value <= high


# ------------------------------------------------------------------ one row per run group


def _mean_row(table: pd.DataFrame, params: Mapping, claim: Claim, rows: pd.DataFrame) -> Row | None:
    seeds = _per_seed(rows)
    estimate = _accuracy_estimate(seeds["mean"], seeds["n"])
    return Row(claim, _setting(rows), estimate, within=_within(claim, estimate),
               runs=(_run_length(params, rows, claim.epochs),), seeds=estimate.seeds)


def _drop_row(table: pd.DataFrame, params: Mapping, claim: Claim, rows: pd.DataFrame) -> Row | None:
    same_runs = table[table["run_id"].isin(rows["run_id"].unique()) & (table["checkpoint"] == claim.checkpoint)
                      & (table["kind"] == claim.other_kind)]
    if same_runs.empty:
        return None
    other = _preferred_evaluation(same_runs)
    estimate = _paired_drop(_per_seed(rows), _per_seed(other))
    if estimate is None:
        return None
    return Row(claim, _setting(rows, minus=str(other["eval"].iloc[0])), estimate, within=_within(claim, estimate),
               runs=(_run_length(params, rows, claim.epochs),), seeds=estimate.seeds)


def _ranking_row(table: pd.DataFrame, params: Mapping, claim: Claim, rows: pd.DataFrame) -> Row | None:
    per_class = seed_aggregate(rows, by=[*GROUP, "eval"])
    per_class = per_class[per_class["acc"].notna()]

    def ranked(ascending: bool, k: int) -> tuple[ClassAccuracy, ...]:
        # stable: of tied classes the first in class order, as discrepancy's worst and best class
        top = per_class.sort_values("acc", ascending=ascending, kind="stable").head(k)
        return tuple(ClassAccuracy(str(r.class_name), float(r.acc), float(r.ci_lo), float(r.ci_hi))
                     for r in top.itertuples())

    k = len(claim.classes)
    weakest = ranked(True, k if claim.statistic == "weakest" else 1)
    strongest = ranked(False, k if claim.statistic == "strongest" else 1)
    named = [c.name for c in (weakest if claim.statistic == "weakest" else strongest)]
    # "cat, then bird, deer and dog": the first named class must be the weakest; the rest as a set
    within = set(named) == set(claim.classes) and (claim.statistic != "weakest" or named[0] == claim.classes[0])
    return Row(claim, _setting(rows), weakest=weakest, strongest=strongest, within=within,
               runs=(_run_length(params, rows, claim.epochs),), seeds=int(rows["seed"].nunique()))


_ROW_MAKERS = {"mean": _mean_row, "drop": _drop_row, "weakest": _ranking_row, "strongest": _ranking_row}


def _closest_baseline(table: pd.DataFrame, methods: set[str], rows: pd.DataFrame) -> pd.DataFrame | None:
    """The baseline run group trained on the same data, scored by the same evaluation; of several,
    the one whose training setting agrees in the most columns (FRL fine-tunes with its own lr and epochs)."""
    first = rows.iloc[0]
    same = table["method"].isin(methods) & (table["eval"] == first["eval"]) & _published_recipe(table)
    for column in ("dataset", "data_variant", "model", "train_data"):
        same &= table[column] == first[column]
    same &= (table["train_per_class"] == first["train_per_class"]) | (
        table["train_per_class"].isna() & pd.isna(first["train_per_class"]))
    groups = [g for _, g in table[same].groupby(GROUP, sort=True, dropna=False)]
    if not groups:
        return None

    def agreement(group: pd.DataFrame) -> int:
        return sum(group[c].iloc[0] == first[c] for c in SETTING_COLUMNS if pd.notna(first[c]))

    return max(groups, key=agreement)


def _comparison_rows(table: pd.DataFrame, params: Mapping, claim: Claim) -> list[Row]:
    present = table["method"].unique()
    baseline_methods = _equivalent_methods(params, present, (claim.baseline,))
    # a method equal to the baseline is not a fairness method, whatever its name
    methods = _equivalent_methods(params, present, claim.methods) - baseline_methods
    column = "worst" if claim.statistic == "worst_change" else "mean"
    out = []
    for rows in _groups(_candidates(table, claim, methods, claim.kind)):
        base = _closest_baseline(table, baseline_methods, rows)
        if base is None:
            continue
        ours, theirs = _per_seed(rows), _per_seed(base)
        n = "worst_n" if column == "worst" else "n"
        estimate = _difference(_accuracy_estimate(ours[column], ours[n]),
                               _accuracy_estimate(theirs[column], theirs[n]))
        runs = (_run_length(params, rows, claim.epochs), _run_length(params, base, claim.epochs))
        out.append(Row(claim, _setting(rows, base), estimate, within=_within(claim, estimate), runs=runs,
                       seeds=estimate.seeds))
    return out


def compare(classwise: pd.DataFrame, params: Mapping) -> list[Row]:
    """The report's rows: every claim with each run group of ours that it can be compared with,
    or one row without a run group (not in this preset)."""
    table = _annotate(classwise, params)
    out: list[Row] = []
    for claim in CLAIMS:
        if claim.baseline is not None:
            rows = _comparison_rows(table, params, claim)
        else:
            methods = _equivalent_methods(params, table["method"].unique(), claim.methods)
            made = (_ROW_MAKERS[claim.statistic](table, params, claim, g)
                    for g in _groups(_candidates(table, claim, methods, claim.kind)))
            rows = [row for row in made if row is not None]
        out += rows or [Row(claim)]
    return out


# ------------------------------------------------------------------ markdown


def _short(run: RunLength) -> bool:
    return run.epochs < SHORT_FRACTION * run.published or not math.isnan(run.train_per_class)


def _length_reasons(short: list[RunLength]) -> str:
    reasons = []
    few: dict[int, set[int]] = {}
    for r in short:
        if r.epochs < SHORT_FRACTION * r.published:
            few.setdefault(r.published, set()).add(r.epochs)
    for published, epochs in sorted(few.items()):
        span = f"{min(epochs)}" if len(epochs) == 1 else f"{min(epochs)}-{max(epochs)}"
        reasons.append(f"{span} epoch{'' if span == '1' else 's'} where the published runs train {published}")
    subsets = sorted({int(r.train_per_class) for r in short if not math.isnan(r.train_per_class)})
    if subsets:
        reasons.append(f"{', '.join(map(str, subsets))} training images per class instead of the whole training set")
    return "; ".join(reasons)


def length_note(rows: list[Row], classwise: pd.DataFrame) -> str | None:
    """The statement that the runs are too short to compare, or None for runs of published length.

    Judged on the compared runs; where no run is compared, on every run of the table."""
    compared = [row for row in rows if row.runs]
    runs = [run for row in compared for run in row.runs]
    if not runs:
        firsts = classwise.drop_duplicates("run_id")
        runs = [RunLength(int(e), PUBLISHED_EPOCHS, float(t) if pd.notna(t) else math.nan)
                for e, t in zip(firsts["epochs"], firsts["train_per_class"], strict=True)]
    short = [run for run in runs if _short(run)]
    if not short:
        return None
    if compared and not all(row.short for row in compared):
        return (f"**Some runs of this preset are too short to compare with the published numbers** "
                f"({_length_reasons(short)}): their rows are marked *too short*, and their numbers are shown "
                "only to prove that the pipeline runs end to end.")
    return (f"**The runs of this preset are too short to compare with the published numbers** "
            f"({_length_reasons(short)}). The numbers below are shown only to prove that the pipeline runs end to end.")


def _percent(x: float) -> str:
    return f"{100 * x:.1f}"


def _published_text(claim: Claim) -> str:
    if claim.published is None:
        return ", ".join(claim.classes)
    low, high = claim.published
    if claim.statistic == "mean":
        return f"{_percent(low)}-{_percent(high)}%"
    return f"{100 * low:+.1f} to {100 * high:+.1f} pts"


def _ours_text(row: Row) -> str:
    if row.estimate is None and not row.weakest:
        return "not in this preset"
    if row.estimate is None:
        def listed(classes: tuple[ClassAccuracy, ...]) -> str:
            return ", ".join(f"{c.name} {_percent(c.acc)}% [{_percent(c.lo)}, {_percent(c.hi)}]" for c in classes)
        return f"weakest: {listed(row.weakest)}; strongest: {listed(row.strongest)}"
    e = row.estimate
    if row.claim.statistic == "mean":
        return f"{_percent(e.value)}% [{_percent(e.lo)}, {_percent(e.hi)}]"
    return f"{100 * e.value:+.1f} pts [{100 * e.lo:+.1f}, {100 * e.hi:+.1f}]"


def _difference_text(row: Row) -> str:
    if row.difference is not None:
        return "0 (inside)" if row.difference == 0 else f"{100 * row.difference:+.1f} pts"
    if not row.weakest:
        return "-"
    ours = [c.name for c in (row.weakest if row.claim.statistic == "weakest" else row.strongest)]
    missing = [c for c in row.claim.classes if c not in ours]
    extra = [c for c in ours if c not in row.claim.classes]
    if missing:
        return f"ours lack {', '.join(missing)}; have {', '.join(extra)}"
    return "same classes" if row.within else f"weakest is {ours[0]}, not {row.claim.classes[0]}"


def _within_text(row: Row) -> str:
    if row.within is None:
        return "-"
    if row.within:
        return "yes"
    e, published = row.estimate, row.claim.published
    if e is not None and published is not None and e.lo <= published[1] and e.hi >= published[0]:
        return "no (interval reaches it)"
    return "no"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


_HOW_TO_READ = (
    "Published: the range that the expectation quoted under Sources states, as this report reads it "
    '("low-to-mid 80s": 80-86%; "around 50%": 47-53%; "a few points": 2-6 points; "a small cost": 0-3 points '
    "lower). Ours: the mean over seeds with its 95% interval (a t interval over seeds combined with one seed's "
    "Wilson interval; Wilson alone for one seed); a difference between two methods combines their intervals "
    "(MOVER); class rankings list our classes by their mean accuracy over seeds. Difference: ours minus the "
    "nearest end of the published range (0 inside it), in percentage points. Within: whether ours lies in the "
    "published range, or for a class ranking whether our weakest / strongest classes are the published ones. "
    "Runs are compared by dataset, architecture, the method's policies, checkpoint, the published recipe "
    "(SGD, step schedule, weight decay 5e-4) and the evaluation's settings (PGD and AutoAttack at L-inf 8/255; "
    "of several PGD evaluations the one with the step count nearest 20)."
)


def render(rows: list[Row], note: str | None, preset: str, commit: str, day: str) -> str:
    """The report as markdown."""
    lines = ["# Reproduction: our numbers beside the published ones", "",
             f"- preset: `{preset}`", f"- commit: `{commit}`", f"- date: {day}", ""]
    if note:
        lines += [note, ""]
    if all(row.within is None for row in rows):
        lines += ["No run of this preset matches a published setting (CIFAR-10, the named architecture and "
                  "methods, the published recipe and evaluations): every claim is listed as not in this preset.", ""]
    lines += [_HOW_TO_READ, "",
              "| claim | our runs | published | ours [95% interval] | seeds | difference | within |",
              "|---|---|---|---|---|---|---|"]
    for row in rows:
        setting = (row.setting + (" (*too short*)" if row.short else "")) or "-"
        cells = [f"{row.claim.text} (`{row.claim.id}`)", setting, _published_text(row.claim),
                 _ours_text(row), str(row.seeds) if row.seeds else "-", _difference_text(row), _within_text(row)]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += ["", f"## Sources ({_SECTION})", ""]
    for source in dict.fromkeys(claim.source for claim in CLAIMS):
        ids = ", ".join(f"`{claim.id}`" for claim in CLAIMS if claim.source == source)
        lines.append(f'- {ids}: "{source}"')
    return "\n".join(lines) + "\n"


def _commit() -> str:
    return git_commit(Path(__file__).resolve().parent) or "unknown"


def reproduction_markdown(classwise: pd.DataFrame, params: Mapping, commit: str | None = None,
                          day: str | None = None) -> str:
    """The report of one class-wise table (results/tables/classwise.csv) under the configured params."""
    rows = compare(classwise, params)
    return render(rows, length_note(rows, classwise), str(params.get("preset") or "none"),
                  commit or _commit(), day or date.today().isoformat())


def reproduction_report(tables_dir: str | Path, params: Mapping, out_md: str | Path) -> Path:
    """Write results/reproduction.md from the tables in `tables_dir` (classwise.csv)."""
    path = Path(tables_dir) / "classwise.csv"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: build the tables first (`study tables`)")
    atomic_write_text(out_md, reproduction_markdown(pd.read_csv(path), params))
    return Path(out_md)
