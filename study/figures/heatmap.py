"""Class x class heatmaps (confusion, logit similarity) readable with 100 classes: classes may be
ordered and grouped (CIFAR-100 superclasses), with group boundaries and names drawn."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import Normalize

# Above this many classes every class name no longer fits; group names take over.
_MAX_NAMED = 40


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
                       cmap: str, norm: Normalize, xlabel: str, ylabel: str):
    """Draw `matrix` (rows/cols = classes) on `ax`, reordered by `groups`; returns the image."""
    order, spans = class_order(groups, len(class_names))
    shown = matrix[np.ix_(order, order)]
    image = ax.imshow(np.ma.masked_invalid(shown), cmap=cmap, norm=norm, interpolation="nearest")
    ax.grid(False)
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
