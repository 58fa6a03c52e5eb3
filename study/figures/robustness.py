"""Robustness figures: class x corruption heatmap (docs/study.md#figures, 14), class false-positive
scores (figure 11) and class-wise standard and robust error (figure 3)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from study.figures.style import (
    AUTO,
    class_palette,
    counted_title,
    display_title,
    draw_caveat,
    figure_size,
    figure_style,
    grid_shape,
    hide_unused,
    images_seen,
    norm_groups,
    percent_axis,
    resolve_caveat,
    run_caveat,
    table_recipe,
    with_recipe,
)
from study.labels import corruption_name, eval_label, eval_name, method_name, norm_title
from study.metrics.seeds import seed_summary


def pooled_accuracy(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Accuracy per `by` group: each run's counts pooled over the severities shown, then the mean over
    runs (seeds) with its interval over seeds and test images (Wilson for one run)."""
    runs = ["run_id"] if "run_id" in rows.columns else []
    per_run = rows.groupby([*by, *runs], sort=False)[["n", "correct"]].sum().reset_index()
    per_run["acc"] = per_run["correct"] / per_run["n"]
    return seed_summary(per_run, by)


def cfp_over_seeds(table: pd.DataFrame) -> pd.DataFrame:
    """Class false-positive score per (eval, class): mean over the runs (seeds) in `table`, with its 95%
    interval over seeds and the misclassified samples of each (Wilson for one run)."""
    return seed_summary(table, ["eval", "class", "class_name"], value="cfp", n="misclassified")


def _epochs_caveat(rows: pd.DataFrame) -> str | None:
    """Fewest epochs of the runs drawn (these tables have no clean accuracy to test for chance)."""
    if "epochs" not in rows.columns:
        return None
    return run_caveat(epochs=float(pd.to_numeric(rows["epochs"], errors="coerce").min()),
                      images_seen=images_seen(rows))


def _corruption_heatmap(fig: Figure, ax: Axes, grid: pd.DataFrame) -> None:
    values = grid.to_numpy() * 100
    image = ax.imshow(values, cmap="viridis", vmin=0, vmax=100, aspect="auto", interpolation="nearest")
    ax.set_yticks(range(len(grid.index)), grid.index)
    ax.grid(False)
    if values.size <= 400:  # beyond that the numbers no longer fit their cells
        for (i, j), v in np.ndenumerate(values):
            ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=7, color="w" if v < 60 else "k")
    fig.colorbar(image, ax=ax, label="class accuracy (%)", shrink=0.9)
    ax.set_title("accuracy per class and corruption (%), pooled over the severities shown", loc="left")
    ax.tick_params(axis="x", labelbottom=False)


def _worst_strip(ax: Axes, pooled: pd.DataFrame, grid: pd.DataFrame, corruptions: list[str]) -> None:
    worst = pooled.loc[pooled.groupby("corruption", sort=False)["acc"].idxmin()].set_index("corruption")
    worst = worst.loc[corruptions]
    xs = np.arange(len(corruptions))
    acc, lo, hi = (worst[c].to_numpy() * 100 for c in ("acc", "ci_lo", "ci_hi"))
    err = [np.clip(acc - lo, 0, None), np.clip(hi - acc, 0, None)]
    ax.errorbar(xs, acc, yerr=err, fmt="o", color="#C44E52", capsize=3, label="worst class (95% interval)",
                clip_on=False)
    ax.plot(xs, grid.mean(axis=0).to_numpy() * 100, "s", color="#4C72B0", label="mean over classes", clip_on=False)
    for x, name, y in zip(xs, worst["class_name"], acc, strict=True):
        ax.annotate(str(name), (x, y), textcoords="offset points", xytext=(5, 3), fontsize=7, rotation=30)
    ax.set_xticks(xs, [corruption_name(c) for c in corruptions], rotation=45, ha="right")
    percent_axis(ax, "accuracy (%)")
    ax.set_title("worst class per corruption (named), and the mean over classes", loc="left")


