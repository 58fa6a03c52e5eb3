"""What a job computes and at which rate: the bench's FLOP convention and the throughput table,
read by the price of a plan (study.cost) and by the scheduler's requests (study.resources).

A job's work is a list of (useful FLOPs, bench task) pairs (tools/bench/peak.py's convention:
forward F from the model's row of study.models.registry, scaled with the image area; training 3F
per image, PGD-k training (2k+3)F, TRADES (2k+7)F, an evaluation (1+2s)F with s the attack's
gradient steps), each priced at a row of workflow/throughput.yaml for the model, task, device kind
and training precision. Every row names its provenance (the hardware, torch, the engine or commit,
the date) and its basis: `measured`, or `assumed` with the assumption and what it is derived from;
a row without them is refused (load_throughput), and a task without a row for the device kind is
an error, not a silent default. A model without a row of its own runs at the FLOP rate of the
model nearest in FLOPs (`scaled from FLOPs`); a bf16 run on a device kind without a bf16 row runs
at its fp32 row (bf16 is never slower where it runs).

AutoAttack is priced as its cascade runs (study.attacks.autoattack): the clean pass on every
image, then each attack on the share of images still robust when it starts, from per-sample
records (`broken_by`) where they exist, else from the expected accuracies of the kind of model
(EXPECTED_ACCURACY).

A job's bytes come from the model's size: a trained run's parameter count is its row's
(study.models.registry), a zoo model's the stated upper bound ZOO_PARAMETERS; its checkpoints
(checkpoint_bytes) are the disk the price counts, and the scheduler's memory request holds them.

Torch-free: Snakemake's DAG reads it through study.resources.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from study.config.evaluations import AnyEvaluation, AutoAttackEvaluation
from study.config.types import RunConfig, SyntheticData, ZooRunConfig
from study.config.yamlfile import load_yaml
from study.data.registry import get_dataset_info
from study.models.registry import MODELS, model_spec

THROUGHPUT_TABLE = "workflow/throughput.yaml"
MEASURED, TABLE, SCALED, ASSUMED = "measured", "table", "scaled from FLOPs", "assumed"
#: a row's basis: measured by a bench, or an assumption (named in its `assumption`)
ROW_BASES = ("measured", "assumed")
#: the provenance every row names (load_throughput refuses a row without it)
PROVENANCE = ("hardware", "torch", "date")


# The sizes of a dataset whose row (study.data.registry) gives none: runs that do not subsample
# (train_per_class: null) are estimated from the row's full splits.
DEFAULT_TRAIN_SIZE = 100_000
DEFAULT_TEST_SIZE = 50_000

def _facts(run: RunConfig | ZooRunConfig) -> tuple[int, int, int, int]:
    """(train images, test images, channels, side) of a run's data."""
    info = get_dataset_info(run.dataset)
    train: int
    side: int
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
    return _facts(run)


def forward_gflops(model: str, side: int) -> float:
    """Forward GFLOPs per image of `side` x `side` pixels: the model row's (study.models.registry) at 32x32,
    scaled with the image area."""
    return model_spec(model).gflops_32 * (side / 32) ** 2


#: Parameters of a model of the zoo (RobustBench), whose size no row of study.models.registry
#: states: an upper bound, the largest model RobustBench lists, WideResNet-94-16 (366M
#: parameters, Wang et al. 2023, "Better Diffusion Models Further Improve Adversarial Training"),
#: as study.data.registry's `zoo_gflops` bounds its forward cost.
ZOO_PARAMETERS = 370_000_000
#: bytes of a parameter, and of each tensor of the optimizer's state, in fp32
PARAMETER_BYTES = 4


def model_parameters(run: RunConfig | ZooRunConfig) -> int:
    """Parameters of a run's model: a trained run's from its model's row of study.models.registry
    (the run-config check admits no model without one; `model_spec` names the valid ones), a zoo
    model's the upper bound ZOO_PARAMETERS."""
    if isinstance(run, ZooRunConfig):
        return ZOO_PARAMETERS
    return model_spec(run.model).parameters


def checkpoint_bytes(run: RunConfig | ZooRunConfig) -> int:
    """Bytes of a run's checkpoint files: a zoo model's weights; a trained run's model.pt,
    checkpoint.pt (weights and momentum), and each extra checkpoint it keeps (model_best.pt with a
    validation split, model_published.pt with the published protocol)."""
    weights = model_parameters(run) * PARAMETER_BYTES
    if isinstance(run, ZooRunConfig):
        return weights
    kept = 1 + 2 + (run.validation is not None) + (run.published_selection is not None)
    return weights * kept


