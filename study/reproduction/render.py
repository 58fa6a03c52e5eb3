"""The report's rows as markdown: one table per section of study.published, the difference rows
after them, a summary of the verdicts, how to read a row, and the legend of the reduced-scale mark."""

from __future__ import annotations

from collections.abc import Iterable

from study.published import BY_ID, PAPERS, SECTIONS
from study.reproduction.comparison import Row
from study.reproduction.statistics import ClassAccuracy
from study.reproduction.verdicts import VERDICTS

#: the mark of a row whose runs were trained at a smaller scale than the published recipe
REDUCED_MARK = "†"
REDUCED_LEGEND = (
    f"{REDUCED_MARK} CPU-scale recipe: these runs were trained with fewer epochs or training images than the "
    "published setting (the demo preset's runs are trained on a CPU in minutes with such a reduced recipe); "
    "such a row compares the direction and the class ranking, not the published size."
)


def _percent(x: float) -> str:
    return f"{100 * x:.1f}"


def _points(x: float) -> str:
    """A difference in points, signed, with enough digits that a nonzero value never reads 0."""
    digits = 1
    while digits < 4 and x != 0 and round(100 * x, digits) == 0:
        digits += 1
    return f"{100 * x:+.{digits}f}"


def _source(row: Row) -> str:
    p = row.published
    text = f"{PAPERS.get(p.paper, p.paper)}, {p.where}: {p.row}"
    if row.difference_of and p.baseline is not None:
        text += f", minus {BY_ID[p.baseline].row}"
    return text


def _published_text(row: Row) -> str:
    p = row.published
    if p.statistic == "weakest":
        return f"{p.class_name} the weakest"
    if p.statistic == "rank":
        groups: dict[float, list[str]] = {}
        for name, rank in p.order:
            groups.setdefault(rank, []).append(name)
        return " < ".join(", ".join(names) for _, names in sorted(groups.items()))
    if p.direction:
        text = f"{p.method} minus {p.control} {'>' if p.direction > 0 else '<'} 0"
        return text + _BASIS_TEXT.get(p.basis, "")
    value, sd = row.published_number, row.published_sd
    if row.difference_of:
        text = f"{100 * value:+.1f} pts"
    else:
        text = f"{_percent(value)}%"
    return text + (f" ± {100 * sd:.1f}" if sd is not None else "")


def _ours_text(row: Row) -> str:
    e = row.estimate
    if e is None:
        return "-"

    def listed(classes: Iterable[ClassAccuracy]) -> str:
        return ", ".join(f"{c.name} {_percent(c.acc)}%" for c in classes)

    statistic = row.published.statistic
    if statistic == "rank":
        return (f"rho {e.value:.2f} [{e.lo:.2f}, {e.hi:.2f}], permutation p = {e.p_value:.3f}; "
                f"weakest: {listed(row.classes[:4])}; strongest: {listed(row.classes[-3:][::-1])}")
    if statistic == "weakest":
        return f"P({row.published.class_name} weakest) = {e.value:.2f}; weakest: {listed(row.classes[:4])}"
    if row.difference_of:
        return f"{_points(e.value)} pts [{_points(e.lo)}, {_points(e.hi)}]"
    return f"{_percent(e.value)}% [{_percent(e.lo)}, {_percent(e.hi)}]"


def _detects_text(row: Row) -> str:
    """The smallest difference the row's runs could have detected (a two-sided 5% test, 80% power)."""
    d = row.detectable
    if d is None or d != d:  # NaN: no interval to read it from
        return "-"
    statistic = row.published.statistic
    if statistic == "rank":
        return f"rho ≥ {d:.2f}"
    if statistic == "weakest":
        return f"a gap of {100 * d:.1f} pts"
    return f"{100 * d:.1f} pts"


#: a claim that rests on no published number, in the published cell
_BASIS_TEXT = {"aim": " (the method's stated aim: no published number)",
               "expectation": " (the study's expectation: no published number)"}


def _runs_text(row: Row) -> str:
    if not row.setting:
        return "-"
    text = f"{row.setting} {REDUCED_MARK}" if row.reduced_scale else row.setting
    return f"{text}; {row.pair}" if row.pair else text


