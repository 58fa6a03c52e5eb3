"""The reproduction report as an HTML page (results/<preset>/reproduction.html), the one the study's HTML report
shows: the rows of each claim together, and under a claim one table per run group of ours, whose
recipe (runs, protocol, how they differ from the published recipe) is stated once above its rows
instead of in every row as results/<preset>/reproduction.md repeats it. The same rows and words as the
markdown (study.reproduction.render), so the two never disagree."""

from __future__ import annotations

from html import escape

from study.published import SECTIONS
from study.reproduction.comparison import Row
from study.reproduction.render import (
    _HOW_TO_READ,
    REDUCED_LEGEND,
    REDUCED_MARK,
    _detects_text,
    _not_run_line,
    _ours_text,
    _published_text,
    _recipe_text,
    _runs_text,
    _source,
    verdict_summary,
)
from study.reproduction.verdicts import VERDICTS

_STYLE = """
body { font-family: system-ui, sans-serif; font-size: 14px; margin: 1.5em; color: #222; max-width: 1200px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
.group { margin: 1em 0 0.4em; padding: 0.4em 0.6em; background: #f4f4f6; border-left: 3px solid #889; }
table { border-collapse: collapse; width: 100%; margin-bottom: 0.6em; }
th, td { border: 1px solid #ddd; padding: 4px 6px; text-align: left; vertical-align: top; }
th { background: #eee; }
td.verdict { font-weight: 600; white-space: nowrap; }
.agrees { color: #176c2b; } .differs { color: #a11; } .inconclusive { color: #8a6100; }
.needs { color: #4b3f8f; }
.note { color: #555; font-size: 0.9em; }
"""

_HEAD = ("published (source)", "published", "ours [95% interval]", "seeds", "detects", "verdict")


def _verdict_class(row: Row) -> str:
    """The colour of the row's verdict: the one the summary counts (a difference row's size), or that
    the row needs more seeds than it has."""
    if row.needs_seeds:
        return "needs"
    return row.verdict_word if row.verdict_word in VERDICTS else "other"


def group_key(row: Row) -> tuple[str, str, str]:
    """What a run group's rows share: the runs and how they differ from the published recipe."""
    return (_runs_text(row), row.protocol, _recipe_text(row) if row.setting else "-")


def _group_header(row: Row) -> str:
    runs, protocol, recipe = group_key(row)
    return (f'<div class="group"><b>Our runs:</b> {escape(runs)}'
            f' &nbsp; <b>protocol:</b> {escape(protocol or "-")}'
            f'<br><b>recipe differences:</b> {escape(recipe)}</div>')


def _row_cells(row: Row) -> list[str]:
    compared = row.setting and row.estimate is not None
    cells = [f"{escape(_source(row))} (<code>{escape(row.published.id)}</code>)", escape(_published_text(row)),
             escape(_ours_text(row)), str(row.seeds) if row.seeds else "-",
             escape(_detects_text(row) if compared else "-")]
    verdict = f'<td class="verdict {_verdict_class(row)}">{escape(row.verdict)}</td>'
    return [f"<td>{c}</td>" for c in cells] + [verdict]


def section_html(rows: list[Row]) -> list[str]:
    """One claim's rows: a table per run group under its recipe, then the published rows this preset
    does not run in one line, and the legend of the reduced-scale mark where a run group carries it."""
    shown = [r for r in rows if r.setting or r.estimate is not None]
    missing = [r for r in rows if r not in shown]
    groups: dict[tuple, list[Row]] = {}
    for row in shown:
        groups.setdefault(group_key(row), []).append(row)
    lines = []
    for members in groups.values():
        lines += [_group_header(members[0]), "<table>",
                  "<tr>" + "".join(f"<th>{h}</th>" for h in _HEAD) + "</tr>",
                  *("<tr>" + "".join(_row_cells(r)) + "</tr>" for r in members), "</table>"]
    if missing:
        lines.append(f'<p class="note">{escape(_not_run_line(missing))}</p>')
    if any(row.reduced_scale for row in shown):
        lines.append(f'<p class="note">{escape(REDUCED_LEGEND)}</p>')
    return lines


def render_html(values: list[Row], deltas: list[Row], preset: str, commit: str, day: str) -> str:
    """The report as one self-contained HTML page."""
    title = "Reproduction: our numbers beside the published ones"
    lines = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{title}</title>",
             f"<style>{_STYLE}</style></head><body>", f"<h1>{title}</h1>",
             f"<p>Preset <code>{escape(preset)}</code>, commit <code>{escape(commit)}</code>, {escape(day)}. "
             "Sources: docs/study.md#published-numbers (each value with the place it was read in).</p>",
             f'<p id="verdicts"><b>{escape(verdict_summary(values + deltas))}</b></p>',
             f'<details><summary>How to read a row</summary><p class="note">{escape(_HOW_TO_READ)}</p>'
             f"<p class=\"note\">{REDUCED_MARK}: a run group trained at a reduced scale.</p></details>"]
    for section in SECTIONS:
        rows = [r for r in values if r.published.id in section.ids]
        lines += [f"<h2>{escape(section.title)}</h2>", *section_html(rows)]
    lines += ["<h2>Fairness methods against their controls (Wei et al. 2023, Table 1)</h2>",
              '<p class="note">Each +CFA method minus the control it is compared with (<code>compare_with</code> in '
              "params.yaml, the pair's declared differences in docs/methods.md), beside the same difference of the "
              "published rows.</p>", *section_html(deltas), "</body></html>", ""]
    return "\n".join(lines)
