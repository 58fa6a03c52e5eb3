"""Scheduler estimates (minutes, host memory) for training and evaluation jobs, from the model's
cost, the dataset's size and the attack's steps (each a row of its table: study.models.registry,
study.data.registry, study.config.evaluations), so a SLURM job asks for what it needs.

Costs are forward-pass GFLOPs at 32x32 input (each model's row of study.models.registry), checked
against `count_flops` by the tests, and
scale with the image area (every architecture ends in global pooling). The minutes are the price
study.cost gives the job on one H100 (the same FLOP convention and the same rows of
workflow/throughput.yaml, their provenance named there), times SAFETY, plus five minutes of start.
A job that still runs out of time loses at most one epoch: the retry resumes from checkpoint.pt.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

from study.config.evaluations import AnyEvaluation, evaluation_kind
from study.config.spec import require
from study.config.types import RunConfig, SyntheticData, ZooRunConfig
from study.data.registry import get_dataset_info
from study.models.registry import MODELS

# The sizes of a dataset whose row (study.data.registry) gives none: runs that do not subsample
# (train_per_class: null) are estimated from the row's full splits.
DEFAULT_TRAIN_SIZE = 100_000
DEFAULT_TEST_SIZE = 50_000
#: the device kind whose rows of the throughput table (study.cost) the requests are priced on
SLURM_DEVICE = "h100"
#: requests are SAFETY x the H100 price: a cluster's card may be slower than the H100 measured (an
#: A100 has about half its tensor throughput, a V100 a quarter), the rates of evaluations and of
#: bf16 are assumed rows, and the measured engine was the one before the step rewrite
SAFETY = 4.0
MAX_MINUTES = 2880        # a typical cluster wall-time limit; longer runs continue on the retry


def _facts(run: RunConfig | ZooRunConfig) -> tuple[int, int, int, int]:
    """(train images, test images, channels, side) of a run's data."""
    info = get_dataset_info(run.dataset)
    if run.dataset == "synthetic":
        # a zoo model evaluated on synthetic data holds no `synthetic` settings: their defaults
        syn = (run.synthetic if isinstance(run, RunConfig) else None) or SyntheticData()
        train = syn.train_per_class * info.num_classes
        test = syn.test_per_class * info.num_classes
        side = syn.image_size
    else:
        train = info.train_size if info.train_size is not None else DEFAULT_TRAIN_SIZE
        test = info.test_size if info.test_size is not None else DEFAULT_TEST_SIZE
        side = info.image_size
    if run.train_per_class:
        train = min(train, run.train_per_class * info.num_classes)
    return train, test, info.channels, side


def data_facts(run: RunConfig | ZooRunConfig) -> tuple[int, int, int, int]:
    """(train images, test images, channels, side) of a run's data (study.cost prices from them)."""
    return _facts(require(run, (RunConfig, ZooRunConfig), "data_facts"))


def forward_gflops(model: str, side: int) -> float:
    """Forward GFLOPs per image of `side` x `side` pixels: the model row's (study.models.registry) at 32x32,
    scaled with the image area."""
    if model not in MODELS:
        raise ValueError(f"no cost estimate for model {model!r}: it is no row of study.models.registry "
                         f"(known: {', '.join(sorted(MODELS))})")
    return MODELS[model].gflops_32 * (side / 32) ** 2


@functools.cache
def _table():  # noqa: ANN202 - study.cost.Throughput, imported late (study.cost imports this module)
    from study.cost import THROUGHPUT_TABLE, load_throughput

    return load_throughput(Path(__file__).resolve().parents[1] / THROUGHPUT_TABLE)


def _minutes(seconds: float, floor: int) -> int:
    return int(min(MAX_MINUTES, max(floor, math.ceil(SAFETY * seconds / 60) + 5)))


def train_minutes(run: RunConfig) -> int:
    """Wall-time request of a training run: SAFETY x its training job's price on SLURM_DEVICE
    (study.cost.train_work: its epochs and per-epoch evaluations, at the table's rates)."""
    from study.cost import train_work, work_seconds

    require(run, RunConfig, "train_minutes")
    seconds, _, _ = work_seconds(train_work(run), _table(), run.model, SLURM_DEVICE, run.precision)
    return _minutes(seconds, floor=15)


def attack_steps(ev: AnyEvaluation) -> int:
    """Gradient (or query) steps per image of an evaluation, an upper bound for the scheduler:
    its kind's cost (the row's `steps`, study.config.evaluations); a shard of it is split from
    that total by the caller."""
    require(ev, AnyEvaluation, "attack_steps")
    return evaluation_kind(ev.type).steps(ev)


def evaluate_minutes(run: RunConfig | ZooRunConfig, ev: AnyEvaluation, shards: int = 1) -> int:
    """Wall-time request of one evaluation (of one of `shards` shards): SAFETY x its price on
    SLURM_DEVICE, AutoAttack charged as every attack on every image (the scheduler's upper bound;
    study.cost prices its cascade)."""
    from study.cost import eval_work, work_seconds

    require(run, (RunConfig, ZooRunConfig), "evaluate_minutes")
    require(ev, AnyEvaluation, "evaluate_minutes")
    _, test, _, side = _facts(run)
    info = get_dataset_info(run.dataset)
    if ev.test_per_class:
        test = min(test, ev.test_per_class * info.num_classes)
    test = math.ceil(test / shards)
    zoo = isinstance(run, ZooRunConfig)
    # a RobustBench zoo model (study.config.zoo): the upper bound of its dataset's row, which the
    # scheduler may overshoot, priced at the rate of the largest model of the registry
    gflops = get_dataset_info(run.zoo.dataset).zoo_gflops if zoo else forward_gflops(run.model, side)
    model = max(MODELS, key=lambda m: MODELS[m].gflops_32) if zoo else run.model
    seconds, _, _ = work_seconds([eval_work(ev, test, gflops * 1e9)], _table(), model, SLURM_DEVICE)
    return _minutes(seconds, floor=10)


def mem_mb(run: RunConfig | ZooRunConfig, floor: int = 8000) -> int:
    """Host memory: the uint8 train and test sets (loaded, then copied to the device) plus the runtime."""
    train, test, channels, side = _facts(require(run, (RunConfig, ZooRunConfig), "mem_mb"))
    data_mb = (train + test) * channels * side * side / 2**20
    return int(max(floor, 6000 + 4 * data_mb))


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
