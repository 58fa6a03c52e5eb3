"""Setting up a training run: its data on the device, its model, optimizer, schedule,
adversary and policies, and (when a checkpoint exists) the state it resumes from."""

from __future__ import annotations

import copy
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from study.checkpoints import CHECKPOINT_FILES
from study.config.spec import ConfigSpec, run_key
from study.config.types import RunConfig
from study.data.splits import Splits, stratified_subset
from study.device import describe, select_device, set_cudnn_benchmark
from study.io import atomic_write_json, atomic_write_text, load_torch
from study.models.registry import build_model
from study.run_directory import (
    CONFIG_FILE,
    EPOCHS_FILE,
    KEPT_FILES,
    STANDS_IN_FOR,
    STATE_FILE,
    VALIDATION_FILE,
    stand_in_error,
)
from study.train.adversary import Adversary
from study.train.checkpoint import load_checkpoint, restore_rng, tensor_digest
from study.train.optim import LrSchedule, OptimizerState, build_optimizer, build_scheduler
from study.train.policies import FixedEpsilon, Policies, build_policies
from study.train.published_protocol import choose_published
from study.train.validation import validation_split


@dataclass
class RunState:
    """Everything the epoch loop reads and changes; what `checkpoint.pt` saves of it is
    enough to continue bit for bit."""

    spec: ConfigSpec  # the run config: `identity` as given (its hash is the run key of every file written)
    run_dir: Path
    dev: torch.device
    class_names: list[str]
    x_train: torch.Tensor  # uint8, on the device
    y_train: torch.Tensor
    x_eval: torch.Tensor  # the fixed test subset of the per-epoch records (CPU)
    y_eval: torch.Tensor
    x_val: torch.Tensor | None  # the held-out validation split (CPU), if the protocol has one
    y_val: torch.Tensor | None
    model: torch.nn.Module
    arch: dict
    optimizer: OptimizerState
    scheduler: LrSchedule
    adversary: Adversary
    policies: Policies
    cpu_gen: torch.Generator
    dev_gen: torch.Generator
    shadow: torch.nn.Module | None = None  # holds the averaged weights, for evaluation
    records: list[dict] = field(default_factory=list)
    timings: list[float] = field(default_factory=list)
    loop_timings: list[float] = field(default_factory=list)  # the training batches of each epoch
    start_epoch: int = 0
    best: dict = field(default_factory=lambda: {"score": float("-inf"), "epoch": 0})
    #: sha256 of what the weights are trained from besides the config (input_digests), kept in checkpoint.pt
    inputs: dict = field(default_factory=dict)
    #: the machine the run is trained on (study.provenance and the device's name), as meta.json keeps it
    machine: dict = field(default_factory=dict)
    #: meta.json's `compile` of the process that trained the last epoch (TrainStep.record)
    compiled: dict | None = None

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def run(self) -> RunConfig:
        """The run config, typed: what the training reads (a trained run's: `train` checked it)."""
        return self.spec.trained

    @property
    def epochs(self) -> int:
        return self.run.epochs

    @property
    def has_validation(self) -> bool:
        return self.x_val is not None

    @property
    def classwise_eps(self) -> bool:
        # Per-sample eps only where a policy varies it, so plain PGD-AT keeps its exact attack path.
        return type(self.policies.epsilon) is not FixedEpsilon

    @property
    def inner_loss(self) -> str:
        return self.policies.loss.inner if self.adversary.active else "ce"

    def output_model(self) -> torch.nn.Module:
        """The model a checkpoint stands for: the averaged one where the method averages."""
        if self.policies.averaging.average is None:
            return self.model
        if self.shadow is None:
            raise RuntimeError("an averaging method's run state has no shadow model to hold the average")
        self.shadow.load_state_dict(self.policies.averaging.average)
        return self.shadow


