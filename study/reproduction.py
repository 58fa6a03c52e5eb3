"""The reproduction report (results/reproduction.md): our numbers beside the published ones
(study.published, listed with their sources in docs/study.md#published-numbers), one row per
published value and run group of ours, each with the paper, table or figure and row it comes
from, the differences between the published recipe and ours, and the checks applied.

A published row is matched to the runs of the class-wise table by what the runs are, not by
their names, because names differ by preset (PGD-AT is `pgd_at` in the baseline group and `at`
in the mitigation group; the PGD evaluation is `pgd20` in the paper preset, `pgd3` in ci):

- the method: a run matches when its resolved policies (study.config.resolve_method) equal
  those of the row's method;
- the checkpoint (`<evaluation>@best` is the best checkpoint on validation, else the last);
- the evaluation by its settings: clean, or PGD / AutoAttack at L-inf 8/255 (of several PGD
  evaluations the one whose step count is nearest the published one); where a preset has no
  AutoAttack, its PGD evaluation stands in, as a recipe difference;
- of the run groups that match, those whose recipe differs least from the published one.

Recipe differences (dataset or its variant, architecture, epochs, a training subset, the
optimizer, the evaluation) are stated per row, and such a row is not compared as equal: its
verdict is "recipe differs". Protocol notes that do not change what is measured (our best
checkpoint is chosen on a validation split, the papers' on the test set; fewer seeds) are
stated beside it. A row whose evaluation a check flagged or failed is not counted
(study.metrics.trust) and says so.

Ours is the mean over seeds with the seed-aware 95% interval of study.metrics.seeds (Wilson for
one seed); a difference between two methods combines their intervals by MOVER (Newcombe 2011).
A value row agrees when our interval meets the published value's (mean +- 1.96 sd where the
paper gives sd). A class ranking is compared by Spearman's rho between our class accuracies and
the published order (ties where the paper names no order), with a 95% bootstrap interval over
the test samples of each class; it agrees when the interval lies above 0.
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
from scipy.stats import rankdata

from study.config import ConfigError, comparison_baseline, resolve_evaluation, resolve_method
from study.io import atomic_write_text
from study.metrics import seed_aggregate, wilson_interval
from study.metrics.seeds import accuracy_seed_interval, seed_interval
from study.metrics.trust import not_counted
from study.provenance import git_commit
from study.published import BY_ID, PAPERS, PUBLISHED, SECTIONS, Published
from study.runs import SETTING_COLUMNS

PUBLISHED_EPS = 8 / 255
PUBLISHED_RECIPE = {"optimizer": "sgd", "schedule": "step", "weight_decay": 5e-4}
# Where a preset has no evaluation of the published kind, the one that stands in (a recipe difference).
STAND_IN = {"autoattack": "pgd"}
# One run group is one configuration trained with several seeds.
GROUP = ["dataset", "data_variant", "model", "method", *SETTING_COLUMNS]
BOOTSTRAP_DRAWS = 2000
Z95 = 1.96


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


@dataclass(frozen=True)
class Row:
    """One line of the report: a published value and one run group of ours (or none: not in this
    preset). For a difference row (`published.baseline` set) ours and the published value are
    the method minus its baseline."""

    published: Published
    setting: str = ""
    estimate: Estimate | None = None
    classes: tuple[ClassAccuracy, ...] = ()
    differences: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    flagged: str = ""
    seeds: int = 0
    difference_of: str = ""  # difference rows: "<method> minus <baseline>"

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
        if self.differences:
            return "recipe differs: not compared"
        if self.published.statistic == "rank":
            return "agrees" if self.estimate.lo > 0 else "does not agree"
        value, sd = self.published_value, self.published_sd or 0.0
        meets = self.estimate.lo <= value + Z95 * sd and self.estimate.hi >= value - Z95 * sd
        return "agrees" if meets else "differs"


# ------------------------------------------------------------------ matching runs to published rows


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
    if "checks_not_passed" not in table:  # tables built without checks.json
        table["checks_not_passed"] = ""
    if "train_data" not in table:
        table["train_data"] = "original"
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


def _candidates(table: pd.DataFrame, params: Mapping, p: Published) -> pd.DataFrame:
    """Rows of runs of the row's method at its checkpoint, of its evaluation kind (or the stand-in)."""
    methods = _equivalent_methods(params, table["method"].unique(), (p.method,))
    rows = table[table["method"].isin(methods) & (table["checkpoint"] == p.checkpoint)
                 # models trained on a constructed feature dataset are another question
                 & (table["train_data"].fillna("original") == "original")]
    exact = rows[rows["kind"] == p.recipe.kind]
    if exact.empty and p.recipe.kind in STAND_IN:
        return rows[rows["kind"] == STAND_IN[p.recipe.kind]]
    return exact


