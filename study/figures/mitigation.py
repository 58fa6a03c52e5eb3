"""Figure 13: mitigation methods under one protocol, and how their policies adapt.

`mitigation_table` turns the class-wise table (results/<preset>/tables/classwise.csv) into one row
per (method, evaluation, checkpoint): mean class accuracy and worst-class accuracy (the
mean of the worst 10% of classes when there are 100 or more), averaged over seeds, with
their spread and a 95% interval over seeds and test images (study.metrics.seeds: t over seeds
combined with Wilson over one seed's test counts; Wilson alone for one seed).
It takes whatever evaluations the runs have (clean, PGD, AutoAttack, Square, ...);
each row's `checkpoint` (best on validation or last) is the table's column of that name
(study.record_names.table_checkpoints); the `published` checkpoint, chosen on the test set, is left
out: figure 13 compares methods under the study's own protocol (study.checkpoints.STUDY_CHECKPOINTS).
Given `baselines` (method -> the method it is compared with, study.config.present_baseline:
TRADES + CFA with the normalized TRADES it is trained in the form of, PGD-AT + CFA with PGD-AT),
each row also carries `compare_with` and its differences `delta_mean`, `delta_worst` from that
method's row of the same evaluation and checkpoint, and the figure draws an arrow from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from study.checkpoints import STUDY_CHECKPOINTS
from study.figures.style import (
    ATTACK_COLORS,
    AUTO,
    CLEAN_COLOR,
    counted_title,
    draw_caveat,
    figure_size,
    figure_style,
    grid_shape,
    hide_unused,
    percent_axis,
    resolve_caveat,
    run_caveat,
    table_recipe,
    with_recipe,
)
from study.figures.trust import split_counted
from study.labels import eval_name, method_name
from study.metrics.seeds import accuracy_seed_interval
from study.metrics.worst import worst_count
from study.record_names import split_record_name, table_checkpoints

TABLE_COLUMNS = ["dataset", "model", "method", "eval", "checkpoint", "n_seeds", "mean", "mean_std", "mean_lo",
                 "mean_hi", "worst", "worst_std", "worst_lo", "worst_hi", "worst_class", "compare_with",
                 "delta_mean", "delta_worst"]
_KEYS = ["dataset", "model", "eval", "checkpoint"]


def _per_run(group: pd.DataFrame) -> pd.Series:
    group = group.sort_values("acc")
    worst = group.head(worst_count(len(group)))
    return pd.Series({
        "mean": group["acc"].mean(), "n": group["n"].sum(),
        "worst": worst["acc"].mean(), "worst_n": worst["n"].sum(),
        "worst_class": ", ".join(worst["class_name"].astype(str)),
    })


def _interval(values: np.ndarray, n: np.ndarray) -> tuple[float, float, float]:
    """Seed spread and 95% interval of the mean of `values`, one per seed, each over n test samples."""
    sd = float(np.std(values, ddof=1)) if len(values) >= 2 else float("nan")
    lo, hi = accuracy_seed_interval(float(values.mean()), sd, len(values), float(n.mean()))
    return sd, float(lo), float(hi)


def _with_baselines(table: pd.DataFrame, baselines: Mapping[str, str | None]) -> pd.DataFrame:
    """`compare_with` and the differences from that method's row (same dataset, model,
    evaluation and checkpoint); NaN where it has none in the table."""
    table = table.assign(compare_with=table["method"].map(lambda m: baselines.get(m)))
    ref = table[[*_KEYS, "method", "mean", "worst"]].rename(
        columns={"method": "compare_with", "mean": "_base_mean", "worst": "_base_worst"})
    merged = table.merge(ref, on=[*_KEYS, "compare_with"], how="left")
    merged["delta_mean"] = merged["mean"] - merged["_base_mean"]
    merged["delta_worst"] = merged["worst"] - merged["_base_worst"]
    return merged.drop(columns=["_base_mean", "_base_worst"])


def mitigation_table(classwise: pd.DataFrame, methods: Sequence[str] | None = None,
                     baselines: Mapping[str, str | None] | None = None) -> pd.DataFrame:
    need = ["run_id", "dataset", "model", "method", "seed", "eval", "class_name", "acc", "n"]
    missing = [c for c in need if c not in classwise.columns]
    if missing:
        raise ValueError(f"class-wise table lacks column(s) {missing}; it has {list(classwise.columns)}")
    rows = classwise if methods is None else classwise[classwise["method"].isin(methods)]
    rows = rows.assign(checkpoint=table_checkpoints(rows))
    rows = rows[rows["checkpoint"].isin(STUDY_CHECKPOINTS)]
    rows = split_counted(rows)[0]  # the trust rule: no flagged evaluation counts (study.figures.trust)
    if rows.empty:
        raise ValueError(f"no rows for methods {list(methods or [])}; the table has "
                         f"{sorted(classwise['method'].unique())}")
    per_run = rows.groupby(["dataset", "model", "method", "run_id", "seed", "eval", "checkpoint"], sort=False).apply(
        _per_run, include_groups=False).reset_index()
    per_run["eval"] = per_run["eval"].map(lambda name: split_record_name(name)[0])
    out = []
    for key, g in per_run.groupby(["dataset", "model", "method", "eval", "checkpoint"], sort=False):
        mean_sd, mean_lo, mean_hi = _interval(g["mean"].to_numpy(), g["n"].to_numpy())
        worst_sd, worst_lo, worst_hi = _interval(g["worst"].to_numpy(), g["worst_n"].to_numpy())
        out.append(dict(zip(["dataset", "model", "method", "eval", "checkpoint"], key, strict=True), n_seeds=len(g),
                        mean=g["mean"].mean(), mean_std=mean_sd, mean_lo=mean_lo, mean_hi=mean_hi,
                        worst=g["worst"].mean(), worst_std=worst_sd, worst_lo=worst_lo, worst_hi=worst_hi,
                        worst_class=g["worst_class"].mode().iloc[0]))
    table = _with_baselines(pd.DataFrame(out, columns=TABLE_COLUMNS[:-3]), baselines or {})[TABLE_COLUMNS]
    if methods is not None:
        order = {m: i for i, m in enumerate(methods)}
        table = table.sort_values(["method", "eval", "checkpoint"], key=lambda s: s.map(order) if s.name == "method"
                                  else s, kind="stable").reset_index(drop=True)
    return table


_MARKERS = "osD^v<>pPX*h"


def _method_styles(methods: list[str]) -> dict[str, dict]:
    """Colour and marker per method: a pair no two methods share, so the legend tells them apart."""
    cmap = mpl.colormaps["tab20" if len(methods) > 10 else "tab10"]
    return {m: {"color": cmap(i % cmap.N), "marker": _MARKERS[i % len(_MARKERS)]} for i, m in enumerate(methods)}


def _draw_point(ax: Axes, row: pd.Series, style: dict, checkpoint: str) -> tuple[float, float, float, float]:
    """One method's point and 95% interval bars; returns the extent it covers (x lo, x hi, y lo, y hi)."""
    x, y = 100 * row["mean"], 100 * row["worst"]
    ax.errorbar(x, y, xerr=[[x - 100 * row["mean_lo"]], [100 * row["mean_hi"] - x]],
                yerr=[[y - 100 * row["worst_lo"]], [100 * row["worst_hi"] - y]], fmt="none", ecolor=style["color"],
                alpha=0.5, lw=0.8, clip_on=False)
    ax.plot(x, y, style["marker"], color=style["color"], ms=7, mew=1.3,
            mfc=style["color"] if checkpoint == "best" else "white", clip_on=False)
    return 100 * row["mean_lo"], 100 * row["mean_hi"], 100 * row["worst_lo"], 100 * row["worst_hi"]


