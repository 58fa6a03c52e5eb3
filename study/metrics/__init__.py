"""Class-wise accuracy, its confidence intervals and discrepancy summaries."""

from study.metrics.classwise import (
    class_accuracy,
    classwise_table,
    discrepancy,
    seed_aggregate,
    summary_table,
)
from study.metrics.intervals import wilson_interval

__all__ = [
    "class_accuracy",
    "classwise_table",
    "discrepancy",
    "seed_aggregate",
    "summary_table",
    "wilson_interval",
]

# Explanations (figures 4-6, 8-10): import from their modules,
# study.metrics.discrepancy_intervals, study.metrics.rank, study.metrics.confusion.
