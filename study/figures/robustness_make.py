"""The draw functions of the robustness figures 3 (FRL errors), 11 (class false positives) and
14 (CIFAR-10-C) in study.figures.registry: select the rows of one panel, draw, save."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from study.figures.robustness import plot_cfp, plot_corruptions, plot_frl_errors
from study.figures.style import run_title, save_figure


def _draw(plot: Callable[[pd.DataFrame, str], Figure], table: Path, out_stem: str | Path, *, dataset: str,
          model: str, method: str, evaluations: Sequence[str] | None = None, runs: Sequence[str] | None = None,
          **_) -> list[Path]:
    """`method` 'all' keeps every method (figure 3 compares them); `runs` keeps only those
    runs (one training setting when the study has several)."""
    rows = pd.read_csv(table)
    rows = rows[(rows["dataset"] == dataset) & (rows["model"] == model)]
    if method != "all":
        rows = rows[rows["method"] == method]
    if runs:
        rows = rows[rows["run_id"].isin(runs)]
    if evaluations and "eval" in rows:
        rows = rows[rows["eval"].isin(evaluations)]
    if rows.empty:
        raise ValueError(f"no rows for dataset={dataset} model={model} method={method} in {table}")
    title = run_title(dataset=dataset, model=model, method=None if method == "all" else method)
    return save_figure(plot(rows, title), out_stem)


def draw_frl_errors(table: Path, out_stem: str | Path, **options) -> list[Path]:
    return _draw(plot_frl_errors, table, out_stem, **options)


def draw_cfp(table: Path, out_stem: str | Path, **options) -> list[Path]:
    return _draw(plot_cfp, table, out_stem, **options)


def draw_corruptions(table: Path, out_stem: str | Path, **options) -> list[Path]:
    return _draw(plot_corruptions, table, out_stem, **options)
