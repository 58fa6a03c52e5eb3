"""Robustness tables from per-sample records (results/<preset>/tables/): FRL errors, class
false-positive scores, confusion matrices under attack, overall and worst-class accuracy
per attack with intervals, and the checks of every run.

Checks decide what is trusted, by the one rule of study.metrics.trust: a sample counts as
robust only if no check flagged or failed its evaluation. Every row of frl.csv, cfp.csv,
confusion.csv and attacks.csv carries its evaluation's `check_status` (pass, flag, fail,
unchecked), `checks_not_passed` and the `checkpoint` it was evaluated at (last, or best on
validation). The measured numbers (acc, worst_acc, the FRL errors, ...) are kept for every
evaluation, marked by its status; the trusted columns of attacks.csv
(`trusted_acc`, `trusted_worst_acc`) equal them where the rule counts the evaluation and are
empty (NaN) for flagged or failed ones: such an evaluation has no trusted robust samples,
and an empty cell, unlike 0, cannot be read as a measured accuracy. checks.csv lists every
check with the checkpoint it checked and the evaluations a status other than pass concerns.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from study.config.spec import ConfigSpec
from study.evaluate.records import read_records
from study.io import atomic_path
from study.metrics.classwise import class_accuracy, discrepancy
from study.metrics.intervals import wilson_interval
from study.metrics.robustness import class_false_positive, confusion_matrix, frl_errors, frl_summary
from study.metrics.trust import counted, read_checks, trust_of
from study.record_names import checkpoint_of
from study.run_directory import identity


def _attack_row(ident: dict, frame: pd.DataFrame, names: list[str]) -> dict:
    per_class = class_accuracy(frame, names)
    d = discrepancy(per_class)
    worst = per_class.loc[per_class["acc"].idxmin()]
    n, correct = len(frame), int((frame["pred"] == frame["label"]).sum())
    olo, ohi = wilson_interval(correct, n)
    trusted = counted(ident["check_status"])
    return {**ident, "n": n, "acc": correct / n, "ci_lo": olo, "ci_hi": ohi,
            "trusted_acc": correct / n if trusted else np.nan,
            "worst_class": worst["class_name"], "worst_acc": worst["acc"],
            "trusted_worst_acc": worst["acc"] if trusted else np.nan,
            "worst_ci_lo": worst["ci_lo"], "worst_ci_hi": worst["ci_hi"], "worst10": d["worst10"]}


def _class_tables(ident: dict, frame: pd.DataFrame, names: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Class false-positive scores and the confusion matrix of one evaluation."""
    c = len(names)
    wrong = frame[frame["pred"] != frame["label"]]
    k = np.bincount(wrong["pred"], minlength=c)
    lo, hi = wilson_interval(k, np.full(c, max(len(wrong), 1)))
    cfp = pd.DataFrame({**ident, "class": range(c), "class_name": names, "cfp": class_false_positive(frame, c),
                        "cfp_lo": lo, "cfp_hi": hi, "misclassified": len(wrong)})
    cm = confusion_matrix(frame, c)
    t, p = np.meshgrid(range(c), range(c), indexing="ij")
    conf = pd.DataFrame({**ident, "true": t.ravel(), "pred": p.ravel(), "count": cm.ravel()})
    return cfp, conf


def _clean_of(evs: dict, checkpoint: str) -> str | None:
    """The clean evaluation of `checkpoint` (FRL errors compare an attack's records with it)."""
    clean = [e for e, (_, m) in evs.items()
             if m["evaluation"].get("type", "clean") == "clean" and checkpoint_of(m["evaluation"]) == checkpoint]
    return clean[0] if clean else None


def robustness_tables(records: Iterable[str | Path], checks: Iterable[str | Path], out_dir: str | Path) -> dict:
    out_dir = Path(out_dir)
    verdicts, check_rows = read_checks(checks)
    runs: dict[str, dict] = {}
    for path in records:
        frame, meta = read_records(path)
        runs.setdefault(meta["run_id"], {})[meta["evaluation"]["name"]] = (frame, meta)
    tables: dict[str, list] = {"frl": [], "cfp": [], "confusion": []}
    attacks = []
    for run_id, evs in runs.items():
        for name, (frame, meta) in evs.items():
            names, ev = meta["class_names"], meta["evaluation"]
            checkpoint = checkpoint_of(ev)
            run = ConfigSpec.parse(meta["run_config"], f"{run_id} {name}: run_config").config  # a record's metadata
            ident = {**identity(run_id, run), "eval": name, "checkpoint": checkpoint,
                     "attack": ev.get("type", "clean"), **trust_of(verdicts, run_id, name)}
            cfp, conf = _class_tables(ident, frame, names)
            tables["cfp"].append(cfp)
            tables["confusion"].append(conf)
            row = _attack_row(ident, frame, names)
            clean = _clean_of(evs, checkpoint)
            if ev.get("type", "clean") != "clean" and clean:
                errors = frl_errors(evs[clean][0], frame, names)
                tables["frl"].append(errors.assign(**ident)[[*ident, *errors.columns]])
                row.update(frl_summary(errors))  # FRL errors: average and worst class
            attacks.append(row)
    paths = {name: _write(pd.concat(blocks, ignore_index=True) if blocks else pd.DataFrame(), out_dir / f"{name}.csv")
             for name, blocks in tables.items()}
    paths["attacks"] = _write(pd.DataFrame(attacks), out_dir / "attacks.csv")
    paths["checks"] = _write(pd.DataFrame(check_rows), out_dir / "checks.csv")
    _warn_untrusted(attacks)
    return paths


def _warn_untrusted(attacks: list[dict]) -> None:
    """Say on stderr which evaluations the trusted columns leave out, and why."""
    unchecked = 0
    for row in attacks:
        if row["check_status"] == "unchecked":
            unchecked += 1
        elif row["check_status"] != "pass":
            print(f"robustness tables: {row['run_id']} {row['eval']} is not trusted ({row['check_status']}): "
                  f"{row['checks_not_passed']}", file=sys.stderr)
    if unchecked:
        print(f"robustness tables: {unchecked} of {len(attacks)} evaluations unchecked (no checks.json covers them): "
              "counted, marked 'unchecked'", file=sys.stderr)


def _write(frame: pd.DataFrame, path: Path) -> Path:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
    return path


def corruption_table(records: Iterable[str | Path]) -> pd.DataFrame:
    """Class x corruption x severity accuracy (with Wilson intervals) of every run's
    CIFAR-10-C records (`study corruptions`)."""
    blocks = []
    for path in records:
        frame, meta = read_records(path)
        run = ConfigSpec.parse(meta["run_config"], f"{path}: run_config").config  # a record's metadata
        ident = {**identity(meta["run_id"], run), "corruption_variant": meta["corruption_variant"]}
        for (corruption, severity), part in frame.groupby(["corruption", "severity"], sort=False):
            table = class_accuracy(part, meta["class_names"])
            table.insert(0, "severity", severity)
            table.insert(0, "corruption", corruption)
            blocks.append(table.assign(**ident)[[*ident, *table.columns]])
    if not blocks:
        raise ValueError("no corruption records given")
    return pd.concat(blocks, ignore_index=True)


def write_corruption_table(records: Sequence[str | Path], out_dir: str | Path) -> Path:
    """corruptions.csv in `out_dir`: `corruption_table` of the records, written even with none
    (no corruptions configured, an empty table) so that the tables' outputs are complete."""
    return _write(corruption_table(records) if records else pd.DataFrame(), Path(out_dir) / "corruptions.csv")