def evaluated_model(run: RunConfig | ZooRunConfig) -> tuple[str, float]:
    """(the model whose rows of the throughput table price a run's evaluations, forward FLOPs per
    test image). A zoo model: its dataset's upper bound (study.data.registry's `zoo_gflops`) at
    the rate of the registry's largest model in FLOPs; the scheduler may overshoot."""
    _, _, _, side = data_facts(run)
    if isinstance(run, ZooRunConfig):
        largest = max(MODELS, key=lambda m: MODELS[m].gflops_32)
        return largest, get_dataset_info(run.zoo.dataset).zoo_gflops * 1e9
    return run.model, forward_gflops(run.model, side) * 1e9


def attack_steps(ev: AnyEvaluation) -> int:
    """Gradient (or query) steps per image of an evaluation, an upper bound for the scheduler:
    its kind's cost (the row's `steps`, study.config.evaluations); a shard of it is split from
    that total by the caller."""
    return ev.kind.steps(ev)


@dataclass(frozen=True)
class Row:
    """One measured throughput: images/s and useful GFLOP/s of a bench task, and who measured it."""

    model: str
    task: str
    device: str
    images_per_s: float
    gflop_per_s: float
    hardware: str
    torch: str
    date: str
    commit: str = ""
    note: str = ""
    #: the engine measured, where it is not the commit's (e.g. the engine before the step rewrite)
    engine: str = ""
    #: the training precision the row's rate is for (evaluations are always fp32)
    precision: str = "fp32"
    basis: str = "measured"
    #: for an assumed row: what is assumed, and from which measurement
    assumption: str = ""

    def provenance(self) -> str:
        """One line: which rate this is and where it comes from."""
        what = (f"{self.model} {self.task} on {self.device} ({self.precision}): {self.gflop_per_s:,.0f} GFLOP/s, "
                f"{self.basis}")
        source = f"{self.hardware}, torch {self.torch}, {self.engine or 'commit ' + self.commit}, {self.date}"
        return f"{what}: {self.assumption + '; ' if self.assumption else ''}{source}"


@dataclass(frozen=True)
class Throughput:
    rows: tuple[Row, ...]
    job_start_s: Mapping[str, float]

    def row(self, model: str, task: str, device: str, precision: str = "fp32") -> tuple[Row, str]:
        """(the row that prices `task` for `model` on `device` in `precision`, basis): the model's
        own row, else the row of the model nearest in forward FLOPs; a bf16 task without a bf16
        row takes the fp32 one. An assumed row's basis is ASSUMED whatever the model."""
        rows = [r for r in self.rows if r.task == task and r.device == device]
        if not rows:
            raise ValueError(f"the throughput table has no {device} row for task {task!r}; rows exist for "
                             f"{', '.join(sorted({r.device for r in self.rows if r.task == task})) or 'no device'}")
        same = [r for r in rows if r.precision == precision] or [r for r in rows if r.precision == "fp32"] or rows
        exact = [r for r in same if r.model == model]
        if exact:
            best = max(exact, key=lambda r: r.gflop_per_s)
            return best, ASSUMED if best.basis == "assumed" else TABLE
        # every priced model is a row of the registry (a zoo model is priced as the largest: evaluated_model)
        size = math.log(model_spec(model).gflops_32)
        near = min(same, key=lambda r: abs(math.log(MODELS[r.model].gflops_32) - size))
        return near, ASSUMED if near.basis == "assumed" else SCALED

    def rate(self, model: str, task: str, device: str, precision: str = "fp32") -> tuple[float, str]:
        """(useful FLOP/s, basis) of `task` for `model` on `device` (Throughput.row)."""
        row, basis = self.row(model, task, device, precision)
        return row.gflop_per_s * 1e9, basis


