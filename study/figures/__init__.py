"""Figures of the study: DataFrames in, matplotlib Figures out, saved as PNG and PDF."""

from study.figures.classwise import plot_classwise
from study.figures.epochs import plot_epochs
from study.figures.style import (
    eval_label,
    pretty_dataset,
    pretty_eval,
    pretty_method,
    pretty_model,
    run_title,
    save_figure,
)

__all__ = [
    "eval_label",
    "plot_classwise",
    "plot_epochs",
    "pretty_dataset",
    "pretty_eval",
    "pretty_method",
    "pretty_model",
    "run_title",
    "save_figure",
]
