"""`study check`: the checks against false robustness of one checkpoint of a run, written beside its records.

A run's `last` checkpoint (model.pt), its `best` on validation (model_best.pt) and its
`published` (model_published.pt) are checked apart: records of `<evaluation>@best` belong
to the best checkpoint, those of `<evaluation>@published` to the published one, records
without `@` to the last, and only those of the checked checkpoint reach the record checks.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from study.checkpoints import CHECKPOINT_FILES
from study.config.spec import EvaluationSpec
from study.data.splits import Splits, stratified_subset
from study.evaluate.checks import (
    DEFAULT_THRESHOLDS,
    Thresholds,
    model_checks,
    record_checks,
    records_reproduce,
    resolve_scopes,
    summarize,
)
from study.evaluate.records import read_records
from study.io import atomic_path, atomic_write_json
from study.record_names import checkpoint_of

if TYPE_CHECKING:
    import torch
from study.run_directory import load_trained_model


def load_checkpoint_records(
    paths: Sequence[str | Path], run_id: str, checkpoint: str
) -> dict[str, tuple[pd.DataFrame, dict]]:
    """Evaluation name -> (per-sample frame, evaluation config) of the records among `paths`
    that come from `checkpoint` of run `run_id`; records of another run are an error, those
    of the run's other checkpoint are left out."""
    loaded, other = {}, []
    for path in paths:
        frame, meta = read_records(path)
        if meta.get("run_id") != run_id:
            raise ValueError(f"{path} belongs to run {meta.get('run_id')}, not {run_id}")
        evaluation = meta["evaluation"]
        if checkpoint_of(evaluation) == checkpoint:
            loaded[evaluation["name"]] = (frame, evaluation)
        else:
            other.append(evaluation["name"])
    if other:
        print(f"checks of {run_id} ({checkpoint}): records of another checkpoint left out: {', '.join(other)}",
              file=sys.stderr)
    return loaded


def check_run(
    run_dir: str | Path,
    splits: Splits,
    records: Sequence[str | Path],
    pgd: EvaluationSpec,
    out_json: str | Path,
    out_csv: str | Path,
    *,
    per_class: int = 20,
    eps_factors: Sequence[float] = (0.25, 0.5, 1.0, 2.0),
    checkpoint: str = "last",
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    device: str | torch.device = "cpu",
) -> dict:
    """Run every check on `checkpoint` ('last', 'best' or 'published') of the run and on its records,
    on at most `per_class` test images per class (all of them where a class has fewer, as
    TinyImageNet's 50 labelled test images do against the paper preset's 100); write checks.json
    (status, values, the evaluations each check concerns, the images per class checked) and
    checks.csv (one row per check)."""
    if checkpoint not in CHECKPOINT_FILES:
        raise ValueError(f"unknown checkpoint {checkpoint!r}; valid: {', '.join(CHECKPOINT_FILES)}")
    run_dir = Path(run_dir)
    model, _ = load_trained_model(run_dir, device, checkpoint=checkpoint)
    loaded = load_checkpoint_records(records, run_dir.name, checkpoint)
    counts = splits.test_y.long().bincount()
    per_class = min(per_class, int(counts[counts > 0].min()))
    idx = stratified_subset(splits.test_y, per_class)
    checks = [records_reproduce(model, splits.test_x, splits.test_y, loaded, per_class,
                                tie_tolerance=thresholds.tie_tolerance, device=device)]
    checks += model_checks(model, splits.test_x[idx].to(device), splits.test_y[idx].to(device), pgd.config,
                           eps_factors, thresholds=thresholds)
    checks += record_checks(loaded, list(splits.class_names))
    # scopes compare the evaluations as the records and the command line wrote them
    resolve_scopes(checks, {name: ev for name, (_, ev) in loaded.items()}, pgd.identity)
    result = {"run_id": run_dir.name, "checkpoint": checkpoint, "reference_pgd": pgd.identity,
              "evaluations": sorted(loaded), "per_class": per_class, **summarize(checks)}
    atomic_write_json(out_json, result)
    table = pd.DataFrame([{"run_id": run_dir.name, "checkpoint": checkpoint, "check": c["name"], "status": c["status"],
                           "evaluations": " ".join(c["evaluations"]), "detail": c["detail"]} for c in result["checks"]])
    with atomic_path(out_csv) as tmp:
        table.to_csv(tmp, index=False)
    for c in result["checks"]:
        if c["status"] != "pass":
            print(f"CHECK {c['status'].upper()}: {run_dir.name} ({checkpoint}): {c['name']}: {c['detail']}"
                  f" [puts in doubt: {', '.join(c['evaluations']) or 'no evaluation'}]", file=sys.stderr)
    print(f"checks of {run_dir.name} ({checkpoint}): {result['status']} ({len(checks)} checks)", file=sys.stderr)
    return result
