"""Scheduler estimates (minutes, host memory) for training and evaluation jobs, from the model's
cost, the dataset's size and the attack's steps, so a SLURM job asks for what it needs.

Costs are forward-pass GFLOPs at 32x32 input (each model's row of study.models.registry), checked
against `count_flops` by the tests, and
scale with the image area (every architecture ends in global pooling). The throughput is a
conservative sustained figure for one data-centre GPU; the safety factor covers slower cards.
A job that still runs out of time loses at most one epoch: the retry resumes from checkpoint.pt.
"""

from __future__ import annotations

import math

from study.config.spec import require
from study.config.types import (
    AnyEvaluation,
    AutoAttackEvaluation,
    PgdEvaluation,
    RunConfig,
    SquareEvaluation,
    SyntheticData,
    ZooRunConfig,
)
from study.models.registry import MODELS

# Full training-set sizes (images), for runs that do not subsample (train_per_class: null).
TRAIN_SIZES = {"mnist": 60_000, "svhn": 73_257, "cifar10": 50_000, "cifar100": 50_000, "tinyimagenet": 100_000}
TEST_SIZES = {"mnist": 10_000, "svhn": 26_032, "cifar10": 10_000, "cifar100": 10_000, "tinyimagenet": 10_000}

# RobustBench zoo models (study.config.zoo) at their dataset's resolution: an upper bound
# (CIFAR: WideResNet-94-16 is ~55 GFLOPs; ImageNet: Swin-L ~35), which the scheduler may overshoot.
ZOO_GFLOPS = {"cifar10": 60.0, "cifar100": 60.0, "imagenet": 40.0}
GPU_FLOPS = 8e12          # sustained FLOP/s of one GPU on these small-image networks (bf16 autocast)
SAFETY = 2.0
MAX_MINUTES = 2880        # a typical cluster wall-time limit; longer runs continue on the retry
BACKWARD = 3.0            # forward + backward ~ 3 forward passes


def _facts(run: RunConfig | ZooRunConfig) -> tuple[int, int, int, int]:
    """(train images, test images, channels, side) of a run's data."""
    from study.data.registry import get_dataset_info

    info = get_dataset_info(run.dataset)
    if run.dataset == "synthetic":
        # a zoo model evaluated on synthetic data holds no `synthetic` settings: their defaults
        syn = (run.synthetic if isinstance(run, RunConfig) else None) or SyntheticData()
        train = syn.train_per_class * info.num_classes
        test = syn.test_per_class * info.num_classes
        side = syn.image_size
    else:
        train = TRAIN_SIZES.get(run.dataset, 100_000)
        test = TEST_SIZES.get(run.dataset, 50_000)
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
    AutoAttack's standard version is APGD-CE (100), APGD-T (9 targets x 100), FAB-T (9 x 100)
    and Square (5000 queries, forward only, counted as a third of a step); a shard of it is
    split from that total by the caller."""
    require(ev, AnyEvaluation, "attack_steps")
    if isinstance(ev, AutoAttackEvaluation):
        iters = ev.iterations
        per = {"apgd-ce": iters, "apgd-dlr": iters, "apgd-t": iters * ev.targets, "fab": iters,
               "fab-t": iters * ev.targets, "square": ev.queries // 3}
        return sum(per[a] for a in ev.attacks or ["apgd-ce", "apgd-t", "fab-t", "square"])
    if isinstance(ev, SquareEvaluation):
        return ev.queries // 3
    if isinstance(ev, PgdEvaluation):
        return ev.steps * ev.restarts
    return 0


def evaluate_minutes(run: RunConfig | ZooRunConfig, ev: AnyEvaluation, shards: int = 1) -> int:
    require(run, (RunConfig, ZooRunConfig), "evaluate_minutes")
    require(ev, AnyEvaluation, "evaluate_minutes")
    _, test, _, side = _facts(run)
    if ev.test_per_class:
        test = min(test, ev.test_per_class * 100)
    test = math.ceil(test / shards)
    steps = attack_steps(ev)
    gflops = (ZOO_GFLOPS.get(run.zoo.dataset, 60.0) if isinstance(run, ZooRunConfig)
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
