"""`study figure` for the robustness figures (3, 11, 14): select rows, draw, save."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from study.figures.robustness import plot_cfp, plot_corruptions, plot_frl_errors
from study.figures.style import run_title, save_figure

ROBUSTNESS_KINDS = ("corruptions", "cfp", "frl_errors")


def make_robustness_figure(
    kind: str, table_path: str | Path, out_stem: str | Path, *, dataset: str, model: str, method: str,
    evaluations: Sequence[str] | None = None, runs: Sequence[str] | None = None,
) -> list[Path]:
    """`method` 'all' keeps every method (figure 3 compares them); `runs` keeps only those
    runs (one training setting when the study has several)."""
    table_path = Path(table_path)
    if not table_path.exists():
        raise FileNotFoundError(f"table {table_path} does not exist; `study robustness-tables` makes it")
    table = pd.read_csv(table_path)
    rows = table[(table["dataset"] == dataset) & (table["model"] == model)]
    if method != "all":
        rows = rows[rows["method"] == method]
    if runs:
        rows = rows[rows["run_id"].isin(runs)]
    if evaluations and "eval" in rows:
        rows = rows[rows["eval"].isin(evaluations)]
    if rows.empty:
        raise ValueError(f"no rows for dataset={dataset} model={model} method={method} in {table_path}")
    title = run_title(dataset=dataset, model=model, method=None if method == "all" else method)
    if kind == "corruptions":
        fig = plot_corruptions(rows, title)
    elif kind == "cfp":
        fig = plot_cfp(rows, title)
    elif kind == "frl_errors":
        fig = plot_frl_errors(rows, title)
    else:
        raise ValueError(f"unknown robustness figure kind {kind!r}; valid: {', '.join(ROBUSTNESS_KINDS)}")
    return save_figure(fig, out_stem)
