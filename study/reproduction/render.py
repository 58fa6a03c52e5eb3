"""The report's rows as markdown: one table per section of study.published, the difference rows
after them, a summary of the verdicts, how to read a row, and the legend of the reduced-scale mark."""

from __future__ import annotations

from collections.abc import Iterable

from study.published import BY_ID, PAPERS, SECTIONS
from study.reproduction.comparison import Row
from study.reproduction.statistics import ClassAccuracy

#: the mark of a row whose runs were trained at a smaller scale than the published recipe
REDUCED_MARK = "†"
REDUCED_LEGEND = (
    f"{REDUCED_MARK} CPU-scale recipe: these runs were trained with fewer epochs or training images than the "
    "published setting (the demo preset's runs are trained on a CPU in minutes with such a reduced recipe); "
    "such a row compares the direction and the class ranking, not the published size."
)


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


def _runs_text(row: Row) -> str:
    if not row.setting:
        return "-"
    return f"{row.setting} {REDUCED_MARK}" if row.reduced_scale else row.setting


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


def table(rows: list[Row]) -> list[str]:
    """The rows as a markdown table, and the legend of the reduced-scale mark where a row carries it."""
    lines = list(_TABLE_HEAD)
    for row in rows:
        cells = [f"{_source(row)} (`{row.published.id}`)", _published_text(row), _runs_text(row), _ours_text(row),
                 str(row.seeds) if row.seeds else "-", _recipe_text(row) if row.setting else "-", row.verdict]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    if any(row.reduced_scale for row in rows):
        lines += ["", REDUCED_LEGEND]
    return lines


def _summary(rows: list[Row]) -> str:
    counts: dict[str, int] = {}
    for row in rows:
        key = row.verdict.split(":")[0]
        counts[key] = counts.get(key, 0) + 1
    text = "Rows: " + ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items())) + "."
    reduced = sum(bool(row.reduced_scale) for row in rows)
    return text + (f" {reduced} row{'s' if reduced != 1 else ''} from runs at a reduced (CPU) scale "
                   f"({REDUCED_MARK})." if reduced else "")


def render(values: list[Row], deltas: list[Row], preset: str, commit: str, day: str) -> str:
    """The report as markdown."""
    lines = ["# Reproduction: our numbers beside the published ones", "",
             f"- preset: `{preset}`", f"- commit: `{commit}`", f"- date: {day}",
             "- sources: docs/study.md#published-numbers (each value with the place it was read in)", "",
             _summary(values + deltas), "", _HOW_TO_READ, ""]
    for section in SECTIONS:
        rows = [r for r in values if r.published.id in section.ids]
        lines += [f"## {section.title}", "", *table(rows), ""]
    lines += ["## Fairness methods against their own-form baselines (Wei et al. 2023, Table 1)", "",
              "Each +CFA method minus the baseline it is compared with (`compare_with` in params.yaml), "
              "beside the same difference of the published rows.", "", *table(deltas), ""]
    return "\n".join(lines)