# An arrow stops this many points short of the markers it joins (about a marker's radius), so its
# head is never under a marker; a shorter arrow stops at a quarter of its length.
_ARROW_SHRINK = 6.0
ARROW_STYLE = {"arrowstyle": "-|>", "mutation_scale": 14, "lw": 1.8}


def _draw_comparisons(ax: Axes, part: pd.DataFrame, styles: dict[str, dict]) -> None:
    """An arrow from each method's control (`compare_with`) to the method, same checkpoint, in the
    method's colour, drawn over the markers. Call it once the axis limits are set: the arrow's
    length on the page decides how far it stops short of the markers."""
    if "compare_with" not in part:
        return
    for _, row in part[part["delta_mean"].notna()].iterrows():
        x, y = 100 * row["mean"], 100 * row["worst"]
        start = (x - 100 * row["delta_mean"], y - 100 * row["delta_worst"])
        (x0, y0), (x1, y1) = ax.transData.transform([start, (x, y)])
        length_pt = float(np.hypot(x1 - x0, y1 - y0)) * 72 / ax.figure.dpi
        shrink = min(_ARROW_SHRINK, length_pt / 4)
        ax.annotate("", xy=(x, y), xytext=start, zorder=5, annotation_clip=False,
                    arrowprops={**ARROW_STYLE, "color": styles[row["method"]]["color"], "shrinkA": shrink,
                                "shrinkB": shrink})


