"""Bar charts of class accuracy and class robustness (the study's figures 1 and 2)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from study.figures.style import (
    SEED_DOT_COLOR,
    eval_colors,
    eval_label,
    figure_style,
    run_title,
)
from study.metrics.classwise import seed_aggregate

# Identifiers that must be constant in one figure: bars of two models side by side
# would silently average or overwrite each other.
_SINGLE_VALUED = ("dataset", "data_variant", "model", "method")
# Above this many classes every name no longer fits under its bars.
_MAX_LABELLED_CLASSES = 30


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


def plot_classwise(
    table: pd.DataFrame, title: str | None = None, seeds: pd.DataFrame | None = None
) -> Figure:
    """Grouped bars of accuracy per class, one bar per evaluation, for one model.

    `table` is seed_aggregate output with at least eval, class, class_name, acc,
    ci_lo, ci_hi (acc_centered and n_seeds used when present). A per-seed class-wise
    table (with `seed` and no `n_seeds`) is accepted too and aggregated here over
    seeds per evaluation; its rows then also serve as `seeds`. `seeds`, when given
    and holding more than one seed, adds each seed's value as a small dot.
    Top panel: accuracy (%) with 95% intervals over seeds and test images (Wilson for one
    seed). Bottom panel: accuracy minus its mean over classes, same intervals shifted by
    that mean.
    The title defaults to dataset | model | method from the table.
    """
    if "n_seeds" not in table.columns and "seed" in table.columns:
        seeds = table if seeds is None else seeds
        keep = [c for c in _SINGLE_VALUED if c in table.columns]
        table = seed_aggregate(table, by=[*keep, "eval"])
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
    evals = _ordered_evals(table["eval"])
    colors = eval_colors(evals)
    classes = (table[["class", "class_name"]].drop_duplicates("class")
               .sort_values("class").reset_index(drop=True))
    num_classes = len(classes)
    position = pd.Series(np.arange(num_classes), index=classes["class"])
    show_seeds = seeds is not None and "seed" in seeds.columns and seeds["seed"].nunique() > 1
    if show_seeds:
        lacking = [c for c in ("eval", "class", "acc") if c not in seeds.columns]
        if lacking:
            raise ValueError(f"seeds table lacks column(s) {lacking}; it has {list(seeds.columns)}")

    many = num_classes > _MAX_LABELLED_CLASSES
    width_in = float(np.clip(1.5 + 0.32 * num_classes * max(1.0, len(evals) / 2), 7.0, 20.0))
    bar_width = 0.8 / len(evals)
    with figure_style():
        fig = Figure(figsize=(width_in, 6.5), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True)
        for j, name in enumerate(evals):
            rows = table[table["eval"].astype(str) == name].set_index("class")
            x = position[rows.index].to_numpy() + (j - (len(evals) - 1) / 2) * bar_width
            acc = rows["acc"].to_numpy(dtype=float) * 100
            centred = rows["acc_centered"].to_numpy(dtype=float) * 100
            lo = rows["ci_lo"].to_numpy(dtype=float) * 100
            hi = rows["ci_hi"].to_numpy(dtype=float) * 100
            # Tables written before the intervals respected seeds (pooled Wilson) can have the
            # mean over seeds a hair outside its interval; clip so error-bar lengths stay >= 0.
            err = np.vstack([np.clip(acc - lo, 0, None), np.clip(hi - acc, 0, None)])
            bar_style = {"width": bar_width, "color": colors[name], "linewidth": 0}
            err_style = {"fmt": "none", "ecolor": "black", "elinewidth": 0.8,
                         "capsize": 0 if many else 2}
            top.bar(x, acc, label=eval_label(name), **bar_style)
            top.errorbar(x, acc, yerr=err, **err_style)
            bottom.bar(x, centred, **bar_style)
            bottom.errorbar(x, centred, yerr=err, **err_style)

            if show_seeds:
                per_seed = seeds[seeds["eval"].astype(str) == name]
                sx = position[per_seed["class"]].to_numpy() + (
                    j - (len(evals) - 1) / 2) * bar_width
                dot = {"s": 6 if many else 9, "color": SEED_DOT_COLOR, "zorder": 3,
                       "linewidths": 0}
                top.scatter(sx, per_seed["acc"].to_numpy(dtype=float) * 100, **dot)
                bottom.scatter(sx, _per_seed_centered(per_seed).to_numpy(dtype=float) * 100,
                               **dot)

        top.set_ylim(0, 100)
        top.set_ylabel("accuracy (%)")
        bottom.axhline(0, color="black", linewidth=0.8)
        bottom.set_ylabel("accuracy − class mean\n(percentage points)")
        bottom.set_title("mean-subtracted: each evaluation's mean over classes removed",
                         loc="left")

        names = classes["class_name"].astype(str).tolist()
        step = max(1, math.ceil(num_classes / _MAX_LABELLED_CLASSES)) if many else 1
        ticks = np.arange(0, num_classes, step)
        bottom.set_xticks(ticks, [names[i] for i in ticks])
        longest = max(len(n) for n in names)
        if many:
            bottom.tick_params(axis="x", labelrotation=90, labelsize=7)
        elif num_classes * longest > 70:
            bottom.tick_params(axis="x", labelrotation=45)
            for label in bottom.get_xticklabels():
                label.set_horizontalalignment("right")
                label.set_rotation_mode("anchor")
        bottom.set_xlim(-0.6, num_classes - 0.4)

        n_seeds = int(table["n_seeds"].max()) if "n_seeds" in table.columns else 1
        note = "bars: mean over {} seeds; whiskers: 95% interval over seeds and test images{}".format(
            n_seeds, "; dots: single seeds" if show_seeds else "") if n_seeds > 1 else (
            "whiskers: 95% Wilson interval")
        # Anchored above the top panel (not a figure legend) so constrained layout
        # keeps it clear of the suptitle.
        top.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=len(evals),
                   frameon=False, title=note, title_fontsize=8)
        fig.suptitle(title if title is not None else _default_title(table))
    return fig
