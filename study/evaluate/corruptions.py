"""Evaluate a trained run on CIFAR-10-C regenerated offline (study.data.corruptions), per
sample and per class, resumably: each (corruption, severity) is written as a part file
beside the output and skipped when the job is run again."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from study.data.corruptions import corrupt
from study.data.prepared import Splits, stratified_subset
from study.evaluate.predict import predict
from study.evaluate.records import read_records, write_records
from study.metrics.classwise import class_accuracy
from study.train.engine import load_trained_model

CORRUPTION_VARIANT = "regenerated"  # every result from these images carries this label


def evaluate_corruptions(
    run_dir: str | Path,
    splits: Splits,
    corruptions: Sequence[str],
    severities: Sequence[int],
    out: str | Path,
    *,
    per_class: int | None = None,
    batch_size: int = 256,
    seed: int = 0,
    device: str = "cpu",
) -> Path:
    """Per-sample records (index, label, pred, corruption, severity) for every pair."""
    run_dir, out = Path(run_dir), Path(out)
    if splits.test_x.shape[1:] != (3, 32, 32):
        raise ValueError(f"CIFAR-10-C needs 32x32 RGB test images, got {tuple(splits.test_x.shape[1:])}")
    cfg = json.loads((run_dir / "config.json").read_text())
    model, _ = load_trained_model(run_dir, device)
    idx = stratified_subset(splits.test_y, per_class)
    images, labels = splits.test_x[idx], splits.test_y[idx]
    parts_dir = out.parent / f"{out.stem}.parts"
    frames = []
    for corruption in corruptions:
        for severity in severities:
            part = parts_dir / f"{corruption}-{severity}.parquet"
            if part.exists():
                done, done_meta = read_records(part)
                # reuse a part only if it was made for the same samples and seed
                if done["index"].tolist() == idx.tolist() and done_meta.get("seed") == seed:
                    frames.append(done)
                    continue
            t0 = time.perf_counter()
            x = corrupt(images, corruption, int(severity), seed=seed)
            pred = predict(model, x, labels, batch_size=batch_size, device=device).pred
            frame = pd.DataFrame({"index": idx.numpy(), "label": labels.numpy(), "pred": pred,
                                  "corruption": corruption, "severity": int(severity)})
            write_records(frame, part, {"corruption": corruption, "severity": int(severity), "seed": seed})
            frames.append(frame)
            acc = float((frame["pred"] == frame["label"]).mean())
            print(f"{corruption} {severity}: {100 * acc:.1f}% [{time.perf_counter() - t0:.1f}s]", file=sys.stderr)
    meta = {"run_id": run_dir.name, "run_config": cfg, "dataset": cfg["dataset"], "data_variant": cfg["data_variant"],
            "corruption_variant": CORRUPTION_VARIANT, "class_names": list(splits.class_names),
            "evaluation": {"name": "corruptions", "type": "corruptions", "corruptions": list(corruptions),
                           "severities": [int(s) for s in severities], "per_class": per_class, "seed": seed}}
    write_records(pd.concat(frames, ignore_index=True), out, meta)
    return out


def corruption_table(records: Sequence[str | Path]) -> pd.DataFrame:
    """Class x corruption x severity accuracy (with Wilson intervals) of every run."""
    from study.tables import identity

    blocks = []
    for path in records:
        frame, meta = read_records(path)
        ident = {**identity(meta["run_id"], meta["run_config"]), "corruption_variant": meta["corruption_variant"]}
        for (corruption, severity), part in frame.groupby(["corruption", "severity"], sort=False):
            table = class_accuracy(part, meta["class_names"])
            table.insert(0, "severity", severity)
            table.insert(0, "corruption", corruption)
            blocks.append(table.assign(**ident)[[*ident, *table.columns]])
    if not blocks:
        raise ValueError("no corruption records given")
    return pd.concat(blocks, ignore_index=True)