def _preferred_evaluation(rows: pd.DataFrame, steps: int | None) -> pd.DataFrame:
    """The rows of one evaluation: of several PGD evaluations the one nearest the published steps."""
    target = steps if steps is not None else 20
    order = rows.assign(_distance=(rows["steps"] - target).abs()).sort_values(
        ["_distance", "steps", "eval"], ascending=[True, False, True], na_position="last")
    return rows[rows["eval"] == order["eval"].iloc[0]]


def recipe_differences(p: Published, first: pd.Series) -> tuple[str, ...]:
    """How a run group (its first row) departs from the recipe the published value was measured under."""
    r, out = p.recipe, []
    if first["dataset"] != r.dataset:
        out.append(f"{first['dataset']} data, not {r.dataset}")
    elif first["data_variant"] != r.variant:
        out.append(f"{r.dataset} {first['data_variant']} variant, not {r.variant}")
    if r.model is not None and first["model"] != r.model:
        out.append(f"{first['model']}, not {r.model}")
    if r.epochs is not None and int(first["epochs"]) != r.epochs:
        out.append(f"{int(first['epochs'])} epochs, not {r.epochs}")
    if pd.notna(first["train_per_class"]):
        out.append(f"{int(first['train_per_class'])} training images per class, not all")
    if (first["optimizer"], first["schedule"]) != (PUBLISHED_RECIPE["optimizer"], PUBLISHED_RECIPE["schedule"]) \
            or not math.isclose(float(first["weight_decay"]), PUBLISHED_RECIPE["weight_decay"]):
        out.append(f"{first['optimizer']}, {first['schedule']} schedule, weight decay {float(first['weight_decay']):g}"
                   ", not SGD, step, 5e-4")
    if first["kind"] != r.kind:
        out.append(f"{first['eval']} ({first['kind']}) in place of {r.kind}")
    elif r.pgd_steps is not None and first["steps"] != r.pgd_steps:
        out.append(f"PGD-{first['steps']:g}, not PGD-{r.pgd_steps}")
    return tuple(out)


def _notes(p: Published, seeds: int) -> tuple[str, ...]:
    notes = []
    if p.checkpoint == "best" and p.recipe.selection:
        notes.append(f"best checkpoint on our validation split by the group's rule; the paper's: {p.recipe.selection}")
    if seeds < p.recipe.seeds:
        notes.append(f"{seeds} seed{'s' if seeds != 1 else ''}, the paper {p.recipe.seeds}")
    return tuple(notes)


def _flagged(rows: pd.DataFrame) -> str:
    """The checks that flagged or failed the rows' evaluation ('' when the rule counts it)."""
    bad = rows[not_counted(rows)]
    return "; ".join(sorted(set(bad["checks_not_passed"].astype(str)))) or ("flagged" if len(bad) else "")


