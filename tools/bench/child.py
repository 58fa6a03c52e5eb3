"""One training process of `study bench --concurrent K`: the engine's training epoch of a run,
timed from inside the process so that start-up (Python, torch, the data, the model, the
compilation) is left out.

It sets up the run as `study train` does (threads, device and its GPU share, the prepared
data, setup_run, the compiled or eager step), trains one untimed warm-up epoch, waits until
all K processes are ready (a file per process in --barrier), then times the training batches
of the next epoch and writes {start, end, images} (wall-clock seconds since the epoch, the
same clock for every process of the machine) to --out.

    python -m tools.bench.child --data D --run-config C --run-dir R --out O --barrier B --k K --index I
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from study.io import atomic_write_text

BARRIER_TIMEOUT_S = 600


def _wait(barrier: Path, index: int, k: int) -> None:
    """Mark this process ready and wait for the other K - 1."""
    barrier.mkdir(parents=True, exist_ok=True)
    (barrier / f"ready-{index}").touch()
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while len(list(barrier.glob("ready-*"))) < k:
        if time.monotonic() > deadline:
            raise TimeoutError(f"bench child {index}: the other processes were not ready in {BARRIER_TIMEOUT_S} s")
        time.sleep(0.005)


def timed_epoch(args: argparse.Namespace) -> dict:
    from study.config.spec import ConfigSpec
    from study.data.prepared import load_prepared
    from study.device import select_device, set_threads
    from study.train.epoch import EpochPolicyState, train_epoch
    from study.train.setup import resume_or_start, setup_run
    from study.train.step import TrainStep

    set_threads(args.threads)
    dev = select_device(args.device)  # with its share of the GPU (STUDY_GPU_SLOTS, set by the parent)
    cfg = json.loads(Path(args.run_config).read_text())
    state = setup_run(ConfigSpec.parse(cfg, args.run_config), load_prepared(args.data), Path(args.run_dir), dev)
    resume_or_start(state, None)
    step = TrainStep(state, args.compile)
    train_epoch(state, step, 1, EpochPolicyState.of(state), False)  # warm-up (and compilation)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    _wait(Path(args.barrier), args.index, args.k)
    start = time.time()
    train_epoch(state, step, 2, EpochPolicyState.of(state), False)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    end = time.time()
    return {"index": args.index, "start": start, "end": end, "images": int(state.x_train.shape[0]),
            "threads": torch.get_num_threads(), "device": str(dev)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.bench.child", description=__doc__)
    for name in ("--data", "--run-config", "--run-dir", "--out", "--barrier"):
        p.add_argument(name, required=True)
    p.add_argument("--k", type=int, default=1)
    p.add_argument("--index", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--compile", default="off")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args(argv)
    atomic_write_text(args.out, json.dumps(timed_epoch(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