def controls(table: pd.DataFrame) -> dict[str, str]:
    """Each method's control (`compare_with`) where the table has its row to compare with."""
    if "compare_with" not in table:
        return {}
    rows = table[table["compare_with"].notna() & table["delta_mean"].notna()]
    return {str(m): str(c) for m, c in zip(rows["method"], rows["compare_with"], strict=True)}


def _percent_limits(ax: Axes, xs: list[float], ys: list[float]) -> None:
    """Axes around the points and their intervals, in percent and within 0-100, at least 10
    points wide: a tighter range would blow up differences smaller than the intervals."""
    for values, axis in ((xs, "x"), (ys, "y")):
        lo, hi = min(values) - 2, max(values) + 2
        if hi - lo < 10:
            mid = (hi + lo) / 2
            lo, hi = mid - 5, mid + 5
        lo, hi = max(0.0, lo), min(100.0, hi)
        label = "mean class accuracy (%)" if axis == "x" else "worst-class accuracy (%)"
        percent_axis(ax, label, axis=axis, lo=lo, hi=max(hi, lo + 10))


def _legends(fig: Figure, styles: dict[str, dict], checkpoints: list[str], left_out: str | None = None,
             control: Mapping[str, str] | None = None) -> None:
    """Beside the panels: one entry per method drawn (filled marker), named with its control
    ("vs PGD-AT") where it has one, then the checkpoints drawn; under its title, what the arrows
    are and the note naming the evaluations the checks flagged (`left_out`)."""
    control = dict(control or {})
    handles = [Line2D([], [], linestyle="none", marker=st["marker"], color=st["color"], ms=6) for st in styles.values()]
    labels = [method_name(m) + (f" (vs {method_name(control[m])})" if m in control else "") for m in styles]
    for ckpt in checkpoints:
        handles.append(Line2D([], [], linestyle="none", marker="o", color="#555555", ms=6,
                              mfc="#555555" if ckpt == "best" else "white"))
        labels.append(f"{'filled' if ckpt == 'best' else 'open'}: {ckpt} checkpoint")
    fig.legend(handles, labels, loc="outside right upper", fontsize=7, frameon=False,
               title="\n".join(filter(None, ["whiskers: 95% interval over seeds\nand test images",
                                             "arrows: from each method's control\n(vs ...) to the method" if control
                                             else None, left_out])),
               title_fontsize=7)


def plot_mitigation(table: pd.DataFrame, title: str | None = None, *, caveat: str | None = AUTO,
                    left_out: str | None = None, recipe: str | None = None) -> Figure:
    """Trade-off scatter: mean vs worst-class accuracy (%), one panel per evaluation (at most three
    per row), one marker per method (filled: best checkpoint, open: last), 95% intervals as bars,
    an arrow from the method each one is compared with (`compare_with`) where the table has it.
    The legend lists the methods and checkpoints drawn, and the title counts the methods drawn
    (a count in `title` is replaced). `caveat` AUTO: a note when every worst class is at 0%.
    `left_out`: the note naming the evaluations the checks flagged, which mitigation_table leaves
    out (study.figures.trust.left_out_note), drawn in the legend. Each method with a control is named
    with it in the legend ("vs PGD-AT"), and its arrows run from the control to it. `recipe`: the
    title's second line (style.reduced_recipe of the runs drawn)."""
    if table.empty:
        raise ValueError("mitigation table is empty; nothing to plot")
    evals = list(dict.fromkeys(table["eval"]))
    styles = _method_styles(list(dict.fromkeys(table["method"])))
    checkpoints = [c for c in ("best", "last") if (table["checkpoint"] == c).any()]
    note = resolve_caveat(caveat, lambda: run_caveat(worst=table["worst"].to_numpy()))
    rows, cols = grid_shape(len(evals), 3)
    with figure_style():
        fig = Figure(figsize=figure_size(4.4 * cols + 3.0, max(4.0 * rows, 0.17 * len(styles) + 1.8)),
                     layout="constrained")
        axes = np.asarray(fig.subplots(rows, cols, squeeze=False)).ravel()
        for ax, ev in zip(axes, evals, strict=False):
            part = table[table["eval"] == ev]
            extents = [_draw_point(ax, r, styles[r["method"]], r["checkpoint"]) for _, r in part.iterrows()]
            _percent_limits(ax, [v for e in extents for v in e[:2]], [v for e in extents for v in e[2:]])
            _draw_comparisons(ax, part, styles)
            shown = part["method"].nunique()
            ax.set_title(f"{eval_name(ev)} · {shown} method{'' if shown == 1 else 's'}",
                         color=CLEAN_COLOR if ev == "clean" else ATTACK_COLORS[0])
            ax.grid(alpha=0.3)
            draw_caveat(ax, note)
        hide_unused(axes, len(evals))
        _legends(fig, styles, checkpoints, left_out, controls(table))
        # the legend takes the top right corner: the centred title keeps clear of it on both sides
        fig.suptitle(with_recipe(counted_title(title, len(styles), "method"), recipe, fig.get_figwidth() - 6.0))
    return fig