def _closest_groups(p: Published, rows: pd.DataFrame) -> list[tuple[pd.DataFrame, tuple[str, ...]]]:
    """The run groups (preferred evaluation each) closest to the published recipe: on its dataset
    where any are, and of those the ones with the fewest recipe differences."""
    if rows.empty:
        return []
    groups = [_preferred_evaluation(g, p.recipe.pgd_steps) for _, g in rows.groupby(GROUP, sort=True, dropna=False)]
    scored = [((g.iloc[0]["dataset"] != p.recipe.dataset, len(d)), g, d)
              for g in groups for d in [recipe_differences(p, g.iloc[0])]]
    best = min(score for score, _, _ in scored)
    return [(g, d) for score, g, d in scored if score == best]


def _setting(rows: pd.DataFrame, versus: pd.DataFrame | None = None) -> str:
    """The compared runs in words: model, method (vs the baseline's), evaluation, length, data."""
    first = rows.iloc[0]
    method = str(first["method"]) if versus is None else f"{first['method']} minus {versus['method'].iloc[0]}"
    parts = [str(first["dataset"]), str(first["model"]), method, str(first["eval"]), f"{int(first['epochs'])} epochs"]
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


def _class_estimate(rows: pd.DataFrame, name: str) -> Estimate | None:
    per_class = rows[rows["class_name"] == name]
    if per_class.empty:
        return None
    return _accuracy_estimate(per_class["acc"].reset_index(drop=True), per_class["n"].reset_index(drop=True))


def _ranked(rows: pd.DataFrame) -> pd.DataFrame:
    per_class = seed_aggregate(rows, by=[*GROUP, "eval"])
    # stable: of tied classes the first in class order, as discrepancy's worst and best class
    return per_class[per_class["acc"].notna()].sort_values("acc", kind="stable")


def rank_correlation(ranked: pd.DataFrame, order: Mapping[str, float], seed: int = 0) -> Estimate | None:
    """Spearman's rho of our class accuracies with the published order, with a 95% percentile
    bootstrap interval: each class's correct count drawn again from its test samples."""
    names = [n for n in ranked["class_name"] if n in order]
    if len(names) < 3:
        return None
    table = ranked.set_index("class_name").loc[names]
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
    return Estimate(float(rho(acc)), float(lo), float(hi), int(ranked["n_seeds"].max()))


def _value_row(p: Published, rows: pd.DataFrame, differences: tuple[str, ...]) -> Row:
    seeds = _per_seed(rows)
    classes: tuple[ClassAccuracy, ...] = ()
    if p.statistic == "mean":
        estimate = _accuracy_estimate(seeds["mean"], seeds["n"])
    elif p.statistic == "worst":
        estimate = _accuracy_estimate(seeds["worst"], seeds["worst_n"])
    elif p.statistic == "class":
        estimate = _class_estimate(rows, p.class_name)
        if estimate is None:
            differences = (*differences, f"no class {p.class_name} in these runs")
    else:
        ranked = _ranked(rows)
        classes = tuple(ClassAccuracy(str(r.class_name), float(r.acc), float(r.ci_lo), float(r.ci_hi))
                        for r in ranked.itertuples())
        estimate = rank_correlation(ranked, dict(p.order))
        if estimate is None:
            differences = (*differences, "none of the published classes in these runs")
    n_seeds = int(rows["seed"].nunique())
    return Row(p, _setting(rows), estimate, classes, differences, _notes(p, n_seeds), _flagged(rows), n_seeds)


def _baseline_of(params: Mapping, method: str, fallback: str) -> str:
    """The method a fairness method is compared with (study.config.comparison_baseline: its
    `compare_with`, else the nearest plain method of its base chain), else the published row's."""
    try:
        return comparison_baseline(params, method) or fallback
    except ConfigError:
        return fallback


