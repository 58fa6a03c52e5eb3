"""Class-wise accuracy over training epochs (the study's figure 7)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from study.figures.style import (
    AUTO,
    class_palette,
    display_title,
    draw_caveat,
    figure_size,
    figure_style,
    images_seen,
    percent_axis,
    resolve_caveat,
    run_caveat,
    table_recipe,
    with_recipe,
)
from study.metrics.seeds import seed_summary

# Above this many classes the lines are not labelled one by one (no palette keeps them apart);
# the worst class is still labelled.
_MAX_LABELLED_CLASSES = 20
_PANELS = (("clean_acc", "clean accuracy"), ("robust_acc", "robust accuracy"))
# Vertical room one direct label needs on the 0-100 axis: 8 pt text with its line spacing (0.15 in)
# on a panel about 3 in high (4.8 in figure less titles and axis labels).
_LABEL_GAP = 5.2


def _class_curves(epochs: pd.DataFrame, col: str) -> pd.DataFrame:
    """Per (class, epoch): the mean of `col` over seeds and its 95% interval over seeds and the
    epoch's test images (Wilson for one seed; no interval without an `n` column)."""
    rows = epochs.dropna(subset=[col])
    if "n" not in rows.columns:
        out = rows.groupby(["class", "epoch"])[col].mean().rename("mean").reset_index()
        return out.assign(ci_lo=np.nan, ci_hi=np.nan).sort_values(["class", "epoch"])
    out = seed_summary(rows, ["class", "epoch"], value=col, n="n").rename(columns={col: "mean"})
    return out.sort_values(["class", "epoch"]).reset_index(drop=True)


def spread_labels(values: np.ndarray, gap: float, lo: float = 0.0, hi: float = 100.0) -> np.ndarray:
    """Label heights for line ends at `values`: each as close to its line as it can be while every
    two labels are at least `gap` apart, inside [lo, hi] where they fit."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, kind="stable")
    placed = values[order].copy()
    for i in range(1, len(placed)):  # push up what sits too close to the label below
        placed[i] = max(placed[i], placed[i - 1] + gap)
    overflow = placed[-1] - hi if len(placed) else 0.0
    if overflow > 0:  # then back down from the top, never below the floor the stack allows
        placed[-1] -= overflow
        for i in range(len(placed) - 2, -1, -1):
            placed[i] = min(placed[i], placed[i + 1] - gap)
        placed = np.maximum(placed, lo + gap * np.arange(len(placed))) if placed[0] < lo else placed
    out = np.empty_like(placed)
    out[order] = placed
    return out


def _check(epochs: pd.DataFrame) -> list[tuple[str, str]]:
    required = ("epoch", "class", "clean_acc")
    missing = [c for c in required if c not in epochs.columns]
    if missing:
        raise ValueError(f"epoch table lacks column(s) {missing}; it has {list(epochs.columns)}")
    if epochs.empty:
        raise ValueError("epoch table is empty; nothing to plot")
    key = ["epoch", "class", "seed"] if "seed" in epochs.columns else ["epoch", "class"]
    if epochs.duplicated(subset=key).any():
        raise ValueError(f"epoch table repeats rows for the same {key}; plot one run group")
    panels = [(col, label) for col, label in _PANELS if col in epochs.columns and epochs[col].notna().any()]
    for col, _ in panels:
        values = epochs[col].dropna()
        if ((values < 0) | (values > 1)).any():
            raise ValueError(f"column {col!r} must hold fractions in [0, 1]; found values from "
                             f"{values.min():g} to {values.max():g}")
    return panels


def _direct_labels(ax: Axes, ends: pd.DataFrame, worst: int | None, context: dict) -> None:
    """Class names at the right end of their lines, spread so that no two overlap, with a thin
    leader from each label to its line's end when the label had to move."""
    shown = ends if len(ends) <= _MAX_LABELLED_CLASSES else ends.loc[[worst]]
    heights = spread_labels(shown["mean"].to_numpy() * 100, _LABEL_GAP)
    trans = ax.get_yaxis_transform()  # x in axes fraction, y in data
    for (cls, row), y in zip(shown.iterrows(), heights, strict=True):
        is_worst = cls == worst
        text = f"{context['names'][cls]} ({100 * row['mean']:.0f}%)" if is_worst else context["names"][cls]
        ax.annotate(text, xy=(row["epoch"], row["mean"] * 100), xycoords="data", xytext=(1.02, y),
                    textcoords=trans, va="center", ha="left", fontsize=8, color=context["colors"][cls],
                    fontweight="bold" if is_worst else "normal", annotation_clip=False,
                    # patchA None: the leader runs away from the label's left edge, so clipping it
                    # against the text box would only trim the box's 2 pt pad (shrinkA still keeps it
                    # 2 pt off the text), and that clipping is a Bezier split per label: a third of
                    # the figure's save time
                    arrowprops={"arrowstyle": "-", "color": context["colors"][cls], "lw": 0.5, "alpha": 0.6,
                                "patchA": None})


