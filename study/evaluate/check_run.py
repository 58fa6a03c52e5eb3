"""`study check`: the checks against false robustness of one run, written beside its records."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from study.data.splits import Splits, stratified_subset
from study.evaluate.checks import model_checks, record_checks, summarize
from study.evaluate.records import read_records
from study.io import atomic_path, atomic_write_json
from study.runs import load_trained_model


def check_run(
    run_dir: str | Path,
    splits: Splits,
    records: Sequence[str | Path],
    pgd: Mapping,
    out_json: str | Path,
    out_csv: str | Path,
    *,
    per_class: int = 20,
    eps_factors: Sequence[float] = (0.25, 0.5, 1.0, 2.0),
    device: str = "cpu",
) -> dict:
    """Run every check; write checks.json (status and values) and checks.csv (one row per check)."""
    run_dir = Path(run_dir)
    model, _ = load_trained_model(run_dir, device)
    idx = stratified_subset(splits.test_y, per_class)
    checks = model_checks(model, splits.test_x[idx].to(device), splits.test_y[idx].to(device), pgd, eps_factors)
    loaded = {}
    for path in records:
        frame, meta = read_records(path)
        if meta.get("run_id") != run_dir.name:
            raise ValueError(f"{path} belongs to run {meta.get('run_id')}, not {run_dir.name}")
        loaded[meta["evaluation"]["name"]] = (frame, meta["evaluation"])
    checks += record_checks(loaded, list(splits.class_names))
    result = {"run_id": run_dir.name, "reference_pgd": dict(pgd), **summarize(checks)}
    atomic_write_json(out_json, result)
    table = pd.DataFrame([{"run_id": run_dir.name, "check": c["name"], "status": c["status"],
                           "detail": c["detail"]} for c in result["checks"]])
    with atomic_path(out_csv) as tmp:
        table.to_csv(tmp, index=False)
    for c in result["checks"]:
        if c["status"] != "pass":
            print(f"CHECK {c['status'].upper()}: {run_dir.name}: {c['name']}: {c['detail']}", file=sys.stderr)
    print(f"checks of {run_dir.name}: {result['status']} ({len(checks)} checks)", file=sys.stderr)
    return result