def _baseline_group(table: pd.DataFrame, params: Mapping, rows: pd.DataFrame, method: str) -> pd.DataFrame | None:
    """The baseline run group trained on the same data, scored by the same evaluation; of several,
    the one whose training setting agrees in the most columns."""
    first = rows.iloc[0]
    same = table["method"].isin(_equivalent_methods(params, table["method"].unique(), (method,)))
    same &= table["eval"] == first["eval"]
    for column in ("dataset", "data_variant", "model", "train_data"):
        same &= table[column] == first[column]
    same &= (table["train_per_class"] == first["train_per_class"]) | (
        table["train_per_class"].isna() & pd.isna(first["train_per_class"]))
    groups = [g for _, g in table[same].groupby(GROUP, sort=True, dropna=False)]
    if not groups:
        return None
    return max(groups, key=lambda g: sum(g[c].iloc[0] == first[c] for c in SETTING_COLUMNS if pd.notna(first[c])))


def _difference_row(table: pd.DataFrame, params: Mapping, p: Published, rows: pd.DataFrame,
                    differences: tuple[str, ...]) -> Row | None:
    base_method = _baseline_of(params, str(rows["method"].iloc[0]), BY_ID[p.baseline].method)
    base = _baseline_group(table, params, rows, base_method)
    if base is None:
        return None
    column, n = ("worst", "worst_n") if p.statistic == "worst" else ("mean", "n")
    ours, theirs = _per_seed(rows), _per_seed(base)
    estimate = _difference(_accuracy_estimate(ours[column], ours[n]), _accuracy_estimate(theirs[column], theirs[n]))
    flagged = "; ".join(f for f in (_flagged(rows), _flagged(base)) if f)
    return Row(p, _setting(rows, base), estimate, (), differences, _notes(p, estimate.seeds), flagged, estimate.seeds,
               difference_of=f"{rows['method'].iloc[0]} minus {base['method'].iloc[0]}")


def compare(classwise: pd.DataFrame, params: Mapping) -> tuple[list[Row], list[Row]]:
    """(value rows, difference rows): every published value with each closest run group of ours,
    or one row without a run group (not in this preset); and every published value that has a
    baseline, as the method minus its own-form baseline."""
    table = _annotate(classwise, params)
    values: list[Row] = []
    deltas: list[Row] = []
    for p in PUBLISHED:
        groups = _closest_groups(p, _candidates(table, params, p))
        values += [_value_row(p, g, d) for g, d in groups] or [Row(p)]
        if p.baseline is not None:
            made = [_difference_row(table, params, p, g, d) for g, d in groups]
            deltas += [r for r in made if r is not None] or [Row(p, difference_of="-")]
    return values, deltas


# ------------------------------------------------------------------ markdown


def _percent(x: float) -> str:
    return f"{100 * x:.1f}"


def _source(row: Row) -> str:
    p = row.published
    text = f"{PAPERS.get(p.paper, p.paper)}, {p.where}: {p.row}"
    if row.difference_of:
        text += f", minus {BY_ID[p.baseline].row}"
    return text


def _published_text(row: Row) -> str:
    p = row.published
    if p.statistic == "rank":
        groups: dict[float, list[str]] = {}
        for name, rank in p.order:
            groups.setdefault(rank, []).append(name)
        return " < ".join(", ".join(names) for _, names in sorted(groups.items()))
    value, sd = row.published_value, row.published_sd
    if row.difference_of:
        text = f"{100 * value:+.1f} pts"
    else:
        text = f"{_percent(value)}%"
    return text + (f" ± {100 * sd:.1f}" if sd is not None else "")


def _ours_text(row: Row) -> str:
    e = row.estimate
    if e is None:
        return "-"
    if row.published.statistic == "rank":
        def listed(classes: Iterable[ClassAccuracy]) -> str:
            return ", ".join(f"{c.name} {_percent(c.acc)}%" for c in classes)
        return (f"rho {e.value:.2f} [{e.lo:.2f}, {e.hi:.2f}]; weakest: {listed(row.classes[:4])}; "
                f"strongest: {listed(row.classes[-3:][::-1])}")
    if row.difference_of:
        return f"{100 * e.value:+.1f} pts [{100 * e.lo:+.1f}, {100 * e.hi:+.1f}]"
    return f"{_percent(e.value)}% [{_percent(e.lo)}, {_percent(e.hi)}]"


