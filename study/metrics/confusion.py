"""Which classes are confused with which, and how similar the classes look to the model
(docs/study.md#figures, 9 and 10), from per-sample records (label, pred, logit_k columns)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def _labels(samples: pd.DataFrame, num_classes: int, columns: tuple[str, ...]) -> None:
    missing = [c for c in columns if c not in samples.columns]
    if missing:
        raise ValueError(f"per-sample records lack column(s) {missing}; they have {list(samples.columns)[:8]}...")
    for col in ("label", "pred"):
        if col in columns:
            values = samples[col].to_numpy()
            if len(values) and (values.min() < 0 or values.max() >= num_classes):
                raise ValueError(f"column {col!r} holds values outside 0..{num_classes - 1}")


def confusion_matrix(samples: pd.DataFrame, num_classes: int, normalize: bool = True) -> np.ndarray:
    """C x C matrix, rows = true class, columns = predicted class.

    normalize=True divides each row by its class's sample count (row sums 1; the diagonal is
    the class accuracy); a class without samples gives a NaN row. Otherwise counts.
    """
    _labels(samples, num_classes, ("label", "pred"))
    counts = pd.crosstab(samples["label"], samples["pred"]).reindex(
        index=range(num_classes), columns=range(num_classes), fill_value=0).to_numpy(dtype=float)
    if not normalize:
        return counts
    totals = counts.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, counts / np.maximum(totals, 1), np.nan)


def logit_columns(samples: pd.DataFrame, num_classes: int) -> list[str]:
    cols = [f"logit_{k}" for k in range(num_classes)]
    _labels(samples, num_classes, ("label", *cols))
    return cols


def mean_logits(samples: pd.DataFrame, num_classes: int) -> np.ndarray:
    """C x C: row c is the mean logit vector over the samples whose true class is c (NaN if none)."""
    cols = logit_columns(samples, num_classes)
    means = samples.groupby("label")[cols].mean().reindex(range(num_classes))
    return means.to_numpy(dtype=float)


def logit_cosine_similarity(samples: pd.DataFrame, num_classes: int) -> np.ndarray:
    """C x C cosine similarity between the mean logit vectors of the true classes."""
    means = mean_logits(samples, num_classes)
    norms = np.linalg.norm(means, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = means / norms
    return unit @ unit.T
