"""Figures 1 and 2: class-wise clean accuracy and robustness of one (dataset, model, method),
from the class-wise table (study tables); the drawing is study.figures.classwise's. The rows
and title of one (dataset, model, method) panel serve figure 7 too (fig07_epochs)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the figure catalog imports this module; pandas is imported where a figure is drawn
    import pandas as pd


def select_rows(table: pd.DataFrame, dataset: str, model: str, method: str) -> pd.DataFrame:
    from study.run_directory import SETTING_COLUMNS

    rows = table[(table["dataset"] == dataset) & (table["model"] == model) & (table["method"] == method)]
    if "train_data" in rows:  # models trained on constructed datasets have figures of their own
        rows = rows[rows["train_data"] == "original"]
    if rows.empty:
        have = table[["dataset", "model", "method"]].drop_duplicates().to_records(index=False).tolist()
        raise ValueError(f"no rows for dataset={dataset} model={model} method={method}; the table has {have}")
    settings = rows[[c for c in SETTING_COLUMNS if c in rows]].drop_duplicates()
    if len(settings) > 1:
        raise ValueError(
            f"{len(settings)} training settings of {dataset}/{model}/{method} in the table; "
            "a class-wise figure shows one (filter the table first)"
        )
    return rows


def _title(rows: pd.DataFrame, dataset: str, model: str, method: str) -> str:
    from study.figures.style import run_title

    title = run_title(dataset=dataset, model=model, method=method)
    variant = str(rows["data_variant"].iloc[0])
    if variant not in ("official", "default"):
        title += f" ({variant} variant of the data)"
    seeds = rows["seed"].nunique()
    return title + f"  ·  {seeds} seed{'s' if seeds > 1 else ''}"


def run_panel(table_path: Path, dataset: str, model: str, method: str,
              runs: Sequence[str] | None) -> tuple[pd.DataFrame, str]:
    """The rows of one (dataset, model, method) and the figure's title."""
    import pandas as pd

    table = pd.read_csv(table_path)
    if runs:
        table = table[table["run_id"].isin(runs)]
    rows = select_rows(table, dataset, model, method)
    return rows, _title(rows, dataset, model, method)


def draw_classwise(table: Path, out_stem: str | Path, *, dataset: str, model: str, method: str,
                   evaluations: Sequence[str] | None = None, runs: Sequence[str] | None = None, **_) -> list[Path]:
    """Figures 1 and 2: `evaluations` picks the evaluations shown (default: every one)."""
    from study.figures.classwise import plot_classwise
    from study.figures.style import save_figure

    rows, title = run_panel(table, dataset, model, method, runs)
    if evaluations:
        unknown = sorted(set(evaluations) - set(rows["eval"]))
        if unknown:
            raise ValueError(f"evaluation(s) {unknown} not in the table; it has {sorted(rows['eval'].unique())}")
        rows = rows[rows["eval"].isin(evaluations)]
    return save_figure(plot_classwise(rows, title=title), out_stem)
