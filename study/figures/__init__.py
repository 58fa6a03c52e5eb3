"""Figures of the study: DataFrames in, matplotlib Figures out, saved as PNG and PDF.

The names below are imported on first use: the `study` command reads the figure kinds
(study.figures.catalog) and the workflow the panels (study.figures.panels) without paying
for matplotlib and scipy.
"""

from importlib import import_module

_WHERE = {
    "plot_classwise": "study.figures.classwise",
    "plot_epochs": "study.figures.epochs",
    **{name: "study.figures.style" for name in ("run_title", "save_figure")},
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'study.figures' has no attribute {name!r}")
    return getattr(import_module(_WHERE[name]), name)
