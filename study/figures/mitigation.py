"""Figure 13: mitigation methods under one protocol, and how their policies adapt.

`mitigation_table` turns the class-wise table (results/tables/classwise.csv) into one row
per (method, evaluation, checkpoint): mean class accuracy and worst-class accuracy (the
mean of the worst 10% of classes when there are 100 or more), averaged over seeds, with
their spread and a 95% interval over seeds and test images (study.metrics.seeds: t over seeds
combined with Wilson over one seed's test counts; Wilson alone for one seed).
It takes whatever evaluations the runs have (clean, PGD, AutoAttack, Square, ...);
`<evaluation>@best` records are the best-on-validation checkpoint, the others the last.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from study.figures.style import ATTACK_COLORS, CLEAN_COLOR, figure_style, pretty_eval, pretty_method
from study.metrics.seeds import accuracy_seed_interval
from study.metrics.worst import worst_count

_TOKENS = {"at": "PGD-AT", "pgd": "PGD", "trades": "TRADES", "fat": "FAT", "cfa": "CFA", "fairtat": "FAIR-TAT",
           "ema": "EMA", "fawa": "FAWA", "frl": "FRL", "reweight": "reweight", "remargin": "remargin"}
_NAMED = {"cw_equal": "Cost-sensitive (equal)", "cw_critical": "Cost-sensitive (critical class)",
          "tat_weakest": "Targeted AT (weakest class)", "cosine_penalty": "Cosine penalty", "at": "PGD-AT"}
TABLE_COLUMNS = ["dataset", "model", "method", "eval", "checkpoint", "n_seeds", "mean", "mean_std", "mean_lo",
                 "mean_hi", "worst", "worst_std", "worst_lo", "worst_hi", "worst_class"]


def pretty_mitigation(name: str) -> str:
    """'trades_cfa_fawa' -> 'TRADES + CFA + FAWA'."""
    if name in _NAMED:
        return _NAMED[name]
    if pretty_method(name) != name:
        return pretty_method(name)
    name = name.replace("pgd_at", "at")
    if name.startswith("frl_"):
        return "FRL (" + " + ".join(name.split("_")[1:]) + ")"
    return " + ".join(_TOKENS.get(t, t) for t in name.split("_"))


def split_eval(name: str) -> tuple[str, str]:
    """'pgd20@best' -> ('pgd20', 'best'); 'pgd20' -> ('pgd20', 'last')."""
    base, _, checkpoint = str(name).partition("@")
    return base, checkpoint or "last"


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


def mitigation_table(classwise: pd.DataFrame, methods: Sequence[str] | None = None) -> pd.DataFrame:
    need = ["run_id", "dataset", "model", "method", "seed", "eval", "class_name", "acc", "n"]
    missing = [c for c in need if c not in classwise.columns]
    if missing:
        raise ValueError(f"class-wise table lacks column(s) {missing}; it has {list(classwise.columns)}")
    rows = classwise if methods is None else classwise[classwise["method"].isin(methods)]
    if rows.empty:
        raise ValueError(f"no rows for methods {list(methods or [])}; the table has "
                         f"{sorted(classwise['method'].unique())}")
    per_run = rows.groupby(["dataset", "model", "method", "run_id", "seed", "eval"], sort=False).apply(
        _per_run, include_groups=False).reset_index()
    per_run[["eval", "checkpoint"]] = per_run["eval"].map(split_eval).tolist()
    out = []
    for key, g in per_run.groupby(["dataset", "model", "method", "eval", "checkpoint"], sort=False):
        mean_sd, mean_lo, mean_hi = _interval(g["mean"].to_numpy(), g["n"].to_numpy())
        worst_sd, worst_lo, worst_hi = _interval(g["worst"].to_numpy(), g["worst_n"].to_numpy())
        out.append(dict(zip(["dataset", "model", "method", "eval", "checkpoint"], key, strict=True), n_seeds=len(g),
                        mean=g["mean"].mean(), mean_std=mean_sd, mean_lo=mean_lo, mean_hi=mean_hi,
                        worst=g["worst"].mean(), worst_std=worst_sd, worst_lo=worst_lo, worst_hi=worst_hi,
                        worst_class=g["worst_class"].mode().iloc[0]))
    table = pd.DataFrame(out, columns=TABLE_COLUMNS)
    if methods is not None:
        order = {m: i for i, m in enumerate(methods)}
        table = table.sort_values(["method", "eval", "checkpoint"], key=lambda s: s.map(order) if s.name == "method"
                                  else s, kind="stable").reset_index(drop=True)
    return table


def plot_mitigation(table: pd.DataFrame, title: str | None = None) -> Figure:
    """Trade-off scatter: mean vs worst-class accuracy (%), one panel per evaluation, one
    marker per method (filled: best checkpoint, open: last), 95% intervals as bars."""
    if table.empty:
        raise ValueError("mitigation table is empty; nothing to plot")
    evals = list(dict.fromkeys(table["eval"]))
    methods = list(dict.fromkeys(table["method"]))
    cmap = plt.get_cmap("tab20" if len(methods) > 10 else "tab10")
    colors = {m: cmap(i % cmap.N) for i, m in enumerate(methods)}
    markers = "osD^v<>pPX*h"
    labelled: set[str] = set()
    with figure_style():
        # tall enough for a legend line per method
        height = max(4.4, 0.19 * len(methods) + 1.4)
        fig, axes = plt.subplots(1, len(evals), figsize=(4.2 * len(evals) + 3.2, height), squeeze=False)
        for ax, ev in zip(axes[0], evals, strict=True):
            for i, m in enumerate(methods):
                for ckpt in ("last", "best"):
                    r = table[(table["eval"] == ev) & (table["method"] == m) & (table["checkpoint"] == ckpt)]
                    if r.empty:
                        continue
                    r = r.iloc[0]
                    x, y = 100 * r["mean"], 100 * r["worst"]
                    ax.errorbar(x, y, xerr=[[x - 100 * r["mean_lo"]], [100 * r["mean_hi"] - x]],
                                yerr=[[y - 100 * r["worst_lo"]], [100 * r["worst_hi"] - y]], fmt="none",
                                ecolor=colors[m], alpha=0.5, lw=0.8)
                    ax.plot(x, y, markers[i % len(markers)], color=colors[m], ms=7,
                            mfc=colors[m] if ckpt == "best" else "white", mew=1.3,
                            label=None if m in labelled else pretty_mitigation(m))
                    labelled.add(m)
            ax.set_title(pretty_eval(ev), color=CLEAN_COLOR if ev == "clean" else ATTACK_COLORS[0])
            ax.set_xlabel("mean class accuracy (%)")
            ax.set_ylabel("worst-class accuracy (%)")
            ax.grid(alpha=0.3)
        # the legend right beside the panels, in the 3.2 inches the width keeps for it
        right = 1 - 3.0 / fig.get_figwidth()
        fig.legend(loc="center left", bbox_to_anchor=(right + 0.1 / fig.get_figwidth(), 0.5), fontsize=7,
                   frameon=False, title="filled: best, open: last", title_fontsize=7)
        fig.subplots_adjust(right=right, wspace=0.3)
        if title:
            fig.suptitle(title)
    return fig


_POLICY_COLUMNS = [("epsilon", "epsilon / base epsilon"), ("weight", "class weight"),
                   ("weight_boundary", "boundary-loss weight"), ("beta", "TRADES beta")]


def _varying(rows: pd.DataFrame, col: str) -> bool:
    return col in rows and rows[col].notna().any() and bool(rows.groupby("epoch")[col].std().fillna(0).gt(1e-9).any())


def plot_policy_epochs(epochs: pd.DataFrame, methods: Sequence[str], title: str | None = None) -> Figure:
    """Per method whose class-wise policy state varies, that state (the first varying of
    epsilon relative to the base, class weight, boundary weight, beta) against epoch, one
    line per class (mean over seeds)."""
    if "epoch" not in epochs.columns or epochs.empty:
        raise ValueError("epoch table is empty or lacks `epoch`; nothing to plot")
    panels = []
    for m in methods:
        rows = epochs[epochs["method"] == m]
        col = next((c for c, _ in _POLICY_COLUMNS if not rows.empty and _varying(rows, c)), None)
        if col is not None:
            panels.append((m, col, rows))
    with figure_style():
        if not panels:
            fig, ax = plt.subplots(figsize=(6, 2))
            ax.axis("off")
            ax.text(0.5, 0.5, "no method's class-wise policy state varies over the epochs", ha="center")
            if title:
                fig.suptitle(title)
            return fig
        ncol = min(4, len(panels))
        nrow = math.ceil(len(panels) / ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(3.6 * ncol, 2.8 * nrow), squeeze=False)
        for ax in axes.flat[len(panels):]:
            ax.axis("off")
        for ax, (m, col, rows) in zip(axes.flat, panels, strict=False):
            mean = rows.groupby(["epoch", "class", "class_name"], as_index=False)[col].mean()
            if col == "epsilon":
                base = mean[mean["epoch"] == mean["epoch"].min()][col].median()
                mean[col] = mean[col] / base if base > 0 else mean[col]
            for (_, name), g in mean.groupby(["class", "class_name"]):
                ax.plot(g["epoch"], g[col], lw=1, label=str(name))
            ax.set_title(pretty_mitigation(m), fontsize=8)
            ax.set_xlabel("epoch")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylabel(dict(_POLICY_COLUMNS)[col], fontsize=7)
            ax.grid(alpha=0.3)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        if len(labels) <= 20:
            fig.legend(handles, labels, loc="lower center", ncol=min(10, len(labels)), fontsize=6, frameon=False)
        fig.tight_layout(rect=(0, 0.06, 1, 0.95))
        if title:
            fig.suptitle(title)
    return fig
