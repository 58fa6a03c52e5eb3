"""What the bench measures beyond engine-against-reference: where a training step's time
goes (`--profile`), and the throughput of K training processes sharing one device
(`--concurrent K`), each against one process alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import torch

from study.config.spec import ConfigSpec
from study.config.types import RunConfig, parse
from study.data.batches import epoch_batches
from study.data.prepared import save_prepared
from study.data.splits import Splits
from study.io import atomic_write_text
from study.train.epoch import EpochPolicyState, augmented_batch
from study.train.optim import lr_table
from study.train.setup import resume_or_start, setup_run
from study.train.step import EpochTotals, TrainStep

CHECKOUT = Path(__file__).resolve().parents[2]


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def device_busy_us(events, on_device: bool) -> float:
    """Busy microseconds of the profiled steps, each kernel counted once. On CUDA the profiler
    gives a kernel's time twice: as the kernel's own event (device_type CUDA) and again as the
    self device time of the CPU operator that launched it; only the kernels are summed. On a
    CPU: the operators' self CPU time (self: a nested operator is not counted in its parent)."""
    from torch.autograd import DeviceType

    if on_device:
        return float(sum(e.self_device_time_total for e in events if e.device_type != DeviceType.CPU))
    return float(sum(e.self_cpu_time_total for e in events if e.device_type == DeviceType.CPU))


def profile_steps(cfg: Mapping, splits: Splits, run_dir: Path, device: str, compile_mode: str, out: Path,
                  steps: int = 4, warmup: int = 2) -> dict:
    """Profile `steps` training steps of run `cfg` (after `warmup` untimed ones, which also
    compile a compiled step); write the top operators table to `out` and return the summary."""
    state = setup_run(ConfigSpec.parse(cfg, "bench run config"), splits, run_dir, device)
    resume_or_start(state, None)
    step = TrainStep(state, compile_mode)
    tables = EpochPolicyState.of(state).tables(state)
    totals = EpochTotals.zeros(state.num_classes, state.dev)
    bs = state.run.batch_size
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
    busy_us = device_busy_us(events, on_device) / (1 if on_device else max(1, torch.get_num_threads()))
    summary = {"steps": steps, "batch_size": bs, "compile": step.mode, "host_seconds_per_step": wall / steps,
               "device_busy_fraction": busy_us / 1e6 / wall if wall > 0 else None,
               "busy_basis": "GPU kernel time (each kernel once) / wall" if on_device else
                             "CPU operator self time / threads / wall",
               "table": str(out)}
    atomic_write_text(out, f"# {state.run.method} training step, {steps} steps of batch {bs}, "
                           f"compile {step.mode}, device {state.dev}\n"
                           f"# host seconds per step {summary['host_seconds_per_step']:.4f}, device busy "
                           f"{summary['device_busy_fraction']:.1%} ({summary['busy_basis']})\n\n"
                      + events.table(sort_by=sort, row_limit=25) + "\n")
    return summary


def aggregate_windows(windows: list[dict]) -> dict:
    """Throughput of processes that each timed their own loop ({start, end, images}, one clock):
    all their images over the span from the earliest start to the latest end, so start-up and
    warm-up (before each start) are left out while any time the loops did not overlap counts."""
    start, end = min(w["start"] for w in windows), max(w["end"] for w in windows)
    images = sum(int(w["images"]) for w in windows)
    span = end - start
    return {"images": images, "span_seconds": span, "images_per_s": images / span if span > 0 else None,
            "loop_seconds": [w["end"] - w["start"] for w in windows]}


def _launch(n: int, tag: str, files: dict, tmp: Path, device: str, compile_mode: str, threads: int) -> dict:
    """n child processes (tools.bench.child) at once, each told it is one of n on the device
    (STUDY_GPU_SLOTS=n: 1/n of the GPU's memory) with `threads` threads; their timed windows
    and the wall time from the first launch to the last exit."""
    env = {**os.environ, "STUDY_GPU_SLOTS": str(n)}
    env.pop("STUDY_GPU_MEMORY_FRACTION", None)
    # The child is a module of the checkout's tools/, which no install puts on a path: name its root,
    # wherever the bench was started from.
    env["PYTHONPATH"] = os.pathsep.join([str(CHECKOUT), *filter(None, [env.get("PYTHONPATH")])])
    procs, outs = [], [tmp / f"{tag}-{i}.json" for i in range(n)]
    t0 = time.perf_counter()
    for i in range(n):
        args = [sys.executable, "-m", "tools.bench.child", "--data", str(files["data"]), "--run-config",
                str(files["config"]), "--run-dir", str(tmp / f"{tag}-{i}"), "--out", str(outs[i]), "--barrier",
                str(tmp / f"{tag}-barrier"), "--k", str(n), "--index", str(i), "--device", device,
                "--compile", compile_mode, "--threads", str(threads)]
        procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env))
    errors = []
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            errors.append((err.strip().splitlines() or ["(no output)"])[-1])
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{len(errors)} of {n} concurrent training processes failed: {errors[0]}")
    windows = [json.loads(o.read_text()) for o in outs]
    return {"windows": windows, "wall_seconds": wall, **aggregate_windows(windows)}


def concurrent_throughput(cfg: Mapping, splits: Splits, tmp: Path, device: str, compile_mode: str, k: int,
                          threads: int | None) -> dict:
    """Images per second of one training process alone, then of K at once (each its own run
    directory, the same config, threads / K threads each, 1/K of the GPU's memory), all on
    `device`. Each process times its own training epoch after a warm-up epoch, once all are
    ready (tools.bench.child); the aggregate is all their images over the span from the
    earliest start to the latest end of those timed epochs: process start-up is excluded."""
    files = {"data": tmp / "concurrent-data.pt", "config": tmp / "concurrent-config.json"}
    save_prepared(splits, files["data"])
    files["config"].write_text(json.dumps({**dict(cfg), "epochs": 2}))  # warm-up + timed epoch
    total = threads or os.cpu_count() or 1
    one = _launch(1, "one", files, tmp, device, compile_mode, total)
    many = _launch(k, "many", files, tmp, device, compile_mode, max(1, total // k))
    single, aggregate = one["images_per_s"], many["images_per_s"]
    method = parse(RunConfig, cfg, "bench run config").method
    return {"k": k, "method": method, "images_per_process": one["images"], "compile": compile_mode,
            "threads": {"one": total, "each_of_k": max(1, total // k)},
            "one_images_per_s": single, "aggregate_images_per_s": aggregate,
            "aggregate_over_one": aggregate / single if single and aggregate else None,
            "one_process": one, "k_processes": many,
            "k_processes_wall_seconds": many["wall_seconds"],
            "aggregate_with_startup_images_per_s": many["images"] / many["wall_seconds"],
            "timing": "each process times its second training epoch from inside (after start-up, data and "
                      "model set-up and a warm-up epoch, once all K are ready); aggregate = total images / "
                      "(latest end - earliest start of those timed epochs)"}