def channel_stats(images: torch.Tensor, chunk: int = 4096) -> tuple[list[float], list[float]]:
    """Per-channel mean and std of uint8 images in [0,1] units, without a float copy of the set."""
    c = images.shape[1]
    total = torch.zeros(c, dtype=torch.float64)
    total_sq = torch.zeros(c, dtype=torch.float64)
    count = 0
    for start in range(0, images.shape[0], chunk):
        x = images[start : start + chunk].to("cpu", torch.float64) / 255.0
        total += x.sum(dim=(0, 2, 3))
        total_sq += (x * x).sum(dim=(0, 2, 3))
        count += x.shape[0] * x.shape[2] * x.shape[3]
    mean = total / count
    std = (total_sq / count - mean * mean).clamp_min(1e-12).sqrt()
    return mean.tolist(), std.tolist()


def build_run_model(model_name: str, splits: Splits, train_x: torch.Tensor) -> tuple[torch.nn.Module, dict]:
    """The run's model, normalised with its training images' channel statistics, and the
    architecture record that the model files keep."""
    mean, std = channel_stats(train_x)
    num_classes, in_channels, image_size = len(splits.class_names), int(splits.train_x.shape[1]), int(
        splits.train_x.shape[2])
    arch = {"name": model_name, "num_classes": num_classes, "in_channels": in_channels, "image_size": image_size,
            "mean": mean, "std": std}
    model = build_model(model_name, num_classes, in_channels=in_channels, image_size=image_size, mean=tuple(mean),
                        std=tuple(std))
    return model, arch


def check_run_dir(run_dir: Path, spec: ConfigSpec) -> None:
    """A run directory holds one run: a different config is refused once anything of the
    other run has been trained (its checkpoint, models or records would be lost)."""
    path = run_dir / CONFIG_FILE
    if not path.exists():
        return
    existing = _read_key(path)
    if existing == spec.key:
        return
    trained = [name for name in (STATE_FILE, EPOCHS_FILE, *CHECKPOINT_FILES.values()) if (run_dir / name).exists()]
    if trained:
        other = existing or "unreadable"
        raise ValueError(
            f"{run_dir} already holds a run with a different config (run key {other}: {', '.join(trained)}; "
            f"this config: {spec.key}); use a new run directory, or move that one aside"
        )
    _log(f"{path}: replacing the config of a run that never trained ({spec.key} now)")


def _read_key(path: Path) -> str | None:
    """The run key of the config in `path`, or None when it is unreadable or today's types
    refuse it (replaced unless a run trained under it)."""
    try:
        return run_key(json.loads(path.read_text()))
    except ValueError:
        return None


def write_run_config(run_dir: Path, spec: ConfigSpec) -> None:
    """config.json: the run config's canonical form, whose hash is the run key; left as it is
    (its time stamp too) where it holds those bytes already."""
    path = run_dir / CONFIG_FILE
    if not path.is_file() or path.read_bytes() != spec.json.encode():
        atomic_write_text(path, spec.json)


def check_data(run: RunConfig, splits: Splits) -> None:
    """The prepared data is the dataset (and constructed set) the run was planned on."""
    got = (splits.meta.get("dataset"), splits.meta.get("variant"))  # the data file's record, not config
    want = (run.dataset, run.data_variant)
    if got != want:
        raise ValueError(f"run expects dataset {want[0]} ({want[1]}) but the prepared data is {got[0]} ({got[1]})")
    want_con, got_con = run.constructed, splits.meta.get("constructed")  # the data file's record
    if (want_con.key if want_con else None) != (got_con or {}).get("key"):  # the data file's record
        raise ValueError(
            f"run expects training data {want_con.kind + ' ' + want_con.key if want_con else 'original'} "
            f"but the prepared data is {got_con['kind'] + ' ' + got_con['key'] if got_con else 'original'}"
        )


