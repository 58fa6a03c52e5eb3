"""Figure 7: class-wise records over the epochs of training of one (dataset, model, method),
from the epochs table (study tables); the drawing is study.figures.epochs'."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from study.figures.fig01_02_classwise import run_panel


def draw_epochs(table: Path, out_stem: str | Path, *, dataset: str, model: str, method: str,
                runs: Sequence[str] | None = None, **_) -> list[Path]:
    """Figure 7: the epochs table's class-wise records of one (dataset, model, method)."""
    from study.figures.epochs import plot_epochs
    from study.figures.style import save_figure

    rows, title = run_panel(table, dataset, model, method, runs)
    return save_figure(plot_epochs(rows, title=title), out_stem)
