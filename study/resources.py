"""Scheduler requests (minutes, host memory) of training and evaluation jobs, derived from the
price of study.workload, the one cost model study.cost prices a plan with: the model's row of
study.models.registry (its forward GFLOPs at 32x32, scaled with the image area, and its parameter
count), the dataset's size and the attack's steps (each a row of its table: study.data.registry,
study.config.evaluations), so a SLURM job asks for what it needs.

The minutes are the job's work priced on one H100 (the FLOP convention and the rows of
workflow/throughput.yaml, their provenance named there) times SAFETY, plus five minutes of start;
AutoAttack is charged as every attack on every image, the cascade's upper bound (the price takes
its expected shares). A job that still runs out of time loses at most one epoch: the retry
resumes from checkpoint.pt.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

from study.config.evaluations import AnyEvaluation
from study.config.types import RunConfig, ZooRunConfig
from study.data.registry import get_dataset_info
from study.workload import (
    PARAMETER_BYTES,
    THROUGHPUT_TABLE,
    Throughput,
    data_facts,
    eval_work,
    evaluated_model,
    load_throughput,
    model_parameters,
    train_work,
    work_seconds,
)

#: the device kind whose rows of the throughput table (study.workload) the requests are priced on
SLURM_DEVICE = "h100"
#: requests are SAFETY x the H100 price: a cluster's card may be slower than the H100 measured (an
#: A100 has about half its tensor throughput, a V100 a quarter), the rates of evaluations and of
#: bf16 are assumed rows, and the measured engine was the one before the step rewrite
SAFETY = 4.0
MAX_MINUTES = 2880        # a typical cluster wall-time limit; longer runs continue on the retry


@functools.cache
def _table() -> Throughput:
    return load_throughput(Path(__file__).resolve().parents[1] / THROUGHPUT_TABLE)


def _minutes(seconds: float, floor: int) -> int:
    return int(min(MAX_MINUTES, max(floor, math.ceil(SAFETY * seconds / 60) + 5)))


def train_minutes(run: RunConfig) -> int:
    """Wall-time request of a training run: SAFETY x its training job's price on SLURM_DEVICE
    (study.cost.train_work: its epochs and per-epoch evaluations, at the table's rates)."""
    seconds, _, _ = work_seconds(train_work(run), _table(), run.model, SLURM_DEVICE, run.precision)
    return _minutes(seconds, floor=15)


def evaluate_minutes(run: RunConfig | ZooRunConfig, ev: AnyEvaluation, shards: int = 1) -> int:
    """Wall-time request of one evaluation (of one of `shards` shards): SAFETY x its price on
    SLURM_DEVICE, AutoAttack charged as every attack on every image (the scheduler's upper bound;
    study.cost prices its cascade)."""
    _, test, _, _ = data_facts(run)
    if ev.test_per_class:
        test = min(test, ev.test_per_class * get_dataset_info(run.dataset).num_classes)
    test = math.ceil(test / shards)
    model, forward = evaluated_model(run)
    seconds, _, _ = work_seconds([eval_work(ev, test, forward)], _table(), model, SLURM_DEVICE)
    return _minutes(seconds, floor=10)


#: host bytes of a model job per parameter of its model: its weights and the optimizer's momentum
#: (PARAMETER_BYTES each), twice: the live state and the copy a checkpoint is saved or loaded from
HOST_BYTES_PER_PARAMETER = 2 * 2 * PARAMETER_BYTES


def mem_mb(run: RunConfig | ZooRunConfig, floor: int = 8000) -> int:
    """Host memory: the uint8 train and test sets (loaded, then copied to the device), the model's
    state (HOST_BYTES_PER_PARAMETER of each of its parameters, study.workload.model_parameters:
    its row's count, a zoo model's upper bound) plus the runtime."""
    train, test, channels, side = data_facts(run)
    data_mb = (train + test) * channels * side * side / 2**20
    model_mb = model_parameters(run) * HOST_BYTES_PER_PARAMETER / 2**20
    return int(max(floor, 6000 + 4 * data_mb + model_mb))


#: Threads of a model job when Snakemake was given no core count (a cluster executor: each job
#: gets its own node share, cpus_per_task = threads).
CLUSTER_MODEL_THREADS = 8


def slot_threads(cores: int | None, gpu_slots: int | None) -> int:
    """Threads of one model job: the cores Snakemake may use (--cores) split over the jobs that
    share the GPU at a time (the profile's gpu_slots), so that `gpu_slots: K` runs K jobs at once
    instead of as many as cores / threads allows; at least 1. No core count (a cluster
    executor): CLUSTER_MODEL_THREADS. A profile's max-threads still caps the result."""
    if cores is None:
        return CLUSTER_MODEL_THREADS
    slots = gpu_slots if isinstance(gpu_slots, int) and gpu_slots > 0 else 1
    return max(1, int(cores) // slots)
