"""Evaluate a trained run on CIFAR-10-C, per sample and per class, resumably: each
(corruption, severity) is written as a part file beside the output and skipped when the job
is run again.

The images come from the official archive (study.data.cifar10c) or are regenerated offline
(study.data.corruptions); `source` chooses: `official`, `regenerated`, or `auto` (official
when the archive is found and the run's test set is the official CIFAR-10 one, else
regenerated). Records and tables say which was used in `corruption_variant`."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import torch

from study.checkpoints import CHECKPOINT_FILES
from study.data.cifar10c import find_cifar10c, locate_cifar10c, read_cifar10c
from study.data.corruptions import check_image_size, corrupt
from study.data.download import file_checksums
from study.data.splits import Splits, stratified_subset
from study.evaluate.records import read_records, write_records
from study.predict import predict
from study.run_directory import load_trained_model, read_run_config

SOURCES = ("auto", "official", "regenerated")


def resolve_source(
    source: str, splits: Splits, raw_dir: str | Path = "data/raw", mirror: str | Path | None = None
) -> tuple[str, Path | None]:
    """(`official` and the verified archive) or (`regenerated`, None) for a requested source."""
    if source not in SOURCES:
        raise ValueError(f"corruption source must be one of {', '.join(SOURCES)}, got {source!r}")
    if source == "regenerated":
        return "regenerated", None
    if source == "auto":
        # The archive follows the official test-set order: other data (the JPEG variant is
        # grouped by class, synthetic data is not CIFAR) falls back to regenerated images.
        official_data = splits.meta.get("dataset") == "cifar10" and splits.meta.get("variant") == "official"
        if not official_data or locate_cifar10c(raw_dir, mirror) is None:
            return "regenerated", None
    # `official` may download it; a found but corrupt archive raises rather than falling back
    return "official", find_cifar10c(raw_dir, mirror)


def _official_images(archive: Path, corruption: str, severity: int, idx: torch.Tensor,
                     labels: torch.Tensor) -> torch.Tensor:
    x, archive_labels = read_cifar10c(archive, corruption, severity, idx)
    if not torch.equal(archive_labels, labels):
        # the indices only mean the same images if the prepared test set is in the official order
        raise ValueError(f"{archive}: labels of the chosen test images differ from the prepared test set's "
                         f"({int((archive_labels != labels).sum())} of {len(labels)}); the official archive "
                         "needs the official CIFAR-10 test set in its order (use --source regenerated otherwise)")
    return x


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
    device: str | torch.device = "cpu",
    source: str = "auto",
    raw_dir: str | Path = "data/raw",
    mirror: str | Path | None = None,
) -> Path:
    """Per-sample records (index, label, pred, corruption, severity) for every pair; the
    archive for `source` official/auto is looked for in `mirror`, then `raw_dir`."""
    run_dir, out = Path(run_dir), Path(out)
    check_image_size(corruptions, splits.test_x.shape[1:])
    variant, archive = resolve_source(source, splits, raw_dir, mirror)
    print(f"CIFAR-10-C images: {variant}" + (f" ({archive})" if archive else ""), file=sys.stderr)
    spec = read_run_config(run_dir)
    model, _ = load_trained_model(run_dir, device)
    model_sha256 = file_checksums(run_dir / CHECKPOINT_FILES["last"], ["sha256"])["sha256"]
    idx = stratified_subset(splits.test_y, per_class)
    images, labels = splits.test_x[idx], splits.test_y[idx]
    parts_dir = out.parent / f"{out.stem}.parts"
    frames = []
    for corruption in corruptions:
        for severity in severities:
            part = parts_dir / f"{corruption}-{severity}.parquet"
            if part.exists():
                done, done_meta = read_records(part, require=())  # a part's own metadata
                # reuse a part (of an interrupted job) only if it was made by the same model file for
                # the same samples, seed and images; a retrained model's parts are made again
                if (done["index"].tolist() == idx.tolist() and done_meta.get("seed") == seed
                        and done_meta.get("corruption_variant") == variant
                        and done_meta.get("model_sha256") == model_sha256):
                    frames.append(done)
                    continue
            t0 = time.perf_counter()
            if archive is not None:
                x = _official_images(archive, corruption, int(severity), idx, labels)
            else:
                x = corrupt(images, corruption, int(severity), seed=seed)
            pred = predict(model, x, labels, batch_size=batch_size, device=device).pred
            frame = pd.DataFrame({"index": idx.numpy(), "label": labels.numpy(), "pred": pred,
                                  "corruption": corruption, "severity": int(severity)})
            write_records(frame, part, {"corruption": corruption, "severity": int(severity), "seed": seed,
                                        "corruption_variant": variant, "model_sha256": model_sha256})
            frames.append(frame)
            acc = float((frame["pred"] == frame["label"]).mean())
            print(f"{corruption} {severity}: {100 * acc:.1f}% [{time.perf_counter() - t0:.1f}s]", file=sys.stderr)
    run = spec.config
    meta = {"run_id": run_dir.name, "run_config": spec.identity, "dataset": run.dataset,
            "data_variant": run.data_variant,
            "corruption_variant": variant, "class_names": list(splits.class_names),
            "evaluation": {"name": "corruptions", "type": "corruptions", "corruptions": list(corruptions),
                           "severities": [int(s) for s in severities], "per_class": per_class, "seed": seed,
                           "source": source}}
    write_records(pd.concat(frames, ignore_index=True), out, meta)
    return out