def _recipe_text(row: Row) -> str:
    transferred = (row.published.transferred,) if row.published.transferred else ()
    parts = [*transferred, *row.differences, *(f"note: {n}" for n in row.notes)]
    if row.flagged:
        parts.insert(0, f"flagged by checks ({row.flagged})")
    return "; ".join(parts) or "none"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


_HOW_TO_READ = (
    "Each row sets one published value beside one run group of ours. Published: the value with the "
    "standard deviation over the paper's seeds where it gives one (fractions as percent; a class "
    "ranking as the published order, weakest first, ties where the paper names none). Ours: the mean "
    "over seeds with its 95% interval (over seeds alone where our runs are scored on the paper's whole "
    "test set with two or more seeds; with test sampling added on a subset or for one seed); for a "
    "ranking, Spearman's rho with the published order, its seed-aware bootstrap interval and its "
    "p-value against random class orders; for a claim about one class, the probability that it is the "
    "weakest. Detects: the smallest difference our runs could have detected (a two-sided 5% test with "
    "80% power; for a ranking, the rho random orders exceed 5% of the time). Protocol: how our "
    "checkpoint was chosen. Recipe: how our runs differ from the published recipe (such a row is not "
    "compared as equal), what was inferred, and notes. Verdict: *agrees*, *inconclusive* or *differs*. "
    "A value differs when our interval excludes the published band (mean ± 1.96 sd) and agrees when it "
    "meets the band and lies within 2 points of it. A difference (a method minus its control) gets two "
    "verdicts, its direction and its size: it agrees in direction when our interval excludes 0 on the "
    "published side and differs in direction when it excludes 0 on the other; its size differs when our "
    "interval excludes the band and agrees when it meets the band and our 90% interval lies within half "
    "to twice the published difference (the summary counts a difference row by its size). One seed shows "
    "no spread over seeds: its interval adds an assumed seed sd (0.8 points for a mean, 2.4 for the worst "
    "or one class, the largest the published tables report), and its class bootstrap moves each class by "
    "2.4 points. A ranking agrees when rho's permutation p ≤ 0.05 and its "
    "whole interval lies above the rho random orders exceed 5% of the time, and differs when rho's "
    "interval lies at or below 0; a claim of a direction (a method minus its control above or below 0) "
    "agrees when our interval excludes 0 on the claimed side and differs when it excludes 0 on the other, "
    "at any scale, its recipe differences stated; a named class agrees as the weakest at probability ≥ 0.95 and "
    "differs at ≤ 0.05; anything else is inconclusive. An inconclusive row that could hardly ever agree "
    "at the published value or effect with the seeds it has (its power there under 5%) reads "
    "\"needs ≥ N seeds\", N the seeds at which that power reaches 80%; such rows are counted apart. "
    "The worst class is cross-fitted: chosen on one half of the test images and scored on the other, "
    "both ways round, so that classes crowding at the bottom do not bias it low. A difference read on "
    "checkpoints chosen on the test set (the paper's protocol) gets no direction verdict; a claim "
    "that rests on no published number is context. A flagged evaluation is not counted "
    "(study.metrics.trust). A row without a verdict says why: not in this preset (no runs of its kind), "
    "recipe differs, flagged by checks, or no value (our runs give it nothing to measure, e.g. the "
    "claim's class is not among theirs)."
)

_TABLE_HEAD = ["| published (source) | published | our runs | ours [95% interval] | seeds | detects | protocol "
               "| recipe | verdict |",
               "|---|---|---|---|---|---|---|---|---|"]


def _not_run_line(rows: list[Row]) -> str:
    """The published rows a preset does not run, as one line: their row names (before the first comma)."""
    names = list(dict.fromkeys(r.published.row.split(",")[0] for r in rows))
    return (f"Not in this preset: {len(rows)} published value{'s' if len(rows) != 1 else ''} "
            f"({'; '.join(names)}).")


