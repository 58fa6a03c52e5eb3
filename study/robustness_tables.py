"""Robustness tables from per-sample records (results/tables/): FRL errors, class
false-positive scores, confusion matrices under attack, overall and worst-class accuracy
per attack with intervals, and the checks of every run."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from study.evaluate.records import read_records
from study.io import atomic_path
from study.metrics.classwise import class_accuracy, discrepancy
from study.metrics.intervals import wilson_interval
from study.metrics.robustness import class_false_positive, confusion_matrix, frl_errors, frl_summary
from study.runs import identity

ATTACK_TYPES = ("clean", "pgd", "autoattack", "square")


def robustness_tables(records: Iterable[str | Path], checks: Iterable[str | Path], out_dir: str | Path) -> dict:
    out_dir = Path(out_dir)
    runs: dict[str, dict] = {}
    for path in records:
        frame, meta = read_records(path)
        runs.setdefault(meta["run_id"], {})[meta["evaluation"]["name"]] = (frame, meta)
    frl, cfp, conf, attacks = [], [], [], []
    for run_id, evs in runs.items():
        for name, (frame, meta) in evs.items():
            names, cfg, ev = meta["class_names"], meta["run_config"], meta["evaluation"]
            ident = {**identity(run_id, cfg), "eval": name, "attack": ev.get("type", "clean")}
            c = len(names)
            wrong = frame[frame["pred"] != frame["label"]]
            k = np.bincount(wrong["pred"], minlength=c)
            lo, hi = wilson_interval(k, np.full(c, max(len(wrong), 1)))
            cfp.append(pd.DataFrame({**ident, "class": range(c), "class_name": names,
                                     "cfp": class_false_positive(frame, c), "cfp_lo": lo, "cfp_hi": hi,
                                     "misclassified": len(wrong)}))
            cm = confusion_matrix(frame, c)
            t, p = np.meshgrid(range(c), range(c), indexing="ij")
            conf.append(pd.DataFrame({**ident, "true": t.ravel(), "pred": p.ravel(), "count": cm.ravel()}))
            per_class = class_accuracy(frame, names)
            d = discrepancy(per_class)
            worst = per_class.loc[per_class["acc"].idxmin()]
            n, correct = len(frame), int((frame["pred"] == frame["label"]).sum())
            olo, ohi = wilson_interval(correct, n)
            row = {**ident, "n": n, "acc": correct / n, "ci_lo": olo, "ci_hi": ohi,
                   "worst_class": worst["class_name"], "worst_acc": worst["acc"],
                   "worst_ci_lo": worst["ci_lo"], "worst_ci_hi": worst["ci_hi"], "worst10": d["worst10"]}
            clean = [e for e, (_, m) in evs.items() if m["evaluation"].get("type", "clean") == "clean"]
            if ev.get("type", "clean") != "clean" and clean:
                errors = frl_errors(evs[clean[0]][0], frame, names)
                frl.append(errors.assign(**ident)[[*ident, *errors.columns]])
                row.update(frl_summary(errors))  # FRL errors: average and worst class
            attacks.append(row)
    tables = {"frl": frl, "cfp": cfp, "confusion": conf}
    paths = {}
    for name, blocks in tables.items():
        frame = pd.concat(blocks, ignore_index=True) if blocks else pd.DataFrame()
        paths[name] = _write(frame, out_dir / f"{name}.csv")
    paths["attacks"] = _write(pd.DataFrame(attacks), out_dir / "attacks.csv")
    rows = []
    for path in checks:
        result = json.loads(Path(path).read_text())
        rows += [{"run_id": result["run_id"], "check": c["name"], "status": c["status"], "detail": c["detail"]}
                 for c in result["checks"]]
    paths["checks"] = _write(pd.DataFrame(rows), out_dir / "checks.csv")
    return paths


def _write(frame: pd.DataFrame, path: Path) -> Path:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
    return path
