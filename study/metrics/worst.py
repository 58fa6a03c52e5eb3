"""The one definition of "worst class" that every table and figure uses.

docs/study.md#metrics: the worst-class figure is the accuracy of the weakest class; for many classes
(CIFAR-100) it is the mean of the weakest 10% of classes, so one noisy class does not
decide it. With 10 classes both are the same number.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

WORST_FRACTION = 0.1


def worst_count(num_classes: int, fraction: float = WORST_FRACTION) -> int:
    """How many of the weakest classes the worst-class figure averages (at least one)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    # floor(n * fraction) without float error: 100 classes at 0.1 give exactly 10
    return max(1, int(np.floor(num_classes * fraction + 1e-9)))


def worst_value(acc: np.ndarray | Sequence[float], axis: int = -1, fraction: float = WORST_FRACTION) -> np.ndarray:
    """Mean of the weakest `worst_count` classes along `axis` (the classes); NaN classes are
    left out of a 1-D input."""
    values = np.asarray(acc, dtype=float)
    if values.ndim == 1:
        values = values[~np.isnan(values)]
        if not values.size:
            raise ValueError("no class values")
    k = worst_count(values.shape[axis], fraction)
    return np.sort(values, axis=axis).take(range(k), axis=axis).mean(axis=axis)


def worst_fraction_mean(values: Sequence[float], fraction: float = WORST_FRACTION) -> float:
    """`worst_value` of one list of class values, as a float."""
    return float(worst_value(values, fraction=fraction))


def weakest_class(values: Sequence[float] | np.ndarray) -> int:
    """Index of the single weakest class (the first on ties), NaNs ignored."""
    vals = np.asarray(values, dtype=float)
    if not np.isfinite(vals).any():
        raise ValueError("no class values")
    return int(np.nanargmin(vals))
