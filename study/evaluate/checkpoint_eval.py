"""Evaluate a checkpoint of a run (or a zoo model) on the test set and write its per-sample records."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from study.config.spec import ConfigSpec, EvaluationSpec
from study.data.splits import Splits, stratified_subset
from study.device import describe, eval_batch_size, select_device, set_cudnn_benchmark
from study.evaluate.records import records_frame, write_records
from study.predict import predict
from study.record_names import record_name
from study.run_directory import load_trained_model, read_run_config


def evaluate_checkpoint(
    run_dir: str | Path,
    splits: Splits,
    jobs: Sequence[tuple[EvaluationSpec, str | Path]],
    *,
    device: str | torch.device = "auto",
    progress: bool = True,
    shard: tuple[int, int] | None = None,
    checkpoint: str = "last",
) -> list[Path]:
    """Classify the test set (or its first `test_per_class` per class) clean or under attack,
    with the run's `last` model, its `best` on validation (evaluation named `<name>@best`) or
    its `published` (the published protocol on the test subset; `<name>@published`), for each
    (evaluation, out) in `jobs` with one load of the checkpoint (the workflow's evaluate job of
    a run: all its evaluations in one process).

    `shard` (i, n): only the i-th of n contiguous parts of those samples (0 <= i < n), with
    its own attack seed; `study merge-shards` joins the parts into one record."""
    run_dir = Path(run_dir)
    spec = read_run_config(run_dir)
    run = spec.config
    # splits.meta: the data file's record
    if (splits.meta.get("dataset"), splits.meta.get("variant")) != (run.dataset, run.data_variant):
        raise ValueError(
            f"{run_dir.name} was trained on {run.dataset} ({run.data_variant}) but the data given is "
            f"{splits.meta.get('dataset')} ({splits.meta.get('variant')})"
        )
    dev = select_device(device)
    model, _ = load_trained_model(run_dir, dev, checkpoint=checkpoint)
    written = []
    for evaluation, out in jobs:
        job = evaluation
        written.append(evaluate_model(model, splits, job.at(checkpoint, record_name(job.name, checkpoint)), out,
                                      run_id=run_dir.name, run_config=spec, device=dev, progress=progress,
                                      shard=shard))
    return written


def evaluate_model(
    model: nn.Module,
    splits: Splits,
    evaluation: EvaluationSpec,
    out: str | Path,
    *,
    run_id: str,
    run_config: ConfigSpec,
    device: torch.device,
    progress: bool = True,
    shard: tuple[int, int] | None = None,
) -> Path:
    """Per-sample records of `model` (already on `device`) on the test set (or its first
    `test_per_class` per class), clean or under attack; shared by trained runs and
    zoo models (study.config.zoo), so both write the same records."""
    out = Path(out)
    job = evaluation.config
    idx = stratified_subset(splits.test_y, job.test_per_class)
    seed = job.seed
    if shard is not None:
        i, n = shard
        if not 0 <= i < n:
            raise ValueError(f"shard {i} of {n}: the shard index must be in 0..{n - 1}")
        idx = idx.tensor_split(n)[i]
        seed = seed * 100003 + i  # distinct random starts per shard, fixed for a seed
    images, labels = splits.test_x[idx], splits.test_y[idx]
    device = torch.device(device)
    cudnn_benchmark = set_cudnn_benchmark(device)
    # as training runs it; predict's inputs too (torch's stubs of Module.to omit memory_format, which it takes)
    model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    t0 = time.perf_counter()
    preds = predict(
        model, images, labels,
        attack=job, batch_size=eval_batch_size(job.batch_size, device),
        device=device,
        seed=seed, keep_logits=True, progress=progress,
        desc=f"{job.name} {run_id}",
    )
    seconds = time.perf_counter() - t0
    frame = records_frame(idx.numpy(), labels.numpy(), preds.pred, preds.logits, preds.broken_by)
    meta = {
        "run_id": run_id,
        # canonical forms: the record names the run and the job as config.json and the run key do
        "run_config": run_config.identity,
        "evaluation": evaluation.identity,
        "dataset": run_config.config.dataset,
        "data_variant": run_config.config.data_variant,
        "class_names": list(splits.class_names),
        "n": int(len(frame)),
        "seconds": seconds,
        "device": describe(device),
        "cudnn_benchmark": cudnn_benchmark,
        "shard": list(shard) if shard is not None else None,
    }
    write_records(frame, out, meta)
    acc = float((frame["pred"] == frame["label"]).mean()) if len(frame) else float("nan")
    print(f"{job.name} on {run_id}: {100 * acc:.2f}% of {len(frame)} samples "
          f"[{seconds:.1f}s]", file=sys.stderr)
    return out
