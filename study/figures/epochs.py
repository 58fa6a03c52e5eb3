"""Class-wise accuracy over training epochs (the study's figure 7)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from study.figures.style import class_palette, figure_style

# A legend with more entries than this is unreadable; the worst class is still
# annotated on the lines.
_MAX_LEGEND_CLASSES = 20
_PANELS = (("clean_acc", "clean accuracy"), ("robust_acc", "robust accuracy"))


def _class_curves(epochs: pd.DataFrame, col: str) -> pd.DataFrame:
    """Mean, min and max of `col` over seeds per (class, epoch), NaN rows dropped."""
    rows = epochs.dropna(subset=[col])
    return (rows.groupby(["class", "epoch"])[col].agg(["mean", "min", "max"])
            .reset_index().sort_values(["class", "epoch"]))


def plot_epochs(epochs: pd.DataFrame, title: str | None = None) -> Figure:
    """Per-class clean and robust accuracy (%) against epoch, one line per class.

    `epochs` holds the per-epoch records (epoch, class, class_name, clean_acc,
    robust_acc as fractions; other columns ignored). With several values in a `seed`
    column the line is the mean over seeds and a band spans their min to max. The
    robust panel is left out when robust_acc is absent or all NaN; epochs without a
    robust evaluation are skipped, so sparse evaluations still draw connected lines.
    The worst class at the final epoch is drawn thicker, labelled at the line's end
    and named in the title.
    """
    required = ("epoch", "class", "clean_acc")
    missing = [c for c in required if c not in epochs.columns]
    if missing:
        raise ValueError(f"epoch table lacks column(s) {missing}; it has {list(epochs.columns)}")
    if epochs.empty:
        raise ValueError("epoch table is empty; nothing to plot")
    key = ["epoch", "class", "seed"] if "seed" in epochs.columns else ["epoch", "class"]
    if epochs.duplicated(subset=key).any():
        raise ValueError(f"epoch table repeats rows for the same {key}; plot one run group")
    panels = [(col, label) for col, label in _PANELS
              if col in epochs.columns and epochs[col].notna().any()]
    for col, _ in panels:
        values = epochs[col].dropna()
        if ((values < 0) | (values > 1)).any():
            raise ValueError(
                f"column {col!r} must hold fractions in [0, 1]; found values from "
                f"{values.min():g} to {values.max():g}"
            )

    names_src = epochs[["class", "class_name"]] if "class_name" in epochs.columns else (
        epochs[["class"]].assign(class_name=epochs["class"].astype(str)))
    names = names_src.drop_duplicates("class").set_index("class")["class_name"].astype(str)
    names = names.sort_index()
    colors = dict(zip(names.index, class_palette(len(names)), strict=True))
    multi_seed = "seed" in epochs.columns and epochs["seed"].nunique() > 1
    final_epoch = int(epochs["epoch"].max())

    with figure_style():
        fig = Figure(figsize=(6.0 * len(panels) + 1.8, 4.6), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(panels), sharex=True, sharey=True,
                                              squeeze=False)[0])
        worst_notes = []
        for ax, (col, label) in zip(axes, panels, strict=True):
            curves = _class_curves(epochs, col)
            # Robust accuracy may be evaluated only every few epochs; use its last one.
            last = int(curves["epoch"].max())
            final = curves[curves["epoch"] == last].set_index("class")["mean"]
            worst = int(final.idxmin()) if not final.empty else None
            sparse = curves.groupby("class")["epoch"].size().max() < epochs["epoch"].nunique()
            for cls, curve in curves.groupby("class"):
                is_worst = cls == worst
                ax.plot(curve["epoch"], curve["mean"] * 100, color=colors[cls],
                        linewidth=2.6 if is_worst else 1.3, zorder=3 if is_worst else 2,
                        marker="o" if sparse else None, markersize=3, label=names[cls])
                if multi_seed:
                    ax.fill_between(curve["epoch"], curve["min"] * 100, curve["max"] * 100,
                                    color=colors[cls], alpha=0.15, linewidth=0)
            if worst is not None:
                value = final[worst] * 100
                ax.annotate(f"worst: {names[worst]} ({value:.1f}%)", xy=(last, value),
                            xytext=(-4, -12), textcoords="offset points", ha="right",
                            fontsize=8, color=colors[worst], fontweight="bold",
                            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                                  "alpha": 0.8})
                at = "" if last == final_epoch else f" at epoch {last}"
                worst_notes.append(f"{label} {names[worst]} ({value:.1f}%){at}")
            ax.set_title(label)
            ax.set_xlabel("epoch")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylim(0, 100)
        axes[0].set_ylabel("class accuracy (%)")

        if len(names) <= _MAX_LEGEND_CLASSES:
            handles, labels = axes[0].get_legend_handles_labels()
            fig.legend(handles, labels, loc="outside right upper", frameon=False,
                       title="class" + (" (band: seed min-max)" if multi_seed else ""),
                       title_fontsize=8)
        heading = title if title is not None else "class-wise accuracy during training"
        if multi_seed:
            heading += f" (mean of {epochs['seed'].nunique()} seeds)"
        if worst_notes:
            heading += f"\nworst class at epoch {final_epoch}: " + ", ".join(worst_notes)
        fig.suptitle(heading)
    return fig
