"""Figures 8 (rank agreement), 9 (confusion matrices) and 10 (mean-logit cosine similarity)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import Normalize, PowerNorm
from matplotlib.figure import Figure

from study.figures.heatmap import draw_class_heatmap
from study.figures.style import (
    AUTO,
    MAX_INCHES,
    display_title,
    draw_caveat,
    figure_size,
    figure_style,
    hide_unused,
    panel_title,
    resolve_caveat,
    run_caveat,
    with_recipe,
)
from study.labels import NORM_NAMES, eval_name, eval_norm, norm_title
from study.metrics.rank import class_accuracy_matrix, rank_agreement

_ANNOTATE_UP_TO = 12
# Rank matrices side by side: at most this many per row (their labels are long).
_RANK_COLUMNS = 2
# Class matrices side by side: at most this many per row.
_CLASS_COLUMNS = 3


def _grid(panels: int, natural: float, max_cols: int, extra_w: float, extra_h: float) -> tuple[int, int, float]:
    """(rows, cols, side) for square panels: the column count that lets the panels be largest
    within MAX_INCHES both ways, never larger than `natural` inches."""
    best = (1, 1, 0.0)
    for cols in range(1, min(panels, max_cols) + 1):
        rows = -(-panels // cols)
        side = min(natural, (MAX_INCHES - extra_w) / cols, (MAX_INCHES - extra_h) / rows - 0.6)
        if side > best[2] + 1e-9:
            best = (rows, cols, side)
    return best


def rank_panels(table: pd.DataFrame, config: str = "config", evaluations: Sequence[str] | None = None,
                eval_settings: Mapping[str, Mapping] | None = None) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    """The panels of figure 8 from a class-wise table with a `config` column: clean accuracy, then
    one panel per threat model, each run contributing its first evaluation of that threat model
    (in `evaluations` order, else sorted), so L2 and L-inf robustness are never ranked in one matrix."""
    settings = dict(eval_settings or {})
    prefer = [*(evaluations or []), *sorted(set(table["eval"]) - set(evaluations or []))]
    parts: dict[str | None, list[pd.DataFrame]] = {}
    for _, run in table.groupby("run_id" if "run_id" in table.columns else config, sort=False):
        have = set(run["eval"])
        for norm in dict.fromkeys(eval_norm(e, settings.get(e)) for e in prefer if e in have):
            chosen = next(e for e in prefer if e in have and eval_norm(e, settings.get(e)) == norm)
            parts.setdefault(norm, []).append(run[run["eval"] == chosen])
    panels = {}
    for norm in sorted(parts, key=lambda n: (n is not None, {"linf": 0, "l2": 1}.get(n or "", 2))):
        part = pd.concat(parts[norm], ignore_index=True)
        wide = class_accuracy_matrix(part, [config])
        evals = ", ".join(eval_name(e, settings.get(e)) for e in dict.fromkeys(part["eval"]))
        name = "clean accuracy" if norm is None else f"robustness, {norm_title(norm)} ({evals})"
        panels[name] = (rank_agreement(wide, "spearman"), rank_agreement(wide, "kendall"))
    return panels


def _rank_panel(ax: Axes, name: str, rho: pd.DataFrame, tau: pd.DataFrame, named: bool):
    """One matrix. Columns are numbered and rows carry the numbered names (`named`) or the numbers
    alone: names under the matrix too would take as much room as the matrix itself."""
    if list(rho.index) != list(tau.index):
        raise ValueError(f"panel {name!r}: spearman and kendall matrices cover different configurations")
    n = len(rho)
    lower = np.tril(np.ones((n, n), dtype=bool), -1)
    values = np.where(lower, rho.to_numpy(float), tau.to_numpy(float))
    np.fill_diagonal(values, np.nan)
    image = ax.imshow(np.ma.masked_invalid(values), cmap="RdBu_r", vmin=-1, vmax=1)
    ax.grid(False)
    fs = 8 if n <= 15 else max(4, int(8 - n / 10))
    numbers = [str(i + 1) for i in range(n)]
    ax.set_xticks(range(n), numbers, fontsize=fs)
    ax.set_yticks(range(n), [f"{display_title(str(c))}  {i + 1}" for i, c in enumerate(rho.index)] if named
                  else numbers, fontsize=fs)
    if n <= _ANNOTATE_UP_TO:
        for i in range(n):
            for j in range(n):
                if i != j and np.isfinite(values[i, j]):
                    ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if abs(values[i, j]) > 0.6 else "black")
    ax.set_title(f"{panel_title(name)}\nlower: Spearman ρ   upper: Kendall τ", fontsize=10)
    return image


def _mixed_norms(name: str) -> str | None:
    """A panel whose name lists attacks of two threat models ranks incomparable budgets together;
    say so on it (rank_panels never builds one)."""
    shown = [label for label in NORM_NAMES.values() if label in name]
    return f"mixes {' and '.join(shown)} attacks: not comparable" if len(shown) > 1 else None


def plot_rank_agreement(panels: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]], title: str | None = None, *,
                        caveat: str | None = None, left_out: str | None = None,
                        recipe: str | None = None) -> Figure:
    """One heatmap per panel (e.g. per evaluation; rank_panels builds them split by threat model) of
    (spearman, kendall) matrices over the same configurations: Spearman's rho below the diagonal,
    Kendall's tau above it. At most two panels per row; a panel lists its configurations' names
    unless it has those of the panel to its left. `caveat` is drawn on every panel; `left_out` (the
    note naming the evaluations the checks flagged, left out of the matrices:
    study.figures.trust.left_out_note) under them. `recipe`: the title's second line (style.table_recipe
    of the runs ranked: the matrices keep no run columns)."""
    if not panels:
        raise ValueError("no rank-agreement matrices given")
    size = max(len(s) for s, _ in panels.values())
    longest = max(len(display_title(str(c))) for s, _ in panels.values() for c in s.index)
    labels_in = min(5.0, 0.3 + 0.065 * longest)  # 8 pt names beside the first matrix of a row
    rows, cols = -(-len(panels) // _RANK_COLUMNS), min(len(panels), _RANK_COLUMNS)
    side = min(float(np.clip(2.5 + 0.35 * size, 4.0, 12.0)), (MAX_INCHES - labels_in - 1.6) / cols)
    items = list(panels.items())
    with figure_style():
        fig = Figure(figsize=figure_size(labels_in + cols * (side + 0.4) + 1.2, rows * (side + 1.2) + 0.8),
                     layout="constrained")
        axes = np.asarray(fig.subplots(rows, cols, squeeze=False)).ravel()
        image = None
        for k, (ax, (name, (rho, tau))) in enumerate(zip(axes, items, strict=False)):
            left = items[k - 1][1][0].index if k % cols else None
            image = _rank_panel(ax, name, rho, tau, named=left is None or list(left) != list(rho.index))
            draw_caveat(ax, _mixed_norms(name) or caveat)
        hide_unused(axes, len(panels))
        if image is not None:
            fig.colorbar(image, ax=list(axes[: len(panels)]), shrink=0.6, label="rank correlation of class accuracies")
        fig.supxlabel("\n".join(filter(None, ["columns: the configurations numbered as in the rows", left_out])),
                      fontsize=8)
        fig.suptitle(with_recipe(display_title(title) if title else "rank agreement of class accuracies", recipe,
                                 fig.get_figwidth()))
    return fig


def _chance_caveat(panels: Mapping[str, np.ndarray]) -> str | None:
    """From the clean confusion matrix (rows: true class, shares): its mean diagonal is the mean
    class accuracy."""
    clean = next((m for name, m in panels.items() if name.lower().startswith("clean")), None)
    if clean is None:
        return None
    return run_caveat(mean_acc=float(np.nanmean(np.diag(clean))), num_classes=len(clean))


def _class_panels(panels: Mapping[str, np.ndarray], class_names: Sequence[str], groups: Sequence[str] | None,
                  style: dict, title: str, caveat: str | None, recipe: str | None = None) -> Figure:
    if not panels:
        raise ValueError("no matrices given")
    n = len(class_names)
    for name, m in panels.items():
        if m.shape != (n, n):
            raise ValueError(f"panel {name!r} is {m.shape}, expected ({n}, {n}) for {n} classes")
    rows, cols, side = _grid(len(panels), float(np.clip(2.0 + 0.1 * n, 4.5, 11.0)), _CLASS_COLUMNS, 1.6, 1.2)
    with figure_style():
        fig = Figure(figsize=figure_size(side * cols + 1.6, (side + 0.8) * rows + 0.8), layout="constrained")
        axes = np.asarray(fig.subplots(rows, cols, squeeze=False)).ravel()
        image = None
        for ax, (name, matrix) in zip(axes, panels.items(), strict=False):
            image = draw_class_heatmap(ax, matrix * style["scale"], class_names, groups, style["cmap"], style["norm"],
                                       style["xlabel"], style["ylabel"], annotate=style.get("annotate", False))
            ax.set_title(panel_title(name))
            draw_caveat(ax, caveat)
        hide_unused(axes, len(panels))
        if image is not None:
            fig.colorbar(image, ax=list(axes[: len(panels)]), shrink=0.6, label=style["bar_label"])
        fig.suptitle(with_recipe(display_title(title), recipe, fig.get_figwidth()))
    return fig


def plot_confusion(panels: Mapping[str, np.ndarray], class_names: Sequence[str],
                   groups: Sequence[str] | None = None, title: str | None = None, *,
                   caveat: str | None = AUTO, recipe: str | None = None) -> Figure:
    """Row-normalized confusion matrices (true class x predicted class, shares), one panel per
    evaluation, at most three per row, drawn in percent, each cell's percentage written in it (up
    to heatmap.MAX_ANNOTATED classes) in black or white against its colour. A square-root colour
    scale keeps the off-diagonal confusions visible next to the diagonal. `caveat` AUTO: a note when
    the clean panel's mean class accuracy is at chance level. `recipe`: the title's second line
    (style.reduced_recipe of the runs drawn)."""
    style = {"cmap": "viridis", "norm": PowerNorm(0.5, vmin=0, vmax=100), "scale": 100.0,
             "xlabel": "predicted class", "ylabel": "true class", "annotate": True,
             "bar_label": "share of the true class's samples (%, √ scale; the numbers in the cells)"}
    return _class_panels(panels, class_names, groups, style, title or "confusion matrices",
                         resolve_caveat(caveat, lambda: _chance_caveat(panels)), recipe)


def plot_logit_similarity(panels: Mapping[str, np.ndarray], class_names: Sequence[str],
                          groups: Sequence[str] | None = None, title: str | None = None, *,
                          caveat: str | None = None, recipe: str | None = None) -> Figure:
    """Cosine similarity between the mean logit vectors of the true classes, one panel per
    evaluation, at most three per row; `recipe` as in plot_confusion."""
    style = {"cmap": "RdBu_r", "norm": Normalize(-1, 1), "scale": 1.0, "xlabel": "true class",
             "ylabel": "true class", "bar_label": "cosine similarity of mean logit vectors"}
    return _class_panels(panels, class_names, groups, style, title or "cross-class cosine similarity of mean logits",
                         None if caveat == AUTO else caveat, recipe)
