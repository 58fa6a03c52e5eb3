"""Figures 3 (FRL's standard and boundary errors), 11 (class false positives) and 14 (CIFAR-10-C)
of one (dataset, model, method), from the robustness tables (study robustness-tables): select the
rows of one panel, draw (study.figures.robustness), save."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the figure catalog imports this module; pandas is imported where a figure is drawn
    import pandas as pd


def _panel(table: Path, *, dataset: str, model: str, method: str, evaluations: Sequence[str] | None = None,
           runs: Sequence[str] | None = None, **_) -> tuple[pd.DataFrame, str]:
    """`method` 'all' keeps every method (figure 3 compares them); `runs` keeps only those
    runs (one training setting when the study has several). The panel's rows and title."""
    import pandas as pd

    from study.figures.style import run_title

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
    return rows, title


def draw_frl_errors(table: Path, out_stem: str | Path, **options) -> list[Path]:
    from study.figures.robustness import plot_frl_errors
    from study.figures.style import save_figure

    return save_figure(plot_frl_errors(*_panel(table, **options)), out_stem)


def draw_cfp(table: Path, out_stem: str | Path, **options) -> list[Path]:
    from study.figures.robustness import plot_cfp
    from study.figures.style import save_figure

    return save_figure(plot_cfp(*_panel(table, **options)), out_stem)


def draw_corruptions(table: Path, out_stem: str | Path, **options) -> list[Path]:
    from study.figures.robustness import plot_corruptions
    from study.figures.style import save_figure

    return save_figure(plot_corruptions(*_panel(table, **options)), out_stem)