def _draw_panel(ax: Axes, epochs: pd.DataFrame, col: str, context: dict) -> tuple[int, int | None, float]:
    """One panel's class lines and interval bands; returns (last epoch, worst class, its value)."""
    curves = _class_curves(epochs, col)
    # Robust accuracy may be evaluated only every few epochs; use its last one.
    last = int(curves["epoch"].max())
    ends = curves[curves["epoch"] == last].set_index("class")
    worst = int(ends["mean"].idxmin()) if not ends.empty else None
    sparse = curves.groupby("class")["epoch"].size().max() < epochs["epoch"].nunique()
    for cls, curve in curves.groupby("class"):
        is_worst = cls == worst
        ax.plot(curve["epoch"], curve["mean"] * 100, color=context["colors"][cls], linewidth=2.6 if is_worst else 1.3,
                zorder=3 if is_worst else 2, marker="o" if sparse else None, markersize=3,
                label=context["names"][cls])
        # The worst class's band only: ten overlapping bands hide the lines they qualify.
        if is_worst and curve["ci_lo"].notna().any():
            ax.fill_between(curve["epoch"], curve["ci_lo"] * 100, curve["ci_hi"] * 100, color=context["colors"][cls],
                            alpha=0.2, linewidth=0)
    if worst is not None:
        _direct_labels(ax, ends, worst, context)
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    percent_axis(ax, "class accuracy (%)")
    return last, worst, float(ends.loc[worst, "mean"] * 100) if worst is not None else float("nan")


def _heading(title: str | None, epochs: pd.DataFrame, notes: list[str], final_epoch: int) -> str:
    heading = display_title(title) if title is not None else "class-wise accuracy during training"
    if "seed" in epochs.columns and epochs["seed"].nunique() > 1:
        heading += f" (mean of {epochs['seed'].nunique()} seeds)"
    if notes:
        # named with the evaluation it comes from: the per-epoch one is on a small test subset, so its
        # worst class can differ from the final evaluation's (the report's front page, figures 1-2)
        subset = f", {int(epochs['n'].median())} test images per class" if "n" in epochs.columns else ""
        heading += (f"\nworst class at epoch {final_epoch} (per-epoch evaluation{subset}; not the final "
                    "evaluation's): " + ", ".join(notes))
    return heading


def _band_note(epochs: pd.DataFrame) -> str:
    if "n" not in epochs.columns:
        return "no interval: the table has no test-image counts (n)"
    over = "seeds and test images" if "seed" in epochs.columns and epochs["seed"].nunique() > 1 else "test images"
    return (f"band: 95% interval of the worst class over {over} "
            f"({int(epochs['n'].median())} test images per class and epoch)")


def _auto_caveat(epochs: pd.DataFrame) -> str | None:
    final = epochs[epochs["epoch"] == epochs["epoch"].max()]
    return run_caveat(epochs=float(epochs["epoch"].max()), mean_acc=float(final["clean_acc"].mean()),
                      num_classes=int(epochs["class"].nunique()), images_seen=images_seen(epochs))


def plot_epochs(epochs: pd.DataFrame, title: str | None = None, *, caveat: str | None = AUTO,
                recipe: str | None = AUTO) -> Figure:
    """Per-class clean and robust accuracy (%) against epoch, one line per class.

    `epochs` holds the per-epoch records (epoch, class, class_name, clean_acc,
    robust_acc as fractions; n, the test images per class, gives the bands; other columns
    ignored). With several values in a `seed` column the line is the mean over seeds; the band
    is the 95% interval over seeds and test images (Wilson for one seed). The robust panel is
    left out when robust_acc is absent or all NaN; epochs without a robust evaluation are
    skipped, so sparse evaluations still draw connected lines (the band: the worst class only,
    so that it stays readable). Every line is labelled at its
    end (up to 20 classes, spread so no two labels overlap); the worst class at the final epoch
    is drawn thicker, labelled with its value and named in the title. `caveat` is drawn on every
    panel (AUTO: fewer than style.MIN_EPOCHS epochs or chance-level clean accuracy). `recipe` is the
    title's last line (AUTO: style.table_recipe of the runs' `epochs` and `train_per_class`, a note
    where they were trained below the published recipe).
    """
    panels = _check(epochs)
    names_src = epochs[["class", "class_name"]] if "class_name" in epochs.columns else (
        epochs[["class"]].assign(class_name=epochs["class"].astype(str)))
    names = names_src.drop_duplicates("class").set_index("class")["class_name"].astype(str).sort_index()
    context = {"names": names, "colors": dict(zip(names.index, class_palette(len(names)), strict=True))}
    final_epoch = int(epochs["epoch"].max())
    note = resolve_caveat(caveat, lambda: _auto_caveat(epochs))
    recipe = resolve_caveat(recipe, lambda: table_recipe(epochs))
    with figure_style():
        # the right margin of each panel holds its direct labels
        fig = Figure(figsize=figure_size(6.6 * len(panels) + 0.6, 4.8), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(panels), sharex=True, sharey=True, squeeze=False)[0])
        worst_notes = []
        for ax, (col, label) in zip(axes, panels, strict=True):
            last, worst, value = _draw_panel(ax, epochs, col, context)
            ax.set_title(label)
            draw_caveat(ax, note)
            if worst is not None:
                at = "" if last == final_epoch else f" at epoch {last}"
                worst_notes.append(f"{label} {names[worst]} ({value:.1f}%){at}")
        for ax in axes[1:]:
            ax.set_ylabel("")
        fig.supxlabel(_band_note(epochs), fontsize=8)  # laid out below the panels, never on them
        fig.suptitle(with_recipe(_heading(title, epochs, worst_notes, final_epoch), recipe, fig.get_figwidth()))
    return fig
