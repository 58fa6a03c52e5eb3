"""Scheduler estimates (minutes, host memory) for training and evaluation jobs, from the model's
cost, the dataset's size and the attack's steps (each a row of its table: study.models.registry,
study.data.registry, study.config.evaluations), so a SLURM job asks for what it needs.

Costs are forward-pass GFLOPs at 32x32 input (each model's row of study.models.registry), checked
against `count_flops` by the tests, and
scale with the image area (every architecture ends in global pooling). The throughput is a
conservative sustained figure for one data-centre GPU; the safety factor covers slower cards.
A job that still runs out of time loses at most one epoch: the retry resumes from checkpoint.pt.
"""

from __future__ import annotations

import math

from study.config.evaluations import AnyEvaluation, evaluation_kind
from study.config.spec import require
from study.config.types import RunConfig, SyntheticData, ZooRunConfig
from study.data.registry import get_dataset_info
from study.models.registry import MODELS

# The sizes of a dataset whose row (study.data.registry) gives none: runs that do not subsample
# (train_per_class: null) are estimated from the row's full splits.
DEFAULT_TRAIN_SIZE = 100_000
DEFAULT_TEST_SIZE = 50_000
# sustained FLOP/s of one GPU on these small-image networks in the engine's default fp32
# (channels_last): an assumption, no GPU row of workflow/throughput.yaml measures it yet
GPU_FLOPS = 8e12
SAFETY = 2.0
MAX_MINUTES = 2880        # a typical cluster wall-time limit; longer runs continue on the retry
BACKWARD = 3.0            # forward + backward ~ 3 forward passes


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


def _minutes(flops: float, floor: int) -> int:
    return int(min(MAX_MINUTES, max(floor, math.ceil(SAFETY * flops / GPU_FLOPS / 60) + 5)))


def train_minutes(run: RunConfig) -> int:
    """Wall-time request of a training run: epochs x (train set x attack steps + per-epoch evaluation)."""
    require(run, RunConfig, "train_minutes")
    train, _, _, side = _facts(run)
    fwd = forward_gflops(run.model, side) * 1e9
    adversary = run.method_config.adversary
    steps = adversary.steps if adversary is not None else 0
    attack = run.epoch_eval.attack
    eval_steps = attack_steps(attack) if attack is not None else 0
    eval_images = run.epoch_eval.per_class * 10  # classes do not change the order of magnitude
    per_epoch = train * BACKWARD * (1 + steps) * fwd + eval_images * (1 + BACKWARD * eval_steps) * fwd
    return _minutes(run.epochs * per_epoch, floor=15)


def attack_steps(ev: AnyEvaluation) -> int:
    """Gradient (or query) steps per image of an evaluation, an upper bound for the scheduler:
    its kind's cost (the row's `steps`, study.config.evaluations); a shard of it is split from
    that total by the caller."""
    require(ev, AnyEvaluation, "attack_steps")
    return evaluation_kind(ev.type).steps(ev)


def evaluate_minutes(run: RunConfig | ZooRunConfig, ev: AnyEvaluation, shards: int = 1) -> int:
    require(run, (RunConfig, ZooRunConfig), "evaluate_minutes")
    require(ev, AnyEvaluation, "evaluate_minutes")
    _, test, _, side = _facts(run)
    if ev.test_per_class:
        test = min(test, ev.test_per_class * 100)
    test = math.ceil(test / shards)
    steps = attack_steps(ev)
    # a RobustBench zoo model (study.config.zoo): the upper bound of its dataset's row, which the
    # scheduler may overshoot
    gflops = (get_dataset_info(run.zoo.dataset).zoo_gflops if isinstance(run, ZooRunConfig)
              else forward_gflops(run.model, side))
    return _minutes(test * (1 + BACKWARD * steps) * gflops * 1e9, floor=10)


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