def check_row(row: Row, where: str) -> None:
    """A ValueError line where a row lacks its provenance or names an unknown model, basis or precision."""
    name = f"{where}: row {row.model} {row.task} {row.device}"
    if row.model not in MODELS:
        raise ValueError(f"{where}: row of unknown model {row.model!r}")
    missing = [k for k in PROVENANCE if not str(getattr(row, k)).strip()]
    if not (row.commit.strip() or row.engine.strip()):
        missing.append("commit or engine")
    if missing:
        raise ValueError(f"{name} has no {', '.join(missing)}: every rate names its provenance")
    if row.basis not in ROW_BASES:
        raise ValueError(f"{name}: unknown basis {row.basis!r}; valid: {', '.join(ROW_BASES)}")
    if row.basis == "assumed" and not row.assumption.strip():
        raise ValueError(f"{name} is assumed but names no assumption")
    if row.precision not in ("fp32", "bf16"):
        raise ValueError(f"{name}: unknown precision {row.precision!r}; valid: fp32, bf16")
    if not (row.gflop_per_s > 0 and row.images_per_s > 0):
        raise ValueError(f"{name}: rates must be positive, got {row.gflop_per_s} GFLOP/s, {row.images_per_s} img/s")


def load_throughput(path: str | Path = THROUGHPUT_TABLE) -> Throughput:
    data = load_yaml(Path(path).read_text(), str(path))
    rows = tuple(Row(**row) for row in data["rows"])
    for row in rows:
        check_row(row, str(path))
    return Throughput(rows, dict(data["job_start_s"]))


def validation_images(cfg: RunConfig, train: int) -> int:
    """Images a run holds out of its `train` training images for its validation split."""
    val = cfg.validation
    if val is None:
        return 0
    if hasattr(val, "fraction"):
        return round(train * val.fraction)
    return min(train, val.per_class * get_dataset_info(cfg.dataset).num_classes)


def train_work(cfg: RunConfig, train: int | None = None) -> list[tuple[float, str]]:
    """(FLOPs, bench task) of a run's training on `train` images (default: its data's): its
    epochs on the images its validation split leaves, and each epoch's class-wise evaluations
    (study.train.records.class_accuracy: a clean pass, then the attack's (1 + 2s)F): of
    `epoch_eval.per_class` test images per class, and of the validation split, once more for the
    averaged model where the method averages weights (an upper bound: from the first epoch).
    Not priced: WAT's extra validation losses."""
    images, _, _, side = data_facts(cfg)
    train = images if train is None else train
    held = validation_images(cfg, train)
    forward = forward_gflops(cfg.model, side) * 1e9
    task, per_image = _train_task(cfg)
    work = [(cfg.epochs * (train - held) * per_image * forward, task)]

    def class_accuracy(images: int, attack: AnyEvaluation | None) -> float:
        return images * (1 + (1 + 2 * attack_steps(attack) if attack is not None else 0)) * forward

    per_epoch = 0.0
    if cfg.epoch_eval.per_class:
        per_epoch += class_accuracy(cfg.epoch_eval.per_class * get_dataset_info(cfg.dataset).num_classes,
                                    cfg.epoch_eval.attack)
    if held:
        models = 2 if cfg.method_config.averaging is not None else 1
        per_epoch += models * class_accuracy(held, cfg.epoch_eval.validation_attack or cfg.epoch_eval.attack)
    if per_epoch:
        work.append((cfg.epochs * per_epoch, "pgd20_eval"))
    return work


TRAIN_TASKS = ("standard_epoch", "pgd10_at_epoch", "trades_epoch")


def _train_task(run: RunConfig) -> tuple[str, int]:
    adversary = run.method_config.adversary
    steps = adversary.steps if adversary is not None else 0
    loss = run.method_config.loss
    if loss is not None and loss.type == "trades":
        return "trades_epoch", 2 * steps + 7
    return ("pgd10_at_epoch", 2 * steps + 3) if steps else ("standard_epoch", 3)


#: AutoAttack's attacks in the order its cascade runs them (study.attacks.autoattack: the
#: standard version's list; a custom version runs its `attacks` in the order given)
STANDARD_ATTACKS = ("apgd-ce", "apgd-t", "fab-t", "square")

#: What a model of each kind is expected to reach where no record of its own exists: (clean
#: accuracy, robust accuracy, source). AutoAttack's first attack starts on the clean-correct
#: share, every later one on the robust share: an upper bound, as the later attacks break a few
#: more. Adversarial: CFA's Table 1 AT row at the last checkpoint (study.published, PreAct-ResNet-18,
#: CIFAR-10); standard training: no robustness under an L-inf 8/255 attack (Xu et al. 2021, Fig. 1(a))
#: and the clean accuracy of a standard PreAct-ResNet-18 (about 94%).
EXPECTED_ACCURACY = {
    "adversarial": (0.841, 0.430, "CFA Table 1's AT at the last checkpoint: clean 84.1%, AutoAttack 43.0%"),
    "standard": (0.94, 0.0, "a standard CIFAR-10 model: clean about 94%, robust 0% (Xu et al. 2021, Fig. 1(a))"),
}