def plot_corruptions(rows: pd.DataFrame, title: str, *, caveat: str | None = AUTO,
                     recipe: str | None = AUTO) -> Figure:
    """Top: class x corruption accuracy (%, pooled over the severities shown). Below, on the same
    corruption axis: the worst class's accuracy per corruption with its 95% interval over seeds and
    test images (Wilson for one run), and the mean over classes. `caveat` AUTO: a note when the
    runs have fewer than style.MIN_EPOCHS epochs. `recipe`: the title's last line (AUTO:
    style.table_recipe of the runs drawn, a note where they were trained below the published recipe)."""
    classes = rows.drop_duplicates("class").sort_values("class")["class_name"].tolist()
    corruptions = list(dict.fromkeys(rows["corruption"]))
    pooled = pooled_accuracy(rows, ["corruption", "class", "class_name"])
    grid = pooled.pivot(index="class_name", columns="corruption", values="acc").loc[classes, corruptions]
    note = resolve_caveat(caveat, lambda: _epochs_caveat(rows))
    recipe = resolve_caveat(recipe, lambda: table_recipe(rows))
    with figure_style():
        fig = Figure(figsize=figure_size(float(np.clip(3.5 + 0.5 * len(corruptions), 7.0, 16.0)),
                                         2.0 + 0.3 * len(classes) + 3.6), layout="constrained")
        ax, ax2 = fig.subplots(2, 1, sharex=True, height_ratios=[max(2.0, 0.3 * len(classes)), 2.6])
        _corruption_heatmap(fig, ax, grid)
        _worst_strip(ax2, pooled, grid, corruptions)
        draw_caveat(ax, note)
        fig.legend(*ax2.get_legend_handles_labels(), loc="outside lower center", ncols=2, frameon=False)
        sev = sorted(int(s) for s in rows["severity"].unique())
        fig.suptitle(with_recipe(f"{display_title(title)}\nCIFAR-10-C ({rows['corruption_variant'].iloc[0]}), "
                                 f"severit{'y' if len(sev) == 1 else 'ies'} {', '.join(map(str, sev))}", recipe,
                                 fig.get_figwidth()))
    return fig


def _cfp_panel(ax: Axes, table: pd.DataFrame, evals: list[str], context: dict) -> None:
    width = 0.8 / len(evals)
    for k, ev in enumerate(evals):
        r = table[table["eval"] == ev].sort_values("class")
        xs = np.arange(len(r)) + (k - (len(evals) - 1) / 2) * width
        mid, lo, hi = (r[c].to_numpy() * 100 for c in ("cfp", "ci_lo", "ci_hi"))
        ax.bar(xs, mid, width, yerr=[np.clip(mid - lo, 0, None), np.clip(hi - mid, 0, None)], capsize=2,
               label=eval_label(ev, context["settings"].get(ev)), color=context["colors"][ev])
    n_classes = len(context["classes"])
    ax.axhline(100 / n_classes, color="k", lw=0.8, ls="--", label=f"uniform (1/{n_classes} of the errors)")
    ax.set_xticks(range(n_classes), context["classes"], rotation=30, ha="right")
    top = float(np.nanmax(table.loc[table["eval"].isin(evals), "ci_hi"])) * 100
    percent_axis(ax, "class false-positive score\n(% of misclassified samples)", hi=min(100.0, top * 1.1 + 1))


def plot_cfp(table: pd.DataFrame, title: str, *, eval_settings: Mapping[str, Mapping] | None = None,
             caveat: str | None = AUTO, recipe: str | None = AUTO) -> Figure:
    """Class false-positive score per class and evaluation (% of misclassified samples predicted
    as that class), mean over the runs (seeds) in `table`, with 95% intervals over seeds and
    misclassified samples (Wilson for one run). One panel per threat model (clean in each), the
    legend below the panels. `caveat` AUTO: a note when the runs have fewer than style.MIN_EPOCHS epochs.
    `recipe`: the title's second line (AUTO: style.table_recipe of the runs drawn)."""
    note = resolve_caveat(caveat, lambda: _epochs_caveat(table))
    # decided on the runs' rows: the mean over seeds below drops the run columns it reads
    recipe = resolve_caveat(recipe, lambda: table_recipe(table))
    settings = dict(eval_settings or {})
    table = cfp_over_seeds(table)
    evals = list(dict.fromkeys(table["eval"]))
    groups = norm_groups(evals, settings)
    palette = class_palette(max(10, len(evals) + 1))
    context = {"settings": settings, "colors": {ev: palette[k + 1] for k, ev in enumerate(evals)},
               "classes": table.drop_duplicates("class").sort_values("class")["class_name"].tolist()}
    with figure_style():
        fig = Figure(figsize=figure_size(1.5 + 0.7 * len(context["classes"]), 3.4 * len(groups) + 1.2),
                     layout="constrained")
        axes = np.atleast_1d(fig.subplots(len(groups), 1, squeeze=False)[:, 0])
        for ax, (norm, group) in zip(axes, groups, strict=True):
            _cfp_panel(ax, table, group, context)
            if len(groups) > 1:
                ax.set_title(norm_title(norm), loc="left", fontweight="bold")
            draw_caveat(ax, note)
        handles = {lab: h for ax in axes for h, lab in zip(*ax.get_legend_handles_labels(), strict=True)}
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=min(3, len(handles)),
                   frameon=False, title="whiskers: 95% interval over seeds and misclassified samples",
                   title_fontsize=8)
        fig.suptitle(with_recipe(display_title(title), recipe, fig.get_figwidth()))
    return fig


