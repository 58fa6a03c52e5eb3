"""Class-wise accuracy tables and the discrepancy figures summarising them.

Accuracies are fractions in [0, 1]. "Robustness" in the study is simply the accuracy
of a table built from adversarial predictions (eval = "pgd20", ...), so the same
functions serve clean accuracy and robustness.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from study.metrics.intervals import wilson_interval
from study.metrics.seeds import accuracy_seed_interval
from study.metrics.worst import weakest_class, worst_fraction_mean

# Columns produced by class_accuracy; every other column of a class-wise table is an
# identifier (run_id, dataset, data_variant, model, method, seed, eval, ...).
CLASS_COLUMNS = ("class", "class_name", "n", "correct", "acc", "ci_lo", "ci_hi", "acc_centered")
# Extra measure columns produced by seed_aggregate.
AGGREGATE_COLUMNS = ("n_seeds", "acc_std", "acc_pooled")
MEASURE_COLUMNS = frozenset(CLASS_COLUMNS) | frozenset(AGGREGATE_COLUMNS)

DISCREPANCY_KEYS = (
    "mean", "overall", "worst", "worst_class", "best", "best_class", "gap", "std", "worst10"
)


def _require_columns(df: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} lacks column(s) {missing}; it has {list(df.columns)}")


def class_accuracy(samples: pd.DataFrame, class_names: Sequence[str]) -> pd.DataFrame:
    """Per-class accuracy of one evaluation from its per-sample records.

    `samples` needs integer columns `label` and `pred` (other columns are ignored).
    Returns one row per class in `class_names` order, including classes without
    samples (n = 0, acc and interval NaN), with columns
    class, class_name, n, correct, acc, ci_lo, ci_hi (95% Wilson), acc_centered.
    acc_centered is acc minus the unweighted mean of acc over the classes that have
    samples, i.e. the study's mean-subtracted accuracy.
    """
    num_classes = len(class_names)
    if num_classes == 0:
        raise ValueError("class_names is empty; give one name per class")
    _require_columns(samples, ("label", "pred"), "per-sample table")
    if "index" in samples.columns and samples["index"].duplicated().any():
        dup = samples.loc[samples["index"].duplicated(), "index"].head(5).tolist()
        # A repeated test index would count one image twice and bias its class.
        raise ValueError(f"per-sample table repeats test indices, e.g. {dup}")

    columns = {}
    for name in ("label", "pred"):
        column = samples[name]
        if len(column) and (not pd.api.types.is_integer_dtype(column) or column.isna().any()):
            raise ValueError(
                f"column {name!r} must hold integers without missing values, got {column.dtype}"
            )
        values = column.to_numpy(dtype=np.int64)
        columns[name] = values
        out_of_range = (values < 0) | (values >= num_classes)
        if out_of_range.any():
            raise ValueError(
                f"column {name!r} has values {sorted(set(values[out_of_range].tolist()))[:5]} "
                f"outside the valid classes 0..{num_classes - 1}"
            )
    labels, preds = columns["label"], columns["pred"]

    n = np.bincount(labels, minlength=num_classes)
    correct = np.bincount(labels[labels == preds], minlength=num_classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(n > 0, correct / np.maximum(n, 1), np.nan)
    lo, hi = wilson_interval(correct, n)
    centred = acc - np.nanmean(acc) if np.isfinite(acc).any() else acc
    return pd.DataFrame(
        {
            "class": np.arange(num_classes),
            "class_name": list(class_names),
            "n": n.astype(np.int64),
            "correct": correct.astype(np.int64),
            "acc": acc,
            "ci_lo": lo,
            "ci_hi": hi,
            "acc_centered": centred,
        }
    )


def discrepancy(class_table: pd.DataFrame, col: str = "acc") -> dict[str, Any]:
    """Summary of how unequal the accuracies in `col` are across classes.

    Classes whose `col` is NaN (no samples) are left out. Keys:
    mean (unweighted mean over classes), overall (pooled sum(correct) / sum(n), NaN if
    the table has no `correct`/`n`), worst / worst_class and best / best_class (value
    and class_name; ties go to the first class in table order), gap (best - worst),
    std (population standard deviation over classes, ddof=0, because the classes are
    the whole population of interest, not a sample of it), worst10 (mean of the
    lowest 10% of classes, at least one class: the worst class for 10 classes, the
    mean of the 10 worst for 100).
    """
    _require_columns(class_table, (col,), "class table")
    values = pd.to_numeric(class_table[col], errors="raise")
    valid = values.notna()
    if not valid.any():
        raise ValueError(f"class table has no non-NaN values in column {col!r}")
    names = (class_table["class_name"] if "class_name" in class_table.columns
             else class_table["class"] if "class" in class_table.columns
             else pd.Series(class_table.index, index=class_table.index)).astype(str)
    vals = values[valid].to_numpy(dtype=float)
    names = names[valid].to_numpy()

    worst_i = weakest_class(vals)
    best_i = int(np.argmax(vals))
    overall = float("nan")
    if {"correct", "n"} <= set(class_table.columns):
        total = float(class_table["n"].sum())
        if total > 0:
            overall = float(class_table["correct"].sum()) / total
    return {
        "mean": float(vals.mean()),
        "overall": overall,
        "worst": float(vals[worst_i]),
        "worst_class": str(names[worst_i]),
        "best": float(vals[best_i]),
        "best_class": str(names[best_i]),
        "gap": float(vals[best_i] - vals[worst_i]),
        "std": float(vals.std(ddof=0)),
        "worst10": worst_fraction_mean(vals),
    }


def classwise_table(
    records: Iterable[tuple[Mapping[str, Any], pd.DataFrame]], class_names: Sequence[str]
) -> pd.DataFrame:
    """Long class-wise table from (identifiers, per-sample records) pairs.

    Each identifier mapping (e.g. run_id, dataset, data_variant, model, method, seed,
    eval) becomes leading columns, values untouched, in the order of the first
    record's keys. All records must carry the same identifier keys, and no two
    records the same identifier values.
    """
    parts: list[pd.DataFrame] = []
    keys: list[str] | None = None
    for ids, samples in records:
        ids = dict(ids)
        clash = sorted(set(ids) & MEASURE_COLUMNS)
        if clash:
            raise ValueError(
                f"identifier keys {clash} clash with measure columns {sorted(MEASURE_COLUMNS)}"
            )
        if keys is None:
            keys = list(ids)
        elif set(ids) != set(keys):
            raise ValueError(
                f"identifier keys {sorted(ids)} differ from the first record's {sorted(keys)}"
            )
        table = class_accuracy(samples, class_names)
        for key in reversed(keys):
            table.insert(0, key, [ids[key]] * len(table))
        parts.append(table)
    if not parts:
        raise ValueError("no records given; need at least one (identifiers, samples) pair")
    out = pd.concat(parts, ignore_index=True)
    if keys and out.duplicated(subset=[*keys, "class"]).any():
        dup = out.loc[out.duplicated(subset=[*keys, "class"]), keys].drop_duplicates().head(3)
        raise ValueError(f"several records share the same identifiers: {dup.to_dict('records')}")
    return out


def _identifier_columns(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if c not in MEASURE_COLUMNS]


def summary_table(classwise: pd.DataFrame, col: str = "acc") -> pd.DataFrame:
    """One row per identifier combination with the discrepancy figures of `col`.

    Identifier columns are all columns that are not class-table measures, so this
    works on classwise_table output (per run and evaluation) and on seed_aggregate
    output (per aggregate group) alike. Row order follows first appearance.
    """
    _require_columns(classwise, (col,), "class-wise table")
    ids = _identifier_columns(classwise)
    if not ids:
        return pd.DataFrame([discrepancy(classwise, col)], columns=list(DISCREPANCY_KEYS))
    rows = []
    for key, group in classwise.groupby(ids, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(ids, key, strict=True)), **discrepancy(group, col)})
    return pd.DataFrame(rows, columns=[*ids, *DISCREPANCY_KEYS])


def seed_aggregate(classwise: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Aggregate a class-wise table over seeds (or any replicate dimension not in `by`).

    Returns one row per (by..., class) with columns by..., class, class_name,
    n_seeds (rows aggregated), acc (mean of the per-seed accuracies), acc_std (sample
    standard deviation across seeds, ddof=1, NaN for a single seed), n and correct
    (summed over seeds), acc_pooled (correct / n), ci_lo / ci_hi (95% interval of acc
    over seeds and test images, study.metrics.seeds; Wilson for one seed) and
    acc_centered (acc minus its mean over classes within the `by` group).
    """
    by = list(by)
    _require_columns(
        classwise, [*by, "class", "class_name", "acc", "n", "correct"], "class-wise table"
    )
    misplaced = sorted(set(by) & MEASURE_COLUMNS)
    if misplaced:
        raise ValueError(f"`by` may hold identifier columns only; {misplaced} are measures")
    if "seed" in classwise.columns and "seed" not in by:
        dup = classwise.duplicated(subset=[*by, "class", "seed"])
        if dup.any():
            others = [c for c in _identifier_columns(classwise) if c not in by and c != "seed"]
            per_key = classwise.groupby([*by, "class", "seed"], dropna=False)
            varying = [c for c in others if per_key[c].nunique(dropna=False).gt(1).any()]
            raise ValueError(
                f"rows repeat for the same {by + ['class', 'seed']}; add the varying "
                f"identifier(s) {varying} to `by`"
            )

    keys = [*by, "class"]
    grouped = classwise.groupby(keys, sort=False, dropna=False)
    out = grouped.agg(
        class_name=("class_name", "first"),
        n_seeds=("acc", "size"),
        acc=("acc", "mean"),
        acc_std=("acc", lambda s: s.std(ddof=1)),
        n=("n", "sum"),
        correct=("correct", "sum"),
        # seeds with samples of the class: the replicates the interval is over
        measured=("acc", "count"),
    ).reset_index()
    with np.errstate(invalid="ignore", divide="ignore"):
        out["acc_pooled"] = np.where(out["n"] > 0, out["correct"] / out["n"].clip(lower=1), np.nan)
        per_seed_n = out["n"] / out["measured"].clip(lower=1)
    out["ci_lo"], out["ci_hi"] = accuracy_seed_interval(
        out["acc"], out["acc_std"], out["measured"].clip(lower=1), per_seed_n)
    if by:
        group_mean = out.groupby(by, sort=False, dropna=False)["acc"].transform("mean")
        out["acc_centered"] = out["acc"] - group_mean
    else:
        out["acc_centered"] = out["acc"] - out["acc"].mean()
    return out[[*keys, "class_name", "n_seeds", "acc", "acc_std", "n", "correct",
                "acc_pooled", "ci_lo", "ci_hi", "acc_centered"]]
