"""Robustness metrics from per-sample records: FRL's standard / boundary / robust errors,
the class false-positive score (CFP) and confusion matrices under attack.

All functions take per-sample frames with `index`, `label` and `pred` columns (the records
written by `study evaluate`); clean and attacked frames are matched on `index`, so two
records of different test subsets can't be mixed silently.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def _check_frame(frame: pd.DataFrame, what: str) -> None:
    missing = [c for c in ("index", "label", "pred") if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} lacks column(s) {missing}; it has {list(frame.columns)}")


def align(clean: pd.DataFrame, attacked: pd.DataFrame) -> pd.DataFrame:
    """One row per attacked test sample: label, clean_pred, adv_pred. The attacked record
    may cover a subset of the clean one (AutoAttack on fewer images than the clean pass)."""
    _check_frame(clean, "clean record")
    _check_frame(attacked, "attacked record")
    a = clean[["index", "label", "pred"]].rename(columns={"pred": "clean_pred"})
    b = attacked[["index", "label", "pred"]].rename(columns={"pred": "adv_pred", "label": "adv_label"})
    extra = set(b["index"]) - set(a["index"])
    if extra:
        raise ValueError(
            f"{len(extra)} samples of the attacked record ({len(b)} samples) are not in the clean record "
            f"({len(a)} samples), e.g. index {min(extra)}; evaluate clean on a superset of the attacked samples"
        )
    m = b.merge(a, on="index", validate="one_to_one")[["index", "label", "clean_pred", "adv_pred", "adv_label"]]
    if not (m["label"] == m["adv_label"]).all():
        raise ValueError("the clean and attacked records disagree on the labels of the same samples")
    return m.drop(columns="adv_label")


def frl_errors(clean: pd.DataFrame, attacked: pd.DataFrame, class_names: Sequence[str]) -> pd.DataFrame:
    """Per class (Xu et al. 2021, FRL): standard error 1 - a_c, boundary error a_c - r_c
    (clean-correct samples that the attack flips, as a share of the class) and robust error
    1 - r_c. A sample counts as robust only if it is correct clean AND under attack, so
    standard + boundary = robust error exactly (as in FRL's definition)."""
    m = align(clean, attacked)
    rows = []
    for c, name in enumerate(class_names):
        sel = m[m["label"] == c]
        n = len(sel)
        clean_ok = (sel["clean_pred"] == c).to_numpy()
        robust_ok = clean_ok & (sel["adv_pred"] == c).to_numpy()
        std = 1 - clean_ok.mean() if n else float("nan")
        rob = 1 - robust_ok.mean() if n else float("nan")
        rows.append({"class": c, "class_name": name, "n": n, "standard_error": float(std),
                     "boundary_error": float(rob - std) if n else float("nan"), "robust_error": float(rob)})
    return pd.DataFrame(rows)


def frl_summary(errors: pd.DataFrame) -> dict[str, float]:
    """Average (over classes) and worst-class value of each FRL error."""
    out = {}
    for col in ("standard_error", "boundary_error", "robust_error"):
        vals = errors[col].dropna()
        out[f"{col}_avg"] = float(vals.mean())
        out[f"{col}_worst"] = float(vals.max())
    return out


def class_false_positive(frame: pd.DataFrame, num_classes: int) -> np.ndarray:
    """CFP_c = (# samples of other classes predicted as c) / (# misclassified samples).

    The scores sum to 1 over classes when any sample is misclassified; all zero otherwise."""
    _check_frame(frame, "record")
    wrong = frame[frame["pred"] != frame["label"]]
    if (frame["pred"] >= num_classes).any() or (frame["pred"] < 0).any():
        raise ValueError(f"predictions outside 0..{num_classes - 1}")
    counts = np.bincount(wrong["pred"].to_numpy(), minlength=num_classes).astype(float)
    return counts / len(wrong) if len(wrong) else counts


def confusion_matrix(frame: pd.DataFrame, num_classes: int) -> np.ndarray:
    """counts[true, predicted]: under attack, row c says which classes class c is pushed to."""
    _check_frame(frame, "record")
    labels, pred = frame["label"].to_numpy(), frame["pred"].to_numpy()
    bad = (labels < 0) | (labels >= num_classes) | (pred < 0) | (pred >= num_classes)
    if bad.any():
        raise ValueError(f"labels or predictions outside 0..{num_classes - 1}")
    return np.bincount(labels * num_classes + pred, minlength=num_classes**2).reshape(num_classes, num_classes)
