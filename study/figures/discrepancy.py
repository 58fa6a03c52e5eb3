"""Class-wise discrepancy across datasets, architectures or optimization settings (STUDY.md
figures 4, 5 and 6): worst and best class, max - min and standard deviation, per training method."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from study.figures.style import figure_style, pretty_method

METHOD_COLORS = ("#4C72B0", "#C44E52", "#55A868", "#8172B3", "#DD8452", "#937860")
_ROLES = (("clean", "clean accuracy"), ("robust", "robustness"))


def _seed_values(text: str) -> np.ndarray:
    return np.array([float(v) for v in str(text).split(";") if v != ""])


def plot_discrepancy(summary: pd.DataFrame, by: str, labels: dict[str, str] | None = None,
                     title: str | None = None) -> Figure:
    """`summary`: discrepancy_summary output with columns `by`, method, role (clean | robust)
    and stat, value, ci_lo, ci_hi, seed_values. Top row: worst (v) and best (^) class with
    95% intervals over seeds and test samples, joined by a line, seeds as dots; bottom row: max - min (bars)
    and standard deviation (diamonds). Columns: clean accuracy, robustness. `labels` maps a
    category of `by` to its tick label."""
    missing = [c for c in (by, "method", "role", "stat", "value", "ci_lo", "ci_hi") if c not in summary.columns]
    if missing:
        raise ValueError(f"summary lacks column(s) {missing}; it has {list(summary.columns)}")
    if summary.empty:
        raise ValueError("summary is empty; nothing to plot")
    cats = list(dict.fromkeys(summary[by].astype(str)))
    methods = list(dict.fromkeys(summary["method"].astype(str)))
    roles = [(r, lab) for r, lab in _ROLES if (summary["role"] == r).any()]
    labels = labels or {}
    width = 0.8 / len(methods)
    with figure_style():
        fig = Figure(figsize=(max(7.0, 2.2 + 0.55 * len(cats) * len(methods)) * (len(roles) / 2 + 0.5), 7.5),
                     layout="constrained")
        axes = np.asarray(fig.subplots(2, len(roles), sharex=True, squeeze=False))
        for col, (role, role_label) in enumerate(roles):
            top, bottom = axes[0, col], axes[1, col]
            part = summary[summary["role"] == role]
            for j, method in enumerate(methods):
                color = METHOD_COLORS[j % len(METHOD_COLORS)]
                rows = part[part["method"].astype(str) == method]
                for i, cat in enumerate(cats):
                    cell = rows[rows[by].astype(str) == cat].set_index("stat")
                    if cell.empty:
                        continue
                    x = i + (j - (len(methods) - 1) / 2) * width
                    for stat, marker in (("worst", "v"), ("best", "^")):
                        v, lo, hi = (cell.loc[stat, k] * 100 for k in ("value", "ci_lo", "ci_hi"))
                        top.errorbar(x, v, yerr=[[max(v - lo, 0)], [max(hi - v, 0)]], fmt=marker, color=color,
                                     markersize=6, elinewidth=1, capsize=2)
                        seeds = _seed_values(cell.loc[stat, "seed_values"]) * 100 if "seed_values" in cell else []
                        if len(seeds) > 1:
                            top.scatter(np.full(len(seeds), x + width * 0.25), seeds, s=6, color="#222222", zorder=3)
                    top.plot([x, x], [cell.loc["worst", "value"] * 100, cell.loc["best", "value"] * 100],
                             color=color, linewidth=1, alpha=0.6)
                    g, glo, ghi = (cell.loc["gap", k] * 100 for k in ("value", "ci_lo", "ci_hi"))
                    bottom.bar(x, g, width=width * 0.9, color=color, alpha=0.8,
                               label=pretty_method(method) if i == 0 and col == 0 else None)
                    bottom.errorbar(x, g, yerr=[[max(g - glo, 0)], [max(ghi - g, 0)]], fmt="none", ecolor="black",
                                    elinewidth=0.8, capsize=2)
                    s, slo, shi = (cell.loc["std", k] * 100 for k in ("value", "ci_lo", "ci_hi"))
                    bottom.errorbar(x, s, yerr=[[max(s - slo, 0)], [max(shi - s, 0)]], fmt="D", color="white",
                                    markeredgecolor="black", markersize=5, ecolor="black", elinewidth=0.8)
                    if "seed_values" in cell:
                        for stat in ("gap", "std"):
                            seeds = _seed_values(cell.loc[stat, "seed_values"]) * 100
                            if len(seeds) > 1:
                                bottom.scatter(np.full(len(seeds), x + width * 0.25), seeds, s=6,
                                               color="#222222", zorder=3)
            top.set_title(f"{role_label}: worst (▼) and best (▲) class")
            top.set_ylim(0, 100)
            bottom.set_title(f"{role_label}: max − min (bars) and std across classes (◆)")
            bottom.set_xticks(range(len(cats)), [labels.get(c, c) for c in cats])
            if len(cats) * max(len(labels.get(c, c)) for c in cats) > 60:
                bottom.tick_params(axis="x", labelrotation=45)
                for label in bottom.get_xticklabels():
                    label.set_horizontalalignment("right")
                    label.set_rotation_mode("anchor")
        axes[0, 0].set_ylabel("class accuracy (%)")
        axes[1, 0].set_ylabel("percentage points")
        n_seeds = int(summary["n_seeds"].max()) if "n_seeds" in summary.columns else 1
        note = "whiskers: 95% bootstrap interval over test samples"
        if n_seeds > 1:
            note = f"whiskers: 95% interval over seeds (t) and test samples (bootstrap); dots: each of {n_seeds} seeds"
        fig.legend(loc="outside lower center", ncols=len(methods), frameon=False, title=note, title_fontsize=8)
        fig.suptitle(title or f"class-wise discrepancy per {by}")
    return fig