def _split_data(run: RunConfig, splits: Splits, run_dir: Path) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(training indices, validation indices or None); the validation indices are recorded."""
    train_idx = stratified_subset(splits.train_y, run.train_per_class)
    val_idx = None
    if run.validation is not None:
        setting = run.validation.model_dump()
        train_idx, val_idx = validation_split(train_idx, splits.train_y, setting)
        path = run_dir / VALIDATION_FILE
        # A resumed run keeps the per-epoch selection scores recorded so far.
        record = json.loads(path.read_text()) if path.exists() else {}
        record.update({**setting, "indices": val_idx.tolist()})
        atomic_write_json(path, record)
    return train_idx, val_idx


def setup_run(spec: ConfigSpec, splits: Splits, run_dir: Path, device: str | torch.device) -> RunState:
    """A fresh run's state (seeded), before any checkpoint is read."""
    run = spec.trained
    dev = select_device(device)
    set_cudnn_benchmark(dev)  # static batch shapes: cuDNN's fastest algorithms, timed once per shape
    seed = run.seed
    num_classes = len(splits.class_names)
    # The order of everything that draws random numbers below is part of the records.
    torch.manual_seed(seed)
    cpu_gen = torch.Generator().manual_seed(seed)
    dev_gen = torch.Generator(device=dev).manual_seed(seed + 1)

    train_idx, val_idx = _split_data(run, splits, run_dir)
    eval_idx = stratified_subset(splits.test_y, run.epoch_eval.per_class)
    model, arch = build_run_model(run.model, splits, splits.train_x[train_idx])
    # channels_last on every device: cuDNN's and oneDNN's fast layout (on a CPU core the strided
    # small CNN trains 30-40% faster; the float rounding differs, as with another thread count)
    # (torch's stubs of Module.to omit the memory_format keyword, which it takes)
    model = model.to(dev).to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    optimizer = build_optimizer(model.parameters(), run.optimizer)
    scheduler = build_scheduler(optimizer, run.schedule, run.epochs, math.ceil(train_idx.numel() / run.batch_size))
    # (a method that adapts to validation statistics has a split: ConfigSpec.parse refuses its config
    # without one, study.config.requirements)
    policies = build_policies(run.method_config, num_classes, run.epochs,
                              torch.bincount(splits.train_y[train_idx], minlength=num_classes))
    return RunState(
        spec=spec, run_dir=run_dir, dev=dev, class_names=list(splits.class_names),
        x_train=splits.train_x[train_idx].to(dev), y_train=splits.train_y[train_idx].to(dev),
        x_eval=splits.test_x[eval_idx], y_eval=splits.test_y[eval_idx],
        x_val=None if val_idx is None else splits.train_x[val_idx],
        y_val=None if val_idx is None else splits.train_y[val_idx],
        model=model, arch=arch, optimizer=optimizer, scheduler=scheduler,
        adversary=Adversary(run.method_config.adversary), policies=policies,
        cpu_gen=cpu_gen, dev_gen=dev_gen,
        shadow=copy.deepcopy(model) if policies.averaging.active else None,
    )


def input_digests(splits: Splits, init_from: str | Path | None) -> dict[str, str | None]:
    """sha256 of what a run's weights are trained from besides its config: the prepared data's
    tensors and class names, and the parent model's weights (a fine-tuning run's `--init-from`;
    None without one or while that file is missing). Content, not files: a file rewritten with
    the same content (a rerun construction, a parent restored from its checkpoint) digests the same."""
    data = tensor_digest([("train_x", splits.train_x), ("train_y", splits.train_y), ("test_x", splits.test_x),
                          ("test_y", splits.test_y), ("class_names", list(splits.class_names))])
    parent = None
    if init_from is not None and Path(init_from).is_file():
        blob = load_torch(init_from)
        parent = tensor_digest(sorted(blob.get("state_dict", {}).items()))
    return {"data": data, "parent": parent}


def _kept_epochs(state: RunState, ckpt: dict) -> dict[str, int | None]:
    """The epoch each kept model file of a finished checkpoint must hold (model_best.pt: the best
    epoch on validation; model_published.pt: the published protocol's choice)."""
    kept = {}
    if state.run.validation is not None:
        kept["best"] = int(dict(ckpt.get("best", {})).get("epoch", 0)) or None
    if state.run.published_selection is not None:
        kept["published"] = choose_published(ckpt["records"], state.epochs, state.run.published_selection).chosen_epoch
    return kept


