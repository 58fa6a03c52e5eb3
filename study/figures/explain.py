"""Figures 8 (rank agreement), 9 (confusion matrices) and 10 (mean-logit cosine similarity)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.colors import Normalize, PowerNorm
from matplotlib.figure import Figure

from study.figures.heatmap import draw_class_heatmap
from study.figures.style import figure_style

_ANNOTATE_UP_TO = 12


def plot_rank_agreement(panels: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]], title: str | None = None) -> Figure:
    """One heatmap per panel (e.g. per evaluation) of (spearman, kendall) matrices over the same
    configurations: Spearman's rho below the diagonal, Kendall's tau above it."""
    if not panels:
        raise ValueError("no rank-agreement matrices given")
    size = max(len(s) for s, _ in panels.values())
    side = float(np.clip(2.5 + 0.35 * size, 5.0, 16.0))
    with figure_style():
        fig = Figure(figsize=(side * len(panels) + 1.2, side + 0.8), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(panels), squeeze=False)[0])
        image = None
        for ax, (name, (rho, tau)) in zip(axes, panels.items(), strict=True):
            if list(rho.index) != list(tau.index):
                raise ValueError(f"panel {name!r}: spearman and kendall matrices cover different configurations")
            n = len(rho)
            lower = np.tril(np.ones((n, n), dtype=bool), -1)
            values = np.where(lower, rho.to_numpy(float), tau.to_numpy(float))
            np.fill_diagonal(values, np.nan)
            image = ax.imshow(np.ma.masked_invalid(values), cmap="RdBu_r", vmin=-1, vmax=1)
            ax.grid(False)
            labels = [str(c) for c in rho.index]
            fs = 8 if n <= 15 else max(4, int(8 - n / 10))
            ax.set_xticks(range(n), labels, rotation=90, fontsize=fs)
            ax.set_yticks(range(n), labels, fontsize=fs)
            if n <= _ANNOTATE_UP_TO:
                for i in range(n):
                    for j in range(n):
                        if i != j and np.isfinite(values[i, j]):
                            ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=7,
                                    color="white" if abs(values[i, j]) > 0.6 else "black")
            ax.set_title(f"{name}\nlower: Spearman ρ   upper: Kendall τ", fontsize=10)
        fig.colorbar(image, ax=list(axes), shrink=0.6, label="rank correlation of class accuracies")
        fig.suptitle(title or "rank agreement of class accuracies")
    return fig


def _class_panels(panels: Mapping[str, np.ndarray], class_names: Sequence[str], groups: Sequence[str] | None,
                  cmap: str, norm: Normalize, xlabel: str, ylabel: str, bar_label: str, title: str) -> Figure:
    if not panels:
        raise ValueError("no matrices given")
    n = len(class_names)
    for name, m in panels.items():
        if m.shape != (n, n):
            raise ValueError(f"panel {name!r} is {m.shape}, expected ({n}, {n}) for {n} classes")
    side = float(np.clip(2.0 + 0.1 * n, 4.5, 11.0))
    with figure_style():
        fig = Figure(figsize=(side * len(panels) + 1.0, side + 1.0), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(panels), squeeze=False)[0])
        image = None
        for ax, (name, matrix) in zip(axes, panels.items(), strict=True):
            image = draw_class_heatmap(ax, matrix, class_names, groups, cmap, norm, xlabel, ylabel)
            ax.set_title(name)
        fig.colorbar(image, ax=list(axes), shrink=0.6, label=bar_label)
        fig.suptitle(title)
    return fig


def plot_confusion(panels: Mapping[str, np.ndarray], class_names: Sequence[str],
                   groups: Sequence[str] | None = None, title: str | None = None) -> Figure:
    """Row-normalized confusion matrices (true class x predicted class), one panel per evaluation.
    A square-root colour scale keeps the off-diagonal confusions visible next to the diagonal."""
    return _class_panels(panels, class_names, groups, "viridis", PowerNorm(0.5, vmin=0, vmax=1),
                         "predicted class", "true class", "share of the true class's samples (√ scale)",
                         title or "confusion matrices")


def plot_logit_similarity(panels: Mapping[str, np.ndarray], class_names: Sequence[str],
                          groups: Sequence[str] | None = None, title: str | None = None) -> Figure:
    """Cosine similarity between the mean logit vectors of the true classes, one panel per evaluation."""
    return _class_panels(panels, class_names, groups, "RdBu_r", Normalize(-1, 1), "true class", "true class",
                         "cosine similarity of mean logit vectors",
                         title or "cross-class cosine similarity of mean logits")