def _frl_bars(ax: Axes, rows: pd.DataFrame) -> None:
    """Standard and robust error per class with 95% intervals over seeds and test images."""
    for offset, col, label, color in ((-0.2, "standard_error", "standard error (1 − clean accuracy)", "#4C72B0"),
                                      (0.2, "robust_error", "robust error (1 − robustness)", "#C44E52")):
        s = seed_summary(rows, ["class", "class_name"], value=col, n="n").sort_values("class")
        xs = np.arange(len(s)) + offset
        mid, lo, hi = (s[c].to_numpy() * 100 for c in (col, "ci_lo", "ci_hi"))
        ax.bar(xs, mid, 0.4, label=label, color=color)
        ax.errorbar(xs, mid, yerr=[np.clip(mid - lo, 0, None), np.clip(hi - mid, 0, None)], fmt="none",
                    ecolor="black", elinewidth=0.8, capsize=2)


def _frl_caveat(rows: pd.DataFrame, num_classes: int) -> str | None:
    epochs = float(pd.to_numeric(rows["epochs"], errors="coerce").min()) if "epochs" in rows.columns else None
    return run_caveat(epochs=epochs, mean_acc=1 - float(rows.groupby("class")["standard_error"].mean().mean()),
                      num_classes=num_classes, images_seen=images_seen(rows))


def plot_frl_errors(table: pd.DataFrame, title: str, *, eval_settings: Mapping[str, Mapping] | None = None,
                    caveat: str | None = AUTO, recipe: str | None = AUTO) -> Figure:
    """Standard error (1 - a_c) and robust error (1 - r_c) per class (%), with 95% intervals over
    seeds and test images (Wilson for one run); one panel per method and attack, at most three per
    row. `caveat` AUTO: decided per method (few epochs or chance-level clean accuracy). `recipe`: the
    title's second line (AUTO: style.table_recipe of every method's runs drawn)."""
    recipe = resolve_caveat(recipe, lambda: table_recipe(table))
    settings = dict(eval_settings or {})
    evals = list(dict.fromkeys(table["eval"])) if "eval" in table.columns else [None]
    methods = list(dict.fromkeys(table["method"]))
    classes = table.drop_duplicates("class").sort_values("class")["class_name"].tolist()
    # one row per attack, one column per method (so methods line up under one attack), wrapped
    # at three columns; an attack a method lacks leaves its cell empty
    panels = [(m, ev) for ev in evals for m in methods]
    present = [not table[(table["method"] == m) & ((table["eval"] == ev) if ev else True)].empty for m, ev in panels]
    rows_n, cols = (len(evals), len(methods)) if len(methods) <= 3 else grid_shape(len(panels), 3)
    with figure_style():
        fig = Figure(figsize=figure_size(1.2 + max(3.6, 0.45 * len(classes)) * cols, 3.4 * rows_n + 1.2),
                     layout="constrained")
        axes = np.asarray(fig.subplots(rows_n, cols, sharey=True, squeeze=False)).ravel()
        for ax, (method, ev), drawn in zip(axes, panels, present, strict=False):
            if not drawn:
                ax.set_axis_off()
                continue
            rows = table[(table["method"] == method) & ((table["eval"] == ev) if ev else True)]
            _frl_bars(ax, rows)
            ax.set_xticks(range(len(classes)), classes, rotation=30, ha="right")
            attack = f"\nrobust error under {eval_name(ev, settings.get(ev))}" if ev else ""
            ax.set_title(method_name(method) + attack)
            percent_axis(ax, "error (%)")
            draw_caveat(ax, resolve_caveat(caveat, partial(_frl_caveat, rows, len(classes))))
        hide_unused(axes, len(panels))
        handles = {lab: h for ax in axes for h, lab in zip(*ax.get_legend_handles_labels(), strict=True)}
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=2, frameon=False,
                   title="whiskers: 95% interval over seeds and test images", title_fontsize=8)
        fig.suptitle(with_recipe(counted_title(title, len(methods), "method"), recipe, fig.get_figwidth()))
    return fig