def table(rows: list[Row]) -> list[str]:
    """The rows as a markdown table (those the preset does not run collapsed into one line under
    it), and the legend of the reduced-scale mark where a row carries it."""
    shown = [r for r in rows if r.setting or r.estimate is not None]
    missing = [r for r in rows if r not in shown]
    lines = list(_TABLE_HEAD) if shown else []
    for row in shown:
        compared = row.setting and row.estimate is not None
        cells = [f"{_source(row)} (`{row.published.id}`)", _published_text(row), _runs_text(row), _ours_text(row),
                 str(row.seeds) if row.seeds else "-", _detects_text(row) if compared else "-",
                 row.protocol or "-", _recipe_text(row) if row.setting else "-", row.verdict]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    if missing:
        lines += ["", _not_run_line(missing)]
    if any(row.reduced_scale for row in shown):
        lines += ["", REDUCED_LEGEND]
    return lines


#: the summary's word for a published value whose rows need more seeds than they have
NEEDS_SEEDS = "need more seeds than they have"


def _claim_verdict(rows: list[Row]) -> str:
    """One published value's or claim's standing over its rows: the verdict its compared rows share
    (a difference row's by its size; `mixed` where they differ), else that they need more seeds,
    else why none is compared."""
    compared = {row.verdict_word for row in rows if row.compared}
    if compared:
        return compared.pop() if len(compared) == 1 else "mixed"
    if any(row.needs_seeds for row in rows):
        return NEEDS_SEEDS
    return rows[0].verdict_word.split(":")[0]


def verdict_summary(rows: list[Row]) -> str:
    """The published values and claims counted, each once whatever its number of rows (one row per
    run group of ours): agrees, inconclusive, differs (at full and reduced scale together; a
    difference by its size) or mixed across its rows; then those shown as context and those not
    compared, by why; then the rows, and last the difference rows' directions."""
    by_claim: dict[tuple[str, bool], list[Row]] = {}
    for row in rows:
        by_claim.setdefault((row.published.id, bool(row.difference_of)), []).append(row)
    counts = {verdict: 0 for verdict in (*VERDICTS, "mixed")}
    others: dict[str, int] = {}
    for claim_rows in by_claim.values():
        word = _claim_verdict(claim_rows)
        if word in counts:
            counts[word] += 1
        else:
            others[word] = others.get(word, 0) + 1
    compared = sum(counts.values())
    text = (f"Claims: {len(by_claim)} published values and claims; {compared} compared: "
            + ", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n or verdict != "mixed") + ".")
    needs = others.pop(NEEDS_SEEDS, 0)
    if needs:
        text += (f" {needs} {NEEDS_SEEDS} (their power to agree at the published value or effect under 5%: "
                 "each row says how many it needs).")
    if others:
        text += " Not compared: " + ", ".join(f"{n} {why}" for why, n in sorted(others.items())) + "."
    shown = [row for row in rows if row.compared]
    text += f" Rows (one per run group of ours, beneath each claim): {len(shown)} compared."
    reduced = sum(bool(row.reduced_scale) for row in shown)
    if reduced:
        text += (f" {reduced} compared row{'s' if reduced != 1 else ''} from runs at a reduced (CPU) scale "
                 f"({REDUCED_MARK}).")
    directions = {verdict: 0 for verdict in VERDICTS}
    for row in rows:
        if (row.compared or row.needs_seeds) and row.difference_of and not row.published.direction \
                and not row.test_chosen:
            directions[row.direction] += 1
    if any(directions.values()):
        text += (" Difference rows counted above by their size; in direction: "
                 + ", ".join(f"{n} {verdict}" for verdict, n in directions.items()) + ".")
    return text


def render(values: list[Row], deltas: list[Row], preset: str, commit: str, day: str) -> str:
    """The report as markdown."""
    lines = ["# Reproduction: our numbers beside the published ones", "",
             f"- preset: `{preset}`", f"- commit: `{commit}`", f"- date: {day}",
             "- sources: docs/study.md#published-numbers (each value with the place it was read in)", "",
             verdict_summary(values + deltas), "", _HOW_TO_READ, ""]
    for section in SECTIONS:
        rows = [r for r in values if r.published.id in section.ids]
        lines += [f"## {section.title}", "", *table(rows), ""]
    lines += ["## Fairness methods against their controls (Wei et al. 2023, Table 1)", "",
              "Each +CFA method minus the control it is compared with (`compare_with` in params.yaml, "
              "the pair's declared differences in docs/methods.md), beside the same difference of the "
              "published rows.", "", *table(deltas), ""]
    return "\n".join(lines)
