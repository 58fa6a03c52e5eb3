"""Class-wise discrepancy across datasets, architectures or optimization settings (figures
4, 5 and 6 of docs/study.md#figures): worst and best class, max - min and standard deviation, per training method."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from study.figures.style import (
    AUTO,
    MAX_INCHES,
    SEED_DOT_COLOR,
    display_title,
    figure_size,
    figure_style,
    percent_axis,
    run_caveat,
    with_recipe,
)
from study.labels import eval_name, eval_norm, method_name, norm_title

METHOD_COLORS = ("#4C72B0", "#C44E52", "#55A868", "#8172B3", "#DD8452", "#937860")
_ROLE_LABELS = {"clean": "clean accuracy", "robust": "robustness"}
_DAGGER = "†"


def _seed_values(text: str) -> np.ndarray:
    return np.array([float(v) for v in str(text).split(";") if v != ""])


def _interval(cell: pd.DataFrame, stat: str) -> tuple[float, list[list[float]]]:
    """A statistic in percent and its error-bar lengths (never negative)."""
    v, lo, hi = (float(cell.loc[stat, k]) * 100 for k in ("value", "ci_lo", "ci_hi"))
    return v, [[max(v - lo, 0.0)], [max(hi - v, 0.0)]]


def _seed_dots(ax: Axes, cell: pd.DataFrame, stat: str, x: float) -> None:
    if "seed_values" not in cell.columns:
        return
    seeds = _seed_values(cell.loc[stat, "seed_values"]) * 100
    if len(seeds) > 1:
        ax.scatter(np.full(len(seeds), x), seeds, s=6, color=SEED_DOT_COLOR, zorder=3)


def _draw_cell(top: Axes, bottom: Axes, cell: pd.DataFrame, x: float, style: dict) -> None:
    """One (category, method): worst and best class on top, max - min and std below."""
    color, width = style["color"], style["width"]
    for stat, marker in (("worst", "v"), ("best", "^")):
        v, err = _interval(cell, stat)
        # unclipped: a class at 100% or 0% sits on the frame and must show its whole marker
        top.errorbar(x, v, yerr=err, fmt=marker, color=color, markersize=6, elinewidth=1, capsize=2, clip_on=False)
        _seed_dots(top, cell, stat, x + width * 0.25)
    top.plot([x, x], [cell.loc["worst", "value"] * 100, cell.loc["best", "value"] * 100], color=color,
             linewidth=1, alpha=0.6)
    g, gerr = _interval(cell, "gap")
    bottom.bar(x, g, width=width * 0.9, color=color, alpha=0.8, label=style["label"])
    bottom.errorbar(x, g, yerr=gerr, fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
    s, serr = _interval(cell, "std")
    bottom.errorbar(x, s, yerr=serr, fmt="D", color="white", markeredgecolor="black", markersize=5, ecolor="black",
                    elinewidth=0.8)
    for stat in ("gap", "std"):
        _seed_dots(bottom, cell, stat, x + width * 0.25)


def _panels(summary: pd.DataFrame, eval_settings: Mapping[str, Mapping]) -> list[tuple[str, str | None]]:
    """(role, threat model) per column: clean, then robustness split by norm (never on one axis)."""
    panels: list[tuple[str, str | None]] = []
    for role in ("clean", "robust"):
        part = summary[summary["role"] == role]
        if part.empty:
            continue
        if role == "clean" or "eval" not in part.columns:
            panels.append((role, None))
            continue
        norms = {eval_norm(e, eval_settings.get(e)) or "other" for e in part["eval"].astype(str)}
        panels += [(role, n) for n in sorted(norms, key=lambda n: ({"linf": 0, "l2": 1}.get(n, 2), n))]
    return panels


def _panel_rows(summary: pd.DataFrame, by: str, role: str, norm: str | None, eval_settings: Mapping) -> pd.DataFrame:
    """The rows of one panel: per (category, method) the first evaluation of that role and threat model."""
    part = summary[summary["role"] == role]
    if "eval" not in part.columns:
        return part
    if norm is not None:
        part = part[[(eval_norm(e, eval_settings.get(e)) or "other") == norm for e in part["eval"].astype(str)]]
    first = part.groupby([by, "method"], sort=False)["eval"].transform("first")
    return part[part["eval"] == first]


def _cell_caveats(summary: pd.DataFrame, by: str, caveat: str | None, num_classes: int | None) -> dict:
    """(category, method) -> why its runs are too short to compare, for caveat=AUTO (from the clean
    mean over classes; 10 classes assumed when `num_classes` is not given)."""
    if caveat != AUTO or "mean" not in set(summary["stat"]):
        return {}
    means = summary[(summary["role"] == "clean") & (summary["stat"] == "mean")]
    found = {}
    for _, row in means.iterrows():
        note = run_caveat(mean_acc=float(row["value"]), num_classes=num_classes or 10)
        if note:
            found[(str(row[by]), str(row["method"]))] = note
    return found


def _daggered(label: str) -> str:
    first, *rest = label.split("\n")
    return "\n".join([f"{first} {_DAGGER}", *rest])


def _footnote(n_seeds: int, caveats: dict, labels: Mapping[str, str], caveat: str | None) -> str:
    note = "whiskers: 95% bootstrap interval over test samples"
    if n_seeds > 1:
        note = f"whiskers: 95% interval over seeds (t) and test samples (bootstrap); dots: each of {n_seeds} seeds"
    if caveat not in (None, AUTO):
        note += f"\n⚠ {caveat}"
    for (cat, method), why in caveats.items():
        note += f"\n{_DAGGER} {labels.get(cat, cat).splitlines()[0]}, {method_name(method)}: {why}"
    return note


def _format_panel(top: Axes, bottom: Axes, heading: str, cats: list[str], labels: Mapping[str, str]) -> None:
    top.set_title(f"{heading}: worst (▼) and best (▲) class")
    percent_axis(top, "class accuracy (%)")
    bottom.set_title(f"{heading}: max − min (bars), std (◆)")
    bottom.set_ylabel("percentage points")
    # the categories under both rows: a reader of the top row needs them as much as of the bottom one
    for ax in (top, bottom):
        ax.set_xticks(range(len(cats)), [labels.get(c, c) for c in cats])
        if len(cats) * max(len(labels.get(c, c)) for c in cats) > 60:
            ax.tick_params(axis="x", labelrotation=45)
            for label in ax.get_xticklabels():
                label.set_horizontalalignment("right")
                label.set_rotation_mode("anchor")


def _heading(role: str, norm: str | None, rows: pd.DataFrame, eval_settings: Mapping) -> str:
    if role == "clean" or norm is None:
        return _ROLE_LABELS.get(role, role)
    evals = ", ".join(eval_name(e, eval_settings.get(e)) for e in dict.fromkeys(rows["eval"].astype(str)))
    return f"robustness ({evals})" if evals else f"robustness, {norm_title(norm)}"


def plot_discrepancy(summary: pd.DataFrame, by: str, labels: dict[str, str] | None = None,
                     title: str | None = None, *, eval_settings: Mapping[str, Mapping] | None = None,
                     caveat: str | None = AUTO, num_classes: int | None = None,
                     left_out: str | None = None, recipe: str | None = None) -> Figure:
    """`summary`: discrepancy_summary output with columns `by`, method, role (clean | robust)
    and stat, value, ci_lo, ci_hi, seed_values (eval used when present). Top row: worst (v) and
    best (^) class with 95% intervals over seeds and test samples, joined by a line, seeds as
    dots; bottom row: max - min (bars) and standard deviation (diamonds). Columns: clean
    accuracy, then robustness per threat model (L-inf and L2 attacks never share an axis).
    `labels` maps a category of `by` to its tick label. `caveat`: a note for the whole figure,
    or AUTO to mark (†, with a footnote) each category and method whose clean accuracy is at
    chance level for `num_classes` classes. `left_out`: the note naming the evaluations the checks
    flagged, left out of `summary` (study.figures.trust.left_out_note), under the legend. `recipe`: the
    title's second line (style.table_recipe of the runs summarised: the summary keeps no run columns)."""
    missing = [c for c in (by, "method", "role", "stat", "value", "ci_lo", "ci_hi") if c not in summary.columns]
    if missing:
        raise ValueError(f"summary lacks column(s) {missing}; it has {list(summary.columns)}")
    if summary.empty:
        raise ValueError("summary is empty; nothing to plot")
    settings, labels = dict(eval_settings or {}), dict(labels or {})
    cats = list(dict.fromkeys(summary[by].astype(str)))
    methods = list(dict.fromkeys(summary["method"].astype(str)))
    panels = _panels(summary, settings)
    caveats = _cell_caveats(summary, by, caveat, num_classes)
    # a flagged category's tick label carries the dagger: outside the data, next to its name
    flagged = {cat for cat, _ in caveats}
    ticks = {c: _daggered(labels.get(c, c)) if c in flagged else labels.get(c, c) for c in cats}
    width = 0.8 / len(methods)
    natural = 2.2 + 0.55 * len(cats) * len(methods)
    stacked = natural * len(panels) > MAX_INCHES  # too wide side by side: one panel pair under the other
    size = (min(natural, MAX_INCHES), 7.0 * len(panels)) if stacked else (max(7.0, natural) * len(panels), 7.5)
    with figure_style():
        fig = Figure(figsize=figure_size(*size), layout="constrained")
        grid = fig.subplots(2 * len(panels), 1, squeeze=False) if stacked else fig.subplots(2, len(panels),
                                                                                           squeeze=False)
        pairs = [(grid[2 * k, 0], grid[2 * k + 1, 0]) if stacked else (grid[0, k], grid[1, k])
                 for k in range(len(panels))]
        for (top, bottom), (role, norm) in zip(pairs, panels, strict=True):
            rows = _panel_rows(summary, by, role, norm, settings)
            for j, method in enumerate(methods):
                for i, cat in enumerate(cats):
                    cell = rows[(rows["method"].astype(str) == method) & (rows[by].astype(str) == cat)]
                    if cell.empty:
                        continue
                    style = {"color": METHOD_COLORS[j % len(METHOD_COLORS)], "width": width,
                             "label": method_name(method) if i == 0 else None}
                    _draw_cell(top, bottom, cell.set_index("stat"), i + (j - (len(methods) - 1) / 2) * width, style)
            _format_panel(top, bottom, _heading(role, norm, rows, settings), cats, ticks)
            top.sharex(bottom)
        handles = {h.get_label(): h for h in pairs[0][1].get_legend_handles_labels()[0]}
        n_seeds = int(summary["n_seeds"].max()) if "n_seeds" in summary.columns else 1
        footnote = "\n".join(filter(None, [_footnote(n_seeds, caveats, labels, caveat), left_out]))
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=min(len(methods), 6),
                   frameon=False, title=footnote, title_fontsize=8)
        fig.suptitle(with_recipe(display_title(title) if title else f"class-wise discrepancy per {by}", recipe,
                                 fig.get_figwidth()))
    return fig
