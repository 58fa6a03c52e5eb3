"""Class x class heatmaps (confusion, logit similarity) readable with 100 classes: classes may be
ordered and grouped (CIFAR-100 superclasses), with group boundaries and names drawn."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import Normalize

# Above this many classes every class name no longer fits; group names take over.
_MAX_NAMED = 40
# Up to this many classes a cell holds its number, readable at the panel sizes of explain._grid.
MAX_ANNOTATED = 20
# Cells darker than this (relative luminance of their colour) get white text, the others black.
_DARK = 0.5


def cell_text(value: float) -> str:
    """A percentage as a cell shows it: whole numbers; a share under 1% but above 0 as '<1'."""
    if not np.isfinite(value):
        return ""
    return "<1" if 0 < value < 0.5 else f"{value:.0f}"


def text_color(rgba: Sequence[float]) -> str:
    """Black or white, whichever stands out on a cell of colour `rgba` (ITU-R BT.601 luminance)."""
    r, g, b = rgba[:3]
    return "white" if 0.299 * r + 0.587 * g + 0.114 * b < _DARK else "black"


def annotate_cells(ax: Axes, image, shown: np.ndarray) -> None:
    """Each cell's number (cell_text) in a colour that contrasts with the cell (text_color)."""
    n = len(shown)
    size = 7 if n <= 12 else 5
    colors = image.cmap(image.norm(np.nan_to_num(shown)))
    for i in range(n):
        for j in range(n):
            if np.isfinite(shown[i, j]):
                ax.text(j, i, cell_text(shown[i, j]), ha="center", va="center", fontsize=size,
                        color=text_color(colors[i, j]))


def class_order(groups: Sequence[str] | None, num_classes: int) -> tuple[np.ndarray, list[tuple[str, int, int]]]:
    """Class order (stable within a group, groups by first appearance) and (name, start, stop) spans."""
    if groups is None:
        return np.arange(num_classes), []
    if len(groups) != num_classes:
        raise ValueError(f"{len(groups)} class groups for {num_classes} classes")
    names = list(dict.fromkeys(groups))
    order = np.array(sorted(range(num_classes), key=lambda c: (names.index(groups[c]), c)))
    spans, start = [], 0
    for name in names:
        size = sum(1 for g in groups if g == name)
        spans.append((name, start, start + size))
        start += size
    return order, spans


def draw_class_heatmap(ax: Axes, matrix: np.ndarray, class_names: Sequence[str], groups: Sequence[str] | None,
                       cmap: str, norm: Normalize, xlabel: str, ylabel: str, annotate: bool = False):
    """Draw `matrix` (rows/cols = classes) on `ax`, reordered by `groups`; returns the image.
    `annotate`: each cell's value as a number (percentages: annotate_cells), up to MAX_ANNOTATED classes."""
    order, spans = class_order(groups, len(class_names))
    shown = matrix[np.ix_(order, order)]
    image = ax.imshow(np.ma.masked_invalid(shown), cmap=cmap, norm=norm, interpolation="nearest")
    ax.grid(False)
    if annotate and len(order) <= MAX_ANNOTATED:
        annotate_cells(ax, image, shown)
    names = [str(class_names[i]) for i in order]
    n = len(names)
    if n <= _MAX_NAMED:
        ax.set_xticks(range(n), names, rotation=90, fontsize=8 if n <= 20 else 6)
        ax.set_yticks(range(n), names, fontsize=8 if n <= 20 else 6)
    else:
        ax.set_xticks([])
        ax.set_yticks(range(n), names, fontsize=3.5)
    for name, start, stop in spans:
        for edge in (start - 0.5, stop - 0.5):
            ax.axhline(edge, color="white", linewidth=0.8)
            ax.axvline(edge, color="white", linewidth=0.8)
        if n > _MAX_NAMED:
            ax.text((start + stop - 1) / 2, n - 0.5 + n * 0.01, name, rotation=90, ha="center", va="top",
                    fontsize=5.5)
    ax.set_xlabel(xlabel, labelpad=60 if spans and n > _MAX_NAMED else 4)
    ax.set_ylabel(ylabel)
    return image