def stale_reason(state: RunState, ckpt: dict) -> str | None:
    """Why `checkpoint.pt` cannot continue this run (it is then trained afresh), or None. The
    rule: a checkpoint continues only the training of the same inputs (the prepared data's and
    the parent model's content, by sha256), and a finished one only with the training's own
    copies of the model files it chose (checkpoint_best.pt, checkpoint_published.pt) in place."""
    # a checkpoint written before digests were recorded is taken as this run's: what it was
    # trained on cannot be told, and discarding it would lose the training it holds
    inputs = ckpt.get("inputs") or dict(state.inputs)
    for name, what in (("data", "prepared data"), ("parent", "parent model (--init-from)")):
        if inputs.get(name) != state.inputs.get(name):
            was, now = (str(d)[:12] if d else "none" for d in (inputs.get(name), state.inputs.get(name)))
            return f"it was trained on other {what} (sha256 {was}..., now {now}...)"
    if int(ckpt["epoch"]) < state.epochs:
        return None
    for name, epoch in _kept_epochs(state, ckpt).items():
        path = state.run_dir / KEPT_FILES[name]
        held = load_torch(path).get("epoch") if path.is_file() else None
        if epoch is None or held != epoch:
            return (f"it is finished, but {path.name} holds {'no model' if held is None else f'epoch {held}'} "
                    f"where its {name} model is epoch {epoch}")
    return None


def discard_state(run_dir: Path) -> None:
    """Move a checkpoint that cannot continue the run, and the model files it chose, aside as
    `stale-<name>` (the last such set; nothing trained is deleted by a rerun)."""
    for name in (STATE_FILE, *KEPT_FILES.values()):
        if (run_dir / name).is_file():
            (run_dir / name).replace(run_dir / f"stale-{name}")


def resume_or_start(state: RunState, init_from: str | Path | None) -> None:
    """Continue from `checkpoint.pt` when there is one that this run's inputs trained
    (stale_reason); else start (a fine-tuning run from its parent's weights)."""
    ckpt_path = state.run_dir / STATE_FILE
    ckpt = load_checkpoint(ckpt_path)
    if ckpt is not None:
        if ckpt["run_key"] != state.spec.key:
            raise ValueError(f"{ckpt_path} belongs to another config; move it aside to start this run afresh")
        reason = stale_reason(state, ckpt)
        if reason is not None:
            _log(f"{ckpt_path} (epoch {ckpt['epoch']}/{state.epochs}) is not continued: {reason}; moved aside "
                 f"as stale-{STATE_FILE}; training {state.run_dir.name} afresh")
            discard_state(state.run_dir)
            ckpt = None
    if ckpt is None:
        if state.run.init_from:
            _init_from_parent(state.model, state.run, init_from)
        _log(f"training {state.run_dir.name} on {describe(state.dev)}: {state.x_train.shape[0]} images, "
             f"{state.epochs} epochs")
        return
    state.model.load_state_dict(ckpt["model"])
    state.optimizer.load_state_dict(ckpt["optimizer"])
    state.scheduler.load_state_dict(ckpt["scheduler"])
    restore_rng(ckpt["rng"], state.cpu_gen, state.dev_gen)
    state.records, state.timings = list(ckpt["records"]), list(ckpt["timings"])
    state.loop_timings = list(ckpt.get("loop_timings", []))
    state.start_epoch = int(ckpt["epoch"])
    state.policies.load_state_dict(ckpt.get("policies", {}))
    state.best = dict(ckpt.get("best", state.best))
    state.compiled = ckpt.get("compile")
    if state.start_epoch < state.epochs:
        _log(f"resuming {state.run_dir.name} after epoch {state.start_epoch}/{state.epochs}")


def _init_from_parent(model: torch.nn.Module, run: RunConfig, path: str | Path | None) -> None:
    parent = run.init_from
    if parent is None:
        raise ValueError(f"run {run.method!r} fine-tunes no parent run (its config has no init_from)")
    if path is None:
        raise ValueError(f"run {run.method!r} fine-tunes run {parent}; pass its model file (--init-from)")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: train the parent run {parent} first")
    blob = load_torch(path)
    if STANDS_IN_FOR in blob:
        raise stand_in_error(path, blob)
    if not parent.endswith(f"-{blob['run_key']}"):
        raise ValueError(f"{path} holds run key {blob['run_key']}, but this run fine-tunes {parent}")
    model.load_state_dict(blob["state_dict"])
    _log(f"initialised from {parent} (epoch {blob['epoch']})")


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