def _recipe_text(row: Row) -> str:
    parts = [*row.differences, *(f"note: {n}" for n in row.notes)]
    if row.flagged:
        parts.insert(0, f"flagged by checks ({row.flagged})")
    return "; ".join(parts) or "none"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


_HOW_TO_READ = (
    "Each row sets one published value beside one run group of ours. Published: the value with the "
    "standard deviation over the paper's seeds where it gives one (fractions as percent; a class "
    "ranking as the published order, weakest first, ties where the paper names none). Ours: the mean "
    "over seeds with its 95% interval (a t interval over seeds combined with one seed's Wilson "
    "interval; Wilson alone for one seed); for a ranking, Spearman's rho with the published order and "
    "its bootstrap interval. Recipe: how our runs differ from the published recipe (a row that differs "
    "is not compared as equal), and notes on the protocol. Verdict: agrees when our interval meets the "
    "published value's (mean ± 1.96 sd), or for a ranking when rho's interval lies above 0; a flagged "
    "evaluation is not counted (study.metrics.trust)."
)

_TABLE_HEAD = ["| published (source) | published | our runs | ours [95% interval] | seeds | recipe | verdict |",
               "|---|---|---|---|---|---|---|"]


def _table(rows: list[Row]) -> list[str]:
    lines = list(_TABLE_HEAD)
    for row in rows:
        cells = [f"{_source(row)} (`{row.published.id}`)", _published_text(row), row.setting or "-", _ours_text(row),
                 str(row.seeds) if row.seeds else "-", _recipe_text(row) if row.setting else "-", row.verdict]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def _summary(rows: list[Row]) -> str:
    counts: dict[str, int] = {}
    for row in rows:
        key = row.verdict.split(":")[0]
        counts[key] = counts.get(key, 0) + 1
    return "Rows: " + ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items())) + "."


def render(values: list[Row], deltas: list[Row], preset: str, commit: str, day: str) -> str:
    """The report as markdown."""
    lines = ["# Reproduction: our numbers beside the published ones", "",
             f"- preset: `{preset}`", f"- commit: `{commit}`", f"- date: {day}",
             "- sources: docs/study.md#published-numbers (each value with the place it was read in)", "",
             _summary(values + deltas), "", _HOW_TO_READ, ""]
    for section in SECTIONS:
        rows = [r for r in values if r.published.id in section.ids]
        lines += [f"## {section.title}", "", *_table(rows), ""]
    lines += ["## Fairness methods against their own-form baselines (Wei et al. 2023, Table 1)", "",
              "Each +CFA method minus the baseline it is compared with (`compare_with` in params.yaml), "
              "beside the same difference of the published rows.", "", *_table(deltas), ""]
    return "\n".join(lines)


def _commit() -> str:
    return git_commit(Path(__file__).resolve().parent) or "unknown"


def reproduction_markdown(classwise: pd.DataFrame, params: Mapping, commit: str | None = None,
                          day: str | None = None) -> str:
    """The report of one class-wise table (results/tables/classwise.csv) under the configured params."""
    values, deltas = compare(classwise, params)
    return render(values, deltas, str(params.get("preset") or "none"), commit or _commit(),
                  day or date.today().isoformat())


def reproduction_report(tables_dir: str | Path, params: Mapping, out_md: str | Path) -> Path:
    """Write results/reproduction.md from the tables in `tables_dir` (classwise.csv)."""
    path = Path(tables_dir) / "classwise.csv"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: build the tables first (`study tables`)")
    atomic_write_text(out_md, reproduction_markdown(pd.read_csv(path), params))
    return Path(out_md)
