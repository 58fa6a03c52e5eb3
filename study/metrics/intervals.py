"""Binomial confidence intervals for accuracies.

Wilson score intervals are used instead of the normal approximation because class
accuracies in this study sit close to 0 or 1 (robust accuracy of hard classes, clean
accuracy of easy ones) and per-class counts are small (100 images per CIFAR-100 class),
where the normal interval leaves [0, 1] or collapses to a point.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import pandas as pd

ArrayLike: TypeAlias = float | int | np.ndarray | pd.Series


def wilson_interval(
    k: ArrayLike, n: ArrayLike, z: float = 1.96
) -> tuple[ArrayLike, ArrayLike]:
    """Wilson score interval for k successes out of n trials.

    Works elementwise on scalars, numpy arrays and pandas Series (a Series in gives
    Series out, on the same index). Where n == 0 the proportion is undefined and both
    bounds are NaN; NaN inputs propagate. Raises ValueError for negative n, for k
    outside [0, n], or for a non-positive z.
    """
    if not z > 0:
        raise ValueError(f"z must be positive, got {z!r}")
    index = k.index if isinstance(k, pd.Series) else n.index if isinstance(n, pd.Series) else None
    k_arr = np.asarray(k, dtype=float)
    n_arr = np.asarray(n, dtype=float)
    k_arr, n_arr = np.broadcast_arrays(k_arr, n_arr)

    with np.errstate(invalid="ignore"):
        bad_n = n_arr < 0
        bad_k = (k_arr < 0) | (k_arr > n_arr)
    if bad_n.any():
        raise ValueError(f"n must be >= 0, got {n_arr[bad_n].tolist()[:5]}")
    if bad_k.any():
        pairs = list(zip(k_arr[bad_k].tolist(), n_arr[bad_k].tolist(), strict=True))[:5]
        raise ValueError(f"k must lie in [0, n]; got (k, n) = {pairs}")

    with np.errstate(invalid="ignore", divide="ignore"):
        p = k_arr / n_arr
        z2 = z * z
        denom = 1.0 + z2 / n_arr
        centre = (p + z2 / (2.0 * n_arr)) / denom
        half = (z / denom) * np.sqrt(p * (1.0 - p) / n_arr + z2 / (4.0 * n_arr * n_arr))
        lo = centre - half
        hi = centre + half
        # At k == 0 and k == n the exact bounds are 0 and 1; rounding can push them
        # a hair outside [0, 1], which would show up as negative error-bar lengths.
        lo = np.where(k_arr == 0, 0.0, np.clip(lo, 0.0, 1.0))
        hi = np.where(k_arr == n_arr, 1.0, np.clip(hi, 0.0, 1.0))
    empty = ~(n_arr > 0)
    lo = np.where(empty, np.nan, lo)
    hi = np.where(empty, np.nan, hi)

    if index is not None:
        return pd.Series(lo, index=index), pd.Series(hi, index=index)
    if lo.ndim == 0:
        return float(lo), float(hi)
    return lo, hi