@dataclass(frozen=True)
class CascadeShares:
    """The share of a test set each attack of an AutoAttack cascade starts on, and its source."""

    shares: tuple[tuple[str, float], ...]
    source: str

    def describe(self) -> str:
        return ", ".join(f"{a} on {100 * f:.0f}%" for a, f in self.shares) + f" ({self.source})"


def cascade_attacks(ev: AutoAttackEvaluation) -> tuple[str, ...]:
    return tuple(ev.attacks) if ev.attacks else STANDARD_ATTACKS


def attack_steps_each(ev: AutoAttackEvaluation) -> dict[str, int]:
    """The gradient steps (a query a third of one) of each attack of the cascade on one image,
    as study.config.evaluations counts their sum (attack_steps)."""
    iters, targets, queries = ev.iterations, ev.targets, ev.queries
    per = {"apgd-ce": iters, "apgd-dlr": iters, "apgd-t": iters * targets, "fab": iters,
           "fab-t": iters * targets, "square": queries // 3}
    return {a: per[a] for a in cascade_attacks(ev)}


def shares_from_records(ev: AutoAttackEvaluation, broken_by: Sequence[str], source: str) -> CascadeShares:
    """Each attack's starting share from per-sample `broken_by` ('clean', the attack that broke
    the sample, or '' if robust): the samples not yet broken when it starts."""
    if len(broken_by) == 0:
        raise ValueError(f"{source}: no records to take the cascade's shares from")
    broken_by = list(broken_by)
    attacks = cascade_attacks(ev)
    unknown = sorted({b for b in broken_by} - {"clean", "", *attacks})
    if unknown:
        raise ValueError(f"{source}: broken_by values {unknown} are no attack of this cascade; valid: "
                         f"clean, '', {', '.join(attacks)}")
    done, shares = {"clean"}, []
    for attack in attacks:
        shares.append((attack, sum(b not in done for b in broken_by) / len(broken_by)))
        done.add(attack)
    return CascadeShares(tuple(shares), source)


def expected_shares(ev: AutoAttackEvaluation, kind: str) -> CascadeShares:
    """Each attack's starting share where no record exists: the first attack on the expected
    clean accuracy, the later ones on the expected robust accuracy (EXPECTED_ACCURACY)."""
    if kind not in EXPECTED_ACCURACY:
        raise ValueError(f"unknown kind of model {kind!r}; valid: {', '.join(EXPECTED_ACCURACY)}")
    clean, robust, source = EXPECTED_ACCURACY[kind]
    attacks = cascade_attacks(ev)
    return CascadeShares(tuple((a, clean if i == 0 else robust) for i, a in enumerate(attacks)),
                         f"expected: {source}")


def autoattack_forwards(ev: AutoAttackEvaluation, shares: CascadeShares) -> float:
    """Forward-equivalents per test image of the cascade: the clean pass, then two per step of
    each attack on its starting share."""
    steps = attack_steps_each(ev)
    return 1 + 2 * sum(steps[a] * share for a, share in shares.shares)


def eval_work(ev: AnyEvaluation, images: int, forward: float,
               shares: CascadeShares | None = None) -> tuple[float, str]:
    """(FLOPs, bench task) of an evaluation of `images` images: a forward and two per attack step
    (AutoAttack: per step of each attack on its share of the images, `shares`)."""
    if isinstance(ev, AutoAttackEvaluation):
        per_image = autoattack_forwards(ev, shares) if shares is not None else 1 + 2 * attack_steps(ev)
        return images * per_image * forward, "autoattack_eval"
    return images * (1 + 2 * attack_steps(ev)) * forward, "pgd20_eval"


def work_seconds(work: Sequence[tuple[float, str]], table: Throughput, model: str, device: str,
                 precision: str = "fp32") -> tuple[float, str, tuple[Row, ...]]:
    """(seconds, weakest basis, rows used) of `work`, (FLOPs, bench task) pairs, on `device`, no
    process start: the training tasks in `precision`, the evaluations in fp32 (study.predict)."""
    total, kinds, rows = 0.0, [], []
    for flops, task in work:
        row, kind = table.row(model, task, device, precision if task in TRAIN_TASKS else "fp32")
        total += flops / (row.gflop_per_s * 1e9)
        kinds.append(kind)
        rows.append(row)
    return total, next((k for k in (ASSUMED, SCALED) if k in kinds), TABLE), tuple(dict.fromkeys(rows))


