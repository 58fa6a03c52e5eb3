"""The trust rule (study.metrics.trust) in the figures: the one place where a figure learns which
rows of a table the checks against false robustness flagged or failed, and how it marks them.

A sample counts as robust only if no check flagged or failed its evaluation. The tables of
`study tables` carry each row's `check_status` (pass / flag / fail / unchecked); a table written
before the checks has no such column and every row counts (unchecked). A figure either leaves a
flagged evaluation out of its numbers and names it in a note (`left_out_note`), or, where it
draws it, marks it: hatched (HATCH) and labelled "flagged by checks" (`flagged_label`), its
measured value read as an upper bound. Never silently."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
from matplotlib.colors import to_rgba

from study.metrics.trust import not_counted

FLAGGED = "flagged by checks"
#: the hatch of a bar drawn from a flagged evaluation's measured value
HATCH = "////"
#: the legend's line on hatched bars
HATCH_NOTE = f"hatched: {FLAGGED}, not counted (the measured value, an upper bound)"
#: evaluations a note names one by one; the rest are counted
MAX_NAMED = 6
_NOTE_WIDTH = 110


def split_counted(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the rows that count, the rows of flagged or failed evaluations)."""
    left_out = not_counted(table)
    return table[~left_out], table[left_out]


def counted_or_marked(table: pd.DataFrame, key: str = "eval") -> tuple[pd.DataFrame, list, pd.DataFrame]:
    """The rows a figure draws per `key` group (e.g. per evaluation over seeds): its counted rows;
    a group with none keeps its measured rows, to be drawn marked. Returns (rows to draw, the
    marked groups, the flagged rows left out of groups that keep counted ones)."""
    left_out = not_counted(table)
    has_counted = set(table.loc[~left_out, key])
    marked = [g for g in dict.fromkeys(table.loc[left_out, key]) if g not in has_counted]
    keep = ~left_out | table[key].isin(marked)
    return table[keep], marked, table[~keep]


def marked_bar_style(color: str) -> dict[str, Any]:
    """The bar of a flagged evaluation drawn from its measured value: hatched in its colour, pale."""
    return {"facecolor": to_rgba(color, 0.25), "edgecolor": color, "hatch": HATCH, "linewidth": 0.8}


def flagged_label(label: str) -> str:
    """The legend label of a marked (flagged) evaluation."""
    return f"{label}, {FLAGGED}"


def _seeds(rows: pd.DataFrame) -> str:
    if "seed" not in rows.columns:
        return ""
    seeds = sorted(dict.fromkeys(rows["seed"].tolist()))
    return f" (seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))})"


def left_out_note(flagged: pd.DataFrame, keys: Sequence[str], name: Callable[[tuple], str],
                  verb: str = "left out", width: int = _NOTE_WIDTH) -> str | None:
    """'left out, flagged by checks: <name> (seeds ...); ...' naming each `keys` group of the
    flagged rows (at most MAX_NAMED, the rest counted), wrapped at `width` characters; None when
    nothing was flagged."""
    if flagged.empty:
        return None
    groups = list(flagged.groupby(list(keys), sort=False, dropna=False))
    items = [name(key if isinstance(key, tuple) else (key,)) + _seeds(rows) for key, rows in groups[:MAX_NAMED]]
    if len(groups) > MAX_NAMED:
        items.append(f"and {len(groups) - MAX_NAMED} more")
    return textwrap.fill(f"{verb}, {FLAGGED}: " + "; ".join(items), width)