_POLICY_COLUMNS = [("epsilon", "epsilon / base epsilon"), ("weight", "class weight"),
                   ("weight_boundary", "boundary-loss weight"), ("beta", "TRADES beta")]


def _varying(rows: pd.DataFrame, col: str) -> bool:
    return col in rows and rows[col].notna().any() and bool(rows.groupby("epoch")[col].std().fillna(0).gt(1e-9).any())


def _policy_panels(epochs: pd.DataFrame, methods: Sequence[str]) -> list[tuple[str, str, pd.DataFrame]]:
    panels = []
    for m in methods:
        rows = epochs[epochs["method"] == m]
        col = next((c for c, _ in _POLICY_COLUMNS if not rows.empty and _varying(rows, c)), None)
        if col is not None:
            panels.append((m, col, rows))
    return panels


def _policy_panel(ax: Axes, method: str, col: str, rows: pd.DataFrame) -> None:
    mean = rows.groupby(["epoch", "class", "class_name"], as_index=False)[col].mean()
    if col == "epsilon":
        base = mean[mean["epoch"] == mean["epoch"].min()][col].median()
        mean[col] = mean[col] / base if base > 0 else mean[col]
    for (_, name), g in mean.groupby(["class", "class_name"]):
        ax.plot(g["epoch"], g[col], lw=1, label=str(name))
    ax.set_title(method_name(method), fontsize=8)
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(dict(_POLICY_COLUMNS)[col], fontsize=7)
    ax.grid(alpha=0.3)


def plot_policy_epochs(epochs: pd.DataFrame, methods: Sequence[str], title: str | None = None, *,
                       caveat: str | None = AUTO, recipe: str | None = AUTO) -> Figure:
    """Per method whose class-wise policy state varies, that state (the first varying of
    epsilon relative to the base, class weight, boundary weight, beta) against epoch, one
    line per class (mean over seeds), at most four panels per row. The title counts the methods
    drawn. `caveat` AUTO: a note when the runs have fewer than style.MIN_EPOCHS epochs. `recipe`: the
    title's last line (AUTO: style.table_recipe of the runs of `methods`)."""
    if "epoch" not in epochs.columns or epochs.empty:
        raise ValueError("epoch table is empty or lacks `epoch`; nothing to plot")
    # both notes describe the runs of `methods` alone: the table may hold others of the same dataset
    # and model (runs on constructed data, longer or shorter)
    drawn = epochs[epochs["method"].isin(methods)]
    recipe = resolve_caveat(recipe, lambda: table_recipe(drawn))
    panels = _policy_panels(epochs, methods)
    note = resolve_caveat(caveat, lambda: run_caveat(epochs=float(drawn["epoch"].max())) if not drawn.empty else None)
    with figure_style():
        if not panels:
            fig = Figure(figsize=(6, 2), layout="constrained")
            ax = fig.subplots()
            ax.axis("off")
            ax.text(0.5, 0.5, "no method's class-wise policy state varies over the epochs", ha="center")
            fig.suptitle(with_recipe(counted_title(title, 0, "method"), recipe, fig.get_figwidth()))
            return fig
        rows, cols = grid_shape(len(panels), 4)
        fig = Figure(figsize=figure_size(3.6 * cols, 2.8 * rows + 1.0), layout="constrained")
        axes = np.asarray(fig.subplots(rows, cols, squeeze=False)).ravel()
        hide_unused(axes, len(panels))
        for ax, (m, col, rows_m) in zip(axes, panels, strict=False):
            _policy_panel(ax, m, col, rows_m)
            draw_caveat(ax, note)
        handles, labels = axes[0].get_legend_handles_labels()
        if len(labels) <= 20:
            fig.legend(handles, labels, loc="outside lower center", ncol=min(10, len(labels)), fontsize=6,
                       frameon=False, title="class", title_fontsize=7)
        heading = counted_title(title, len(panels), "method")
        fig.suptitle(with_recipe(f"{heading}\nclass-wise policy state of the {len(panels)} of {len(methods)} "
                                 "methods whose state varies between classes", recipe, fig.get_figwidth()), fontsize=10)
    return fig
