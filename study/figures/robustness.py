"""Robustness figures: class x corruption heatmap (STUDY.md figure 14), class false-positive
scores (figure 11) and class-wise standard and robust error (figure 3)."""

from __future__ import annotations

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from study.figures.style import RC, class_palette, pretty_method
from study.metrics.seeds import seed_summary


def _pooled(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
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


def plot_corruptions(rows: pd.DataFrame, title: str) -> Figure:
    """Left: class x corruption accuracy (pooled over the severities shown). Right: the
    worst class's accuracy per corruption, with its 95% Wilson interval, and clean-free
    mean over classes for reference."""
    classes = rows.drop_duplicates("class").sort_values("class")["class_name"].tolist()
    corruptions = list(dict.fromkeys(rows["corruption"]))
    pooled = _pooled(rows, ["corruption", "class", "class_name"])
    grid = pooled.pivot(index="class_name", columns="corruption", values="acc").loc[classes, corruptions]
    with mpl.rc_context(RC):
        fig = Figure(figsize=(4 + 0.55 * len(corruptions) * 2, 1.2 + 0.35 * len(classes)), layout="constrained")
        ax, ax2 = fig.subplots(1, 2, width_ratios=[1.3, 1])
        im = ax.imshow(grid.to_numpy(), cmap="viridis", vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(corruptions)), [c.replace("_", " ") for c in corruptions], rotation=45, ha="right")
        ax.set_yticks(range(len(classes)), classes)
        ax.grid(False)
        for (i, j), v in np.ndenumerate(grid.to_numpy()):
            ax.text(j, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=7, color="w" if v < 0.6 else "k")
        fig.colorbar(im, ax=ax, label="class accuracy")
        ax.set_title("accuracy per class (%)")
        worst = pooled.loc[pooled.groupby("corruption", sort=False)["acc"].idxmin()].set_index("corruption")
        worst = worst.loc[corruptions]
        mean = grid.mean(axis=0)
        xs = np.arange(len(corruptions))
        ax2.errorbar(xs, worst["acc"], yerr=[worst["acc"] - worst["ci_lo"], worst["ci_hi"] - worst["acc"]],
                     fmt="o", color="#C44E52", capsize=3, label="worst class (95% CI)")
        ax2.plot(xs, mean.to_numpy(), "s", color="#4C72B0", label="mean over classes")
        for x, (_, r) in zip(xs, worst.iterrows(), strict=True):
            ax2.annotate(r["class_name"], (x, r["acc"]), textcoords="offset points", xytext=(4, -10), fontsize=7)
        ax2.set_xticks(xs, [c.replace("_", " ") for c in corruptions], rotation=45, ha="right")
        ax2.set_ylim(0, 1)
        ax2.set_ylabel("accuracy")
        ax2.set_title("worst class per corruption")
        ax2.legend(loc="lower left")
        sev = sorted(int(s) for s in rows["severity"].unique())
        fig.suptitle(f"{title}\nCIFAR-10-C ({rows['corruption_variant'].iloc[0]}), severities {sev}")
    return fig


def plot_cfp(table: pd.DataFrame, title: str) -> Figure:
    """Class false-positive score per class and evaluation (share of misclassified samples
    predicted as that class), mean over the runs (seeds) in `table`, with 95% intervals over
    seeds and misclassified samples (Wilson for one run)."""
    table = cfp_over_seeds(table)
    evals = list(dict.fromkeys(table["eval"]))
    classes = table.drop_duplicates("class").sort_values("class")["class_name"].tolist()
    with mpl.rc_context(RC):
        fig = Figure(figsize=(1.5 + 0.7 * len(classes), 3.4), layout="constrained")
        ax = fig.subplots()
        width = 0.8 / len(evals)
        for k, ev in enumerate(evals):
            r = table[table["eval"] == ev].sort_values("class")
            xs = np.arange(len(r)) + (k - (len(evals) - 1) / 2) * width
            ax.bar(xs, r["cfp"], width, yerr=[r["cfp"] - r["ci_lo"], r["ci_hi"] - r["cfp"]], capsize=2,
                   label=ev, color=class_palette(max(10, len(evals)))[k + 1])
        ax.axhline(1 / len(classes), color="k", lw=0.8, ls="--", label="uniform")
        ax.set_xticks(range(len(classes)), classes, rotation=30, ha="right")
        ax.set_ylabel("class false-positive score")
        ax.legend()
        fig.suptitle(title)
    return fig


def plot_frl_errors(table: pd.DataFrame, title: str) -> Figure:
    """Standard error (1 - a_c) and robust error (1 - r_c) per class, one panel per method."""
    methods = list(dict.fromkeys(table["method"]))
    classes = table.drop_duplicates("class").sort_values("class")["class_name"].tolist()
    with mpl.rc_context(RC):
        fig = Figure(figsize=(1.5 + 3.6 * len(methods), 3.4), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(methods), sharey=True))
        for ax, method in zip(axes, methods, strict=True):
            r = table[table["method"] == method].groupby(["class", "class_name"], sort=True)[
                ["standard_error", "robust_error"]].mean().reset_index()
            xs = np.arange(len(r))
            ax.bar(xs - 0.2, r["standard_error"], 0.4, label="standard error", color="#4C72B0")
            ax.bar(xs + 0.2, r["robust_error"], 0.4, label="robust error", color="#C44E52")
            ax.set_xticks(xs, classes, rotation=30, ha="right")
            ax.set_title(pretty_method(method))
            ax.set_ylim(0, 1)
        axes[0].set_ylabel("error")
        axes[0].legend()
        fig.suptitle(title)
    return fig
