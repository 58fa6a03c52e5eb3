"""Bar charts of class accuracy and class robustness (the study's figures 1 and 2)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from study.figures.style import (
    AUTO,
    MAX_INCHES,
    SEED_DOT_COLOR,
    display_title,
    draw_caveat,
    eval_colors,
    figure_size,
    figure_style,
    norm_groups,
    percent_axis,
    resolve_caveat,
    run_title,
    table_caveat,
    table_recipe,
    with_recipe,
)
from study.figures.trust import HATCH_NOTE, counted_or_marked, flagged_label, left_out_note, marked_bar_style
from study.labels import eval_label, eval_name, norm_title
from study.metrics.classwise import seed_aggregate

# Identifiers that must be constant in one figure: bars of two models side by side
# would silently average or overwrite each other.
_SINGLE_VALUED = ("dataset", "data_variant", "model", "method")
# Above this many classes every name no longer fits under its bars.
_MAX_LABELLED_CLASSES = 30
#: the hatch of a bar measured on a subset of the test images the other bars of its figure stand on
SUBSET_HATCH = "...."


def images_per_class(table: pd.DataFrame, name: str) -> tuple[int, int] | None:
    """(fewest, most) test images per class an evaluation was scored on, per seed (a seed-aggregated
    table's `n` is summed over its `n_seeds`); None where the table has no `n`."""
    rows = table[table["eval"].astype(str) == name]
    if "n" not in rows.columns or rows.empty:
        return None
    per_seed = rows["n"] / rows["n_seeds"] if "n_seeds" in rows.columns else rows["n"]
    return int(per_seed.min()), int(per_seed.max())


def subset_evaluations(table: pd.DataFrame, evals: list[str]) -> tuple[dict[str, tuple[int, int]], int | None]:
    """The evaluations scored on fewer test images per class than the most any evaluation of the
    figure has (AutoAttack on 10 per class beside clean on 100), with their (fewest, most), and
    that most. Their bars stand on other, fewer images: a class can look more robust than it is
    accurate. They are drawn marked (pale, dotted) and their n is named, never at the full set's weight."""
    sizes = {e: images_per_class(table, e) for e in evals}
    known = {e: n for e, n in sizes.items() if n is not None}
    if not known:
        return {}, None
    full = max(n[1] for n in known.values())
    return {e: n for e, n in known.items() if n[1] < full}, full


def subset_bar_style(color: str) -> dict[str, Any]:
    """The bar of an evaluation on a subset of the test images: pale, dotted, outlined in its colour."""
    return {"facecolor": to_rgba(color, 0.35), "edgecolor": color, "hatch": SUBSET_HATCH, "linewidth": 0.8}


def _per_class(n: tuple[int, int]) -> str:
    return f"n = {n[0]:,} per class" if n[0] == n[1] else f"n = {n[0]:,}-{n[1]:,} per class"


def _ordered_evals(values: pd.Series) -> list[str]:
    seen = list(dict.fromkeys(values.astype(str)))
    return sorted(seen, key=lambda e: e != "clean")  # clean first, attacks as given


def _check_single_run_group(table: pd.DataFrame) -> None:
    mixed = {c: sorted(map(str, table[c].unique())) for c in _SINGLE_VALUED
             if c in table.columns and table[c].nunique(dropna=False) > 1}
    if mixed:
        raise ValueError(f"plot one model at a time; the table mixes {mixed}")


def _default_title(table: pd.DataFrame) -> str:
    ids = {c: str(table[c].iloc[0]) for c in ("dataset", "model", "method") if c in table.columns}
    return run_title(**ids) or "class-wise accuracy"


def _per_seed_centered(seeds: pd.DataFrame) -> pd.Series:
    if "acc_centered" in seeds.columns:
        return seeds["acc_centered"]
    keys = ["eval", "seed"] if "seed" in seeds.columns else ["eval"]
    return seeds["acc"] - seeds.groupby(keys, dropna=False)["acc"].transform("mean")


def _eval_name(key: tuple) -> str:
    return eval_name(str(key[0]))


def _aggregated_trust(table: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """A seed-aggregated table's flagged seeds (classwise_seeds.csv: `flagged_seeds`, acc empty
    where every seed was flagged): such evaluations are left out, and the note names them."""
    if "flagged_seeds" not in table.columns:
        return table, {"marked": [], "note": None}
    flagged = table[table["flagged_seeds"].fillna(0) > 0]
    counts = flagged.groupby("eval", sort=False)["flagged_seeds"].max().astype(int).to_dict()
    empty = [e for e, rows in flagged.groupby("eval", sort=False) if rows["acc"].isna().all()]
    note = left_out_note(flagged.drop_duplicates("eval"), ["eval"], lambda k: "{} ({} seed{}{})".format(
        eval_name(str(k[0])), counts[k[0]], "s" if counts[k[0]] > 1 else "", ", all" if k[0] in empty else ""))
    return table[~table["eval"].isin(empty)], {"marked": [], "note": note}


def _prepare(table: pd.DataFrame, seeds: pd.DataFrame | None) -> tuple[pd.DataFrame, pd.DataFrame | None, dict]:
    """The seed-aggregated table (aggregated here from a per-seed one) and the seeds to dot, checked,
    under the trust rule (study.figures.trust): per evaluation its counted seeds, the measured ones
    of an evaluation with none (`marked`), and a note naming the seeds left out."""
    if "n_seeds" not in table.columns and "seed" in table.columns:
        table, marked, left = counted_or_marked(table)
        trust = {"marked": marked, "note": left_out_note(left, ["eval"], _eval_name)}
        seeds = table if seeds is None else seeds
        keep = [c for c in _SINGLE_VALUED if c in table.columns]
        table = seed_aggregate(table, by=[*keep, "eval"])
    else:
        table, trust = _aggregated_trust(table)
    if seeds is not None:
        seeds = counted_or_marked(seeds)[0]
    required = ("eval", "class", "class_name", "acc", "ci_lo", "ci_hi")
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise ValueError(f"class table lacks column(s) {missing}; it has {list(table.columns)}")
    if table.empty:
        raise ValueError("class table is empty; nothing to plot")
    _check_single_run_group(table)
    if table.duplicated(subset=["eval", "class"]).any():
        raise ValueError("class table has several rows per (eval, class); aggregate seeds first")
    table = table.copy()
    if "acc_centered" not in table.columns:
        table["acc_centered"] = table["acc"] - table.groupby("eval")["acc"].transform("mean")
    if not (seeds is not None and "seed" in seeds.columns and seeds["seed"].nunique() > 1):
        return table, None, trust
    lacking = [c for c in ("eval", "class", "acc") if c not in seeds.columns]
    if lacking:
        raise ValueError(f"seeds table lacks column(s) {lacking}; it has {list(seeds.columns)}")
    return table, seeds, trust


def _draw_eval(top: Axes, bottom: Axes, rows: pd.DataFrame, x: np.ndarray, style: dict) -> None:
    """One evaluation's bars with their 95% intervals: accuracy on top, mean-subtracted below."""
    acc = rows["acc"].to_numpy(dtype=float) * 100
    centred = rows["acc_centered"].to_numpy(dtype=float) * 100
    lo = rows["ci_lo"].to_numpy(dtype=float) * 100
    hi = rows["ci_hi"].to_numpy(dtype=float) * 100
    # Tables written before the intervals respected seeds (pooled Wilson) can have the
    # mean over seeds a hair outside its interval; clip so error-bar lengths stay >= 0.
    err = np.vstack([np.clip(acc - lo, 0, None), np.clip(hi - acc, 0, None)])
    # keyword arguments of matplotlib's bar, errorbar and scatter (each its own mix of types)
    bar_style: dict[str, Any] = {"width": style["width"], "color": style["color"], "linewidth": 0}
    if style["subset"]:  # on fewer test images than the other bars
        bar_style = {"width": style["width"], **subset_bar_style(style["color"])}
    if style["marked"]:  # a flagged evaluation's measured value: hatched, an upper bound
        bar_style = {"width": style["width"], **marked_bar_style(style["color"])}
    err_style: dict[str, Any] = {"fmt": "none", "ecolor": "black", "elinewidth": 0.8,
                                 "capsize": 0 if style["many"] else 2}
    top.bar(x, acc, label=style["label"], **bar_style)
    top.errorbar(x, acc, yerr=err, **err_style)
    bottom.bar(x, centred, **bar_style)
    bottom.errorbar(x, centred, yerr=err, **err_style)


def _draw_seed_dots(top: Axes, bottom: Axes, per_seed: pd.DataFrame, x: np.ndarray, many: bool) -> None:
    dot: dict[str, Any] = {"s": 6 if many else 9, "color": SEED_DOT_COLOR, "zorder": 3, "linewidths": 0}
    top.scatter(x, per_seed["acc"].to_numpy(dtype=float) * 100, **dot)
    bottom.scatter(x, _per_seed_centered(per_seed).to_numpy(dtype=float) * 100, **dot)


def _format_class_axis(bottom: Axes, names: list[str]) -> None:
    num_classes = len(names)
    many = num_classes > _MAX_LABELLED_CLASSES
    step = max(1, math.ceil(num_classes / _MAX_LABELLED_CLASSES)) if many else 1
    ticks = np.arange(0, num_classes, step)
    bottom.set_xticks(ticks, [names[i] for i in ticks])
    if many:
        bottom.tick_params(axis="x", labelrotation=90, labelsize=7)
    elif num_classes * max(len(n) for n in names) > 70:
        bottom.tick_params(axis="x", labelrotation=45)
        for label in bottom.get_xticklabels():
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")
    bottom.set_xlim(-0.6, num_classes - 0.4)


def _note(table: pd.DataFrame, show_seeds: bool, trust: dict, subset: dict, full: int | None) -> str:
    n_seeds = int(table["n_seeds"].max()) if "n_seeds" in table.columns else 1
    if n_seeds <= 1:
        note = "whiskers: 95% Wilson interval over test images"
    else:
        note = "bars: mean over {} seeds{}; whiskers: 95% interval over seeds and test images{}".format(
            n_seeds, " (fewer where one was left out)" if trust["note"] else "", "; dots: single seeds" if show_seeds
            else "")
    subset_note = (f"pale, dotted: a subset of the test images (its n in the label); the other bars n = {full:,} "
                   "per class, so not the same images" if subset else None)
    return "\n".join([note, *([subset_note] if subset_note else []), *([HATCH_NOTE] if trust["marked"] else []),
                      *([trust["note"]] if trust["note"] else [])])


def _draw_group(top: Axes, bottom: Axes, table: pd.DataFrame, seeds: pd.DataFrame | None, evals: list[str],
                context: dict) -> None:
    """The panels of one threat model: clean and that model's attacks side by side per class."""
    position, many, width = context["position"], context["many"], 0.8 / len(evals)
    for j, name in enumerate(evals):
        offset = (j - (len(evals) - 1) / 2) * width
        rows = table[table["eval"].astype(str) == name].set_index("class")
        label, marked = eval_label(name, context["settings"].get(name)), name in context["marked"]
        subset = context["subset"].get(name)
        if subset is not None:
            label = f"{label} · subset: {_per_class(subset)}"
        style = {"width": width, "color": context["colors"][name], "many": many, "marked": marked,
                 "subset": subset is not None, "label": flagged_label(label) if marked else label}
        _draw_eval(top, bottom, rows, position[rows.index].to_numpy() + offset, style)
        if seeds is not None:
            per_seed = seeds[seeds["eval"].astype(str) == name]
            _draw_seed_dots(top, bottom, per_seed, position[per_seed["class"]].to_numpy() + offset, many)
    percent_axis(top, "accuracy (%)")
    bottom.axhline(0, color="black", linewidth=0.8)
    bottom.set_ylabel("accuracy − class mean\n(percentage points)")
    bottom.set_title("mean-subtracted: each evaluation's mean over classes removed", loc="left", fontsize=9)
    _format_class_axis(bottom, context["names"])
    if context["heading"]:
        top.set_title(context["heading"], loc="left", fontweight="bold")
    draw_caveat(top, context["caveat"])


def plot_classwise(
    table: pd.DataFrame, title: str | None = None, seeds: pd.DataFrame | None = None, *,
    eval_settings: Mapping[str, Mapping] | None = None, caveat: str | None = AUTO, recipe: str | None = AUTO,
) -> Figure:
    """Grouped bars of accuracy per class, one bar per evaluation, for one model.

    `table` is seed_aggregate output with at least eval, class, class_name, acc,
    ci_lo, ci_hi (acc_centered and n_seeds used when present). A per-seed class-wise
    table (with `seed` and no `n_seeds`) is accepted too and aggregated here over
    seeds per evaluation; its rows then also serve as `seeds`. `seeds`, when given
    and holding more than one seed, adds each seed's value as a small dot.
    Top panel: accuracy (%) with 95% intervals over seeds and test images (Wilson for one
    seed). Bottom panel: accuracy minus its mean over classes, same intervals shifted by
    that mean. L-inf and L2 attacks get panels of their own (clean in each), beside each
    other, or stacked for many classes. `eval_settings` (evaluation -> its settings) names the
    budgets; `caveat` is drawn on the top panels (AUTO: decided from the table, style.table_caveat).
    The title defaults to dataset | model | method from the table; `recipe` is its second line (AUTO:
    style.table_recipe, a note where the runs' epochs and training images are fewer than the published
    recipe's). An evaluation scored on fewer test images per class than another of the figure (`n`:
    AutoAttack on a subset) is drawn pale and dotted, its n in its legend label (subset_evaluations).
    The trust rule (study.figures.trust): an evaluation's seeds that the checks flagged
    (`check_status` flag or fail) are left out of its bars and named under the legend; an
    evaluation flagged on every seed is drawn from its measured values, hatched, its legend label
    saying "flagged by checks" (the value is an upper bound). A seed-aggregated table's
    `flagged_seeds` are named the same way; its evaluations with no counted seed are left out.
    """
    # Decided on the table as given: aggregating seeds drops the run columns (epochs) it reads.
    note = resolve_caveat(caveat, lambda: table_caveat(table))
    recipe = resolve_caveat(recipe, lambda: table_recipe(table))
    table, seeds, trust = _prepare(table, seeds)
    settings = dict(eval_settings or {})
    evals = _ordered_evals(table["eval"])
    groups = norm_groups(evals, settings)
    subset, full = subset_evaluations(table, evals)
    classes = (table[["class", "class_name"]].drop_duplicates("class")
               .sort_values("class").reset_index(drop=True))
    num_classes = len(classes)
    many = num_classes > _MAX_LABELLED_CLASSES
    context = {"position": pd.Series(np.arange(num_classes), index=classes["class"]), "many": many,
               "colors": eval_colors(evals), "settings": settings,
               "note": _note(table, seeds is not None, trust, subset, full),
               "marked": trust["marked"], "subset": subset,
               "names": classes["class_name"].astype(str).tolist(),
               "caveat": note}
    # each threat model's panel as wide as its bars need, and never too narrow for the class names
    widths = [float(np.clip(1.5 + 0.32 * num_classes * max(1.0, len(group) / 2), 0.55 * num_classes + 1.5, MAX_INCHES))
              for _, group in groups]
    stacked = many or len(groups) == 1
    shape = (2 * len(groups), 1) if stacked else (2, len(groups))
    ratios = None if stacked else widths
    size = (max(7.0, *widths), 6.5 * len(groups)) if stacked else (sum(widths), 6.5)
    with figure_style():
        fig = Figure(figsize=figure_size(*size), layout="constrained")
        axes = np.asarray(fig.subplots(*shape, sharex="col", squeeze=False, width_ratios=ratios))
        for k, (norm, group) in enumerate(groups):
            top, bottom = (axes[2 * k, 0], axes[2 * k + 1, 0]) if stacked else (axes[0, k], axes[1, k])
            context["heading"] = norm_title(norm) if len(groups) > 1 else ""
            _draw_group(top, bottom, table, seeds, group, context)
        # One legend for the figure, below the panels and outside the data: an evaluation keeps its
        # colour in every panel.
        handles = {h.get_label(): h for ax in axes[0 if not stacked else slice(None, None, 2), :].ravel()
                   for h in ax.get_legend_handles_labels()[0]}
        fig.legend(list(handles.values()), list(handles), loc="outside lower center",
                   ncols=legend_columns(list(handles), fig.get_figwidth()), frameon=False, title=context["note"],
                   title_fontsize=8)
        fig.suptitle(with_recipe(display_title(title) if title is not None else _default_title(table), recipe,
                                 fig.get_figwidth()))
    return fig


def legend_columns(labels: list[str], width_in: float, at_most: int = 5) -> int:
    """As many legend columns as fit the figure's width (a legend wider than the figure is cut
    off at its edges): about 11 characters of legend text an inch, each entry with its marker."""
    columns = min(len(labels), at_most)
    while columns > 1 and max(sum(len(label) + 6 for label in labels[i:i + columns])
                              for i in range(0, len(labels), columns)) > 11 * width_in:
        columns -= 1
    return max(columns, 1)
