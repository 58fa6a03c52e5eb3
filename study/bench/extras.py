"""What the bench measures beyond engine-against-reference: where a training step's time
goes (`--profile`), and the throughput of K training processes sharing one device
(`--concurrent K`), each against one process alone."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import torch

from study.data.batches import epoch_batches
from study.data.prepared import save_prepared
from study.data.splits import Splits, stratified_subset
from study.io import atomic_write_text
from study.train.epoch import EpochPolicyState, augmented_batch
from study.train.optim import lr_table
from study.train.setup import resume_or_start, setup_run
from study.train.step import EpochTotals, TrainStep


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def profile_steps(cfg: Mapping, splits: Splits, run_dir: Path, device: str, compile_mode: str, out: Path,
                  steps: int = 4, warmup: int = 2) -> dict:
    """Profile `steps` training steps of run `cfg` (after `warmup` untimed ones, which also
    compile a compiled step); write the top operators table to `out` and return the summary."""
    state = setup_run(cfg, splits, run_dir, device)
    resume_or_start(state, None)
    step = TrainStep(state, compile_mode)
    tables = EpochPolicyState.of(state).tables(state)
    totals = EpochTotals.zeros(state.num_classes, state.dev)
    bs = int(cfg["batch_size"])
    # Full batches where there are any: the timed steps are the common shape.
    batches = epoch_batches(state.x_train.shape[0], bs, state.cpu_gen)
    batches = [b for b in batches if b.numel() == bs] or batches[:1]
    lrs = lr_table(state.scheduler, 0, warmup + steps, state.dev)

    def run(i: int) -> None:
        x, y = augmented_batch(state, batches[i % len(batches)].to(state.dev))
        step.fn(x, y, *step.draws(x, y), tables, lrs[i], totals)

    for i in range(warmup):
        run(i)
    _sync(state.dev)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if state.dev.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        t0 = time.perf_counter()
        for i in range(warmup, warmup + steps):
            run(i)
        _sync(state.dev)
        wall = time.perf_counter() - t0
    events = prof.key_averages()
    on_device = state.dev.type == "cuda"
    sort = "self_device_time_total" if on_device else "self_cpu_time_total"
    busy_us = sum(getattr(e, "self_device_time_total", 0) for e in events) if on_device else \
        sum(e.self_cpu_time_total for e in events) / max(1, torch.get_num_threads())
    summary = {"steps": steps, "batch_size": bs, "compile": step.mode, "host_seconds_per_step": wall / steps,
               "device_busy_fraction": busy_us / 1e6 / wall if wall > 0 else None,
               "busy_basis": "GPU kernel time / wall" if on_device else "CPU operator time / threads / wall",
               "table": str(out)}
    atomic_write_text(out, f"# {cfg['method']} training step, {steps} steps of batch {bs}, "
                           f"compile {step.mode}, device {state.dev}\n"
                           f"# host seconds per step {summary['host_seconds_per_step']:.4f}, device busy "
                           f"{summary['device_busy_fraction']:.1%} ({summary['busy_basis']})\n\n"
                      + events.table(sort_by=sort, row_limit=25) + "\n")
    return summary


def concurrent_throughput(cfg: Mapping, splits: Splits, tmp: Path, device: str, compile_mode: str, k: int,
                          threads: int | None) -> dict:
    """Images per second of one `study train` process alone, then of K at once (each its own
    run directory, the same config), all on `device`: wall time from start to the last exit,
    so start-up counts as it does in the pipeline."""
    data = tmp / "concurrent-data.pt"
    save_prepared(splits, data)
    config = tmp / "concurrent-config.json"
    config.write_text(json.dumps(dict(cfg)))

    def launch(n: int, tag: str) -> float:
        procs = []
        t0 = time.perf_counter()
        for i in range(n):
            args = [sys.executable, "-m", "study.cli", "train", "--data", str(data), "--run-dir",
                    str(tmp / f"{tag}-{i}"), "--run-config", f"@{config}", "--device", device,
                    "--compile", compile_mode, "--no-progress"]
            if threads:
                args += ["--threads", str(threads)]
            procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        for p in procs:
            _, err = p.communicate()
            if p.returncode != 0:
                raise RuntimeError(f"a concurrent training process failed: {err.strip().splitlines()[-1:]}")
        return time.perf_counter() - t0

    # the run's training subset, as setup_run takes it (the bench's configs hold out no validation)
    images = int(cfg["epochs"]) * stratified_subset(splits.train_y, cfg.get("train_per_class")).numel()
    one = launch(1, "one")
    many = launch(k, "many")
    single, aggregate = images / one, k * images / many
    return {"k": k, "method": cfg["method"], "images_per_process": images, "compile": compile_mode,
            "one_process_seconds": one, "k_processes_seconds": many, "one_images_per_s": single,
            "aggregate_images_per_s": aggregate, "aggregate_over_one": aggregate / single}

