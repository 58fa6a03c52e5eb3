"""The training engine: one loop for every method of the study.

A run is fully described by its resolved config (study.config.run_config). The engine
keeps the training data on the device as uint8, augments there, asks the adversary
policy for the inputs to train on, and after every epoch records class-wise clean and
robust accuracy on a fixed test subset. Each epoch ends with an atomic checkpoint, so a
killed job rerun with the same command continues where it stopped and, on the CPU with
a fixed seed, finishes with the same records as an uninterrupted run.

    train (train_run: the same from a run config as written)
      setup_run, resume_or_start            (study.train.setup)
      for each epoch:
        train_epoch: batches -> adversary -> loss policy -> step   (study.train.epoch)
        end_epoch: validation, averaging, records, policies  (study.train.records),
                   the best checkpoint  (study.train.selection)
                   and the published protocol's checkpoint  (study.train.published_protocol)
        save_state: checkpoint.pt and epochs.csv
      finish_run: model.pt, the stand-ins of the checkpoints a run keeps none of, meta.json

A rerun of a finished run (a workflow reruns its job for a reason that cannot change the
weights: a speed setting, the command's text, a touched input) trains no epoch: restore_finished
writes every file of the run again from checkpoint.pt and the training's own copies of the
model files it chose. A checkpoint trained on other inputs (the prepared data's or the parent
model's content differs, by sha256) is not continued: the run trains afresh (setup.stale_reason).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from study.config.spec import ConfigSpec
from study.data.splits import Splits
from study.device import describe, select_device, set_numerics_threads, set_tf32, tf32_flags
from study.io import atomic_write_json
from study.provenance import provenance
from study.run_directory import (
    CHECKPOINT_FILES,
    EPOCHS_FILE,
    KEPT_FILES,
    META_FILE,
    PUBLISHED_FILE,
    STATE_FILE,
    VALIDATION_FILE,
    kept_checkpoints,
    save_model,
    stand_in_names,
    write_stand_in,
)
from study.train.checkpoint import place_copy, rng_state, save_checkpoint
from study.train.epoch import EpochPolicyState, EpochTotals, TrainingDivergedError, train_epoch
from study.train.policies import EMA, FAWA, EpochStats
from study.train.published_protocol import choose_published
from study.train.records import EPOCH_COLUMNS, class_accuracy, epoch_line, epoch_rows, validate, write_epochs_csv
from study.train.selection import best_on_validation, validation_score
from study.train.setup import (
    RunState,
    _log,
    channel_stats,
    check_data,
    check_run_dir,
    input_digests,
    resume_or_start,
    setup_run,
    write_run_config,
)
from study.train.step import TrainStep

__all__ = ["EPOCH_COLUMNS", "TrainResult", "TrainingDivergedError", "channel_stats", "train_run"]


@dataclass
class TrainResult:
    run_dir: Path
    epochs_done: int
    finished: bool


def train_run(
    cfg: Mapping,
    splits: Splits,
    run_dir: str | Path,
    *,
    device: str | torch.device = "auto",
    stop_after: int | None = None,
    progress: bool = True,
    init_from: str | Path | None = None,
    compile_mode: str = "off",
    on_checkpoint: Callable[[int], None] | None = None,
) -> TrainResult:
    """`train` of the run config `cfg` as written (a plan's `config`): parsed here, once, for
    a caller that holds the mapping (a bench, a test); `study train` parses its JSON argument."""
    return train(ConfigSpec.parse(cfg), splits, run_dir, device=device, stop_after=stop_after, progress=progress,
                 init_from=init_from, compile_mode=compile_mode, on_checkpoint=on_checkpoint)


def train(
    spec: ConfigSpec,
    splits: Splits,
    run_dir: str | Path,
    *,
    device: str | torch.device = "auto",
    stop_after: int | None = None,
    progress: bool = True,
    init_from: str | Path | None = None,
    compile_mode: str = "off",
    on_checkpoint: Callable[[int], None] | None = None,
) -> TrainResult:
    """Train (or resume) the run `spec` into `run_dir`; `stop_after` ends this call after that epoch.
    `compile_mode` is `speed.compile` (study.train.step: off, default, auto); meta.json's
    `compile` records what ran (`auto` falls back to a smaller compiled region, or eager,
    where the device's torch cannot compile the whole step).

    A run whose config has `init_from` (a fine-tuning method such as FRL) starts from the
    weights of that parent run, `init_from` being the parent's model file.

    `on_checkpoint(epoch)` is called after each epoch's checkpoint is on disk, before the next
    epoch starts: a caller that stops or observes a run at a known point (a killed-job test)
    needs no timing race with the training loop."""
    run_dir = Path(run_dir)
    run = spec.trained
    check_data(run, splits)
    run_dir.mkdir(parents=True, exist_ok=True)
    check_run_dir(run_dir, spec)
    # "fp32" on an Ampere+ GPU: set, not left to the library (docs/methods.md, precision)
    set_tf32(run.tf32.model_dump())
    set_numerics_threads(device, run.threads)
    dev = select_device(device)
    state = setup_run(spec, splits, run_dir, dev)
    # the machine, read where the run starts on it (its threads set): the same process finishes it
    state.machine = {**provenance(dev), "device_name": describe(dev)}
    state.inputs = input_digests(splits, init_from)
    resume_or_start(state, init_from)
    # written once the config has built its run, so a bad config leaves nothing that blocks the next
    write_run_config(run_dir, spec)
    if state.start_epoch >= state.epochs:
        restore_finished(state)
        return TrainResult(run_dir, state.epochs, finished=True)
    prime_policies(state)
    step = TrainStep(state, compile_mode)
    for epoch in range(state.start_epoch + 1, state.epochs + 1):
        t0 = time.perf_counter()
        policy_state = EpochPolicyState.of(state)
        totals = train_epoch(state, step, epoch, policy_state, progress)
        state.compiled = step.record()
        state.loop_timings.append(time.perf_counter() - t0)
        end_epoch(state, epoch, totals, policy_state)
        state.timings.append(time.perf_counter() - t0)
        save_state(state, epoch)
        if on_checkpoint is not None:
            on_checkpoint(epoch)
        _log(epoch_line(epoch, state.epochs, state.records[-state.num_classes:], state.timings[-1]))
        if stop_after is not None and epoch >= stop_after and epoch < state.epochs:
            _log(f"stopping after epoch {epoch} as asked; rerun the same command to continue")
            return TrainResult(run_dir, epoch, finished=False)
    finish_run(state, step.record())
    return TrainResult(run_dir, state.epochs, finished=True)


def prime_policies(state: RunState) -> None:
    """Before epoch 1 of a fresh run, the policies that fair_robust updates at the start of
    every epoch (FRL) take their first step from the starting model's validation
    statistics; a resumed run has that step in its checkpoint already."""
    if state.start_epoch or not state.policies.needs_priming:
        return
    c = state.num_classes
    zeros = torch.zeros(c, dtype=torch.float64)
    state.policies.prime(validate(state, state.model, EpochStats(0, zeros, zeros, torch.zeros(c, c,
                                                                                         dtype=torch.float64))))


def end_epoch(state: RunState, epoch: int, totals: EpochTotals, policy_state: EpochPolicyState) -> None:
    """Validation, weight averaging, the epoch's records, the policies' update and the best
    checkpoint, in the order the adaptive methods need them."""
    seed, attack = state.run.seed, state.run.epoch_eval.attack
    stats = validate(state, state.model, totals.stats(epoch))
    averaged = state.policies.averaging.update(state.model, stats)
    out_model = state.output_model()
    val_out = validate(state, out_model, stats) if out_model is not state.model else stats
    evaluated = class_accuracy(out_model, state.x_eval, state.y_eval, attack, state.dev, seed, state.num_classes)
    state.records += epoch_rows(state, epoch, totals, stats, val_out, policy_state, evaluated, averaged)
    state.policies.update(stats)
    if state.has_validation:
        epoch_eval = state.run.epoch_eval
        has_attack = bool(epoch_eval.validation_attack or epoch_eval.attack)
        choose_best(state, epoch, val_out, out_model, has_attack=has_attack)
    if state.run.published_selection is not None:
        keep_published(state, epoch, out_model)


def choose_best(state: RunState, epoch: int, val_out: EpochStats, out_model: torch.nn.Module,
                has_attack: bool) -> None:
    """Keep `model_best.pt` by the run's selection rule on validation (its experiment group's,
    the same for every method of the comparison; ties keep the earlier epoch) and record every
    epoch's score parts in validation.json."""
    selection = state.run.selection
    parts = {"epoch": epoch, **validation_score(val_out, has_attack, selection.score)}
    eligible, new_best = best_on_validation(epoch, state.epochs, parts["score"], state.best["score"], selection)
    if new_best:
        state.best = {"score": parts["score"], "epoch": epoch}
        keep_model(state, "best", out_model, epoch)
    path = state.run_dir / VALIDATION_FILE
    record = json.loads(path.read_text())
    record["selection"] = selection.model_dump()  # the rule in force, defaults included, as validation.json keeps it
    record["epochs"] = [e for e in record.get("epochs", []) if e["epoch"] < epoch] + [{**parts, "eligible": eligible}]
    record["best_epoch"] = state.best["epoch"]
    atomic_write_json(path, record)


def keep_published(state: RunState, epoch: int, out_model: torch.nn.Module) -> int | None:
    """Keep `model_published.pt` by the published protocol on the test subset's records so far,
    and its evidence (every epoch's index, the candidates, the choice) in published.json. The
    choice is recomputed from the records, which a resumed run has, so no state of its own is
    saved; an earlier epoch's choice stays on disk from that epoch. Returns the chosen epoch (None: no protocol)."""
    run, rule = state.run, state.run.published_selection
    if rule is None:
        return None
    choice = choose_published(state.records, state.epochs, rule)
    if choice.chosen_epoch == epoch:
        keep_model(state, "published", out_model, epoch)
    attack = run.epoch_eval.attack.model_dump() if run.epoch_eval.attack is not None else None
    atomic_write_json(state.run_dir / PUBLISHED_FILE,
                      choice.record(rule, state.epochs, attack, run.epoch_eval.per_class))
    return choice.chosen_epoch


def keep_model(state: RunState, name: str, out_model: torch.nn.Module, epoch: int) -> None:
    """A chosen checkpoint's model file (model_best.pt, model_published.pt), written as the
    training's own copy beside checkpoint.pt first (KEPT_FILES), from which a rerun of the
    finished run rewrites the declared file."""
    kept = state.run_dir / KEPT_FILES[name]
    save_model(kept, out_model, state.model, state.arch, state.spec.key, epoch)
    place_copy(kept, state.run_dir / CHECKPOINT_FILES[name])


def write_stand_ins(state: RunState) -> list[str]:
    """A stand-in for model.pt in the file of every checkpoint the run keeps none of
    (run_directory.STANDS_IN_FOR): every run has every file of the checkpoint table. Returns their files."""
    return [write_stand_in(state.run_dir, name, state.spec.key).name for name in stand_in_names(state.run)]


def restore_finished(state: RunState) -> None:
    """The run's files written again from a finished checkpoint, no epoch trained: epochs.csv
    from its records, model.pt from its weights, model_best.pt and model_published.pt from the
    training's copies (checked by setup.stale_reason) or as stand-ins where the run keeps none;
    meta.json, validation.json and published.json stay as the training wrote them (meta.json is
    written where it is missing)."""
    run_dir = state.run_dir
    write_epochs_csv(run_dir / EPOCHS_FILE, state.records)
    kept = [name for name in kept_checkpoints(state.run) if name != "last"]
    for name in kept:
        place_copy(run_dir / KEPT_FILES[name], run_dir / CHECKPOINT_FILES[name])
    if (run_dir / META_FILE).exists():
        save_model(run_dir / CHECKPOINT_FILES["last"], state.output_model(), state.model, state.arch, state.spec.key,
                   state.epochs)
        stand_ins = write_stand_ins(state)
    else:
        stand_ins = finish_run(state, state.compiled)
    files = [EPOCHS_FILE, CHECKPOINT_FILES["last"], *(CHECKPOINT_FILES[n] for n in kept)]
    files += [f"{name} (a stand-in for {CHECKPOINT_FILES['last']})" for name in stand_ins]
    _log(f"{run_dir.name}: checkpoint.pt holds the finished run (epoch {state.epochs}/{state.epochs}); no epoch "
         f"trained, its files written again from it: {', '.join(files)}")


def save_state(state: RunState, epoch: int) -> None:
    """checkpoint.pt (everything a resumed run needs) and epochs.csv, both atomically."""
    save_checkpoint(state.run_dir / STATE_FILE, {
        "run_key": state.spec.key,
        "epoch": epoch,
        "model": state.model.state_dict(),
        "optimizer": state.optimizer.state_dict(),
        "scheduler": state.scheduler.state_dict(),
        "rng": rng_state(state.cpu_gen, state.dev_gen),
        "records": state.records,
        "timings": state.timings,
        "loop_timings": state.loop_timings,
        "policies": state.policies.state_dict(),
        "best": state.best,
        "inputs": state.inputs,
        "compile": state.compiled,
    })
    write_epochs_csv(state.run_dir / EPOCHS_FILE, state.records)


def averaging_report(state: RunState) -> dict | None:
    """How many epochs the method's weight averaging took in (None without averaging). A run
    whose averaging accepted none is its un-averaged version: one warning line on stderr, and
    the report in validation.json and meta.json, so that no table takes it for averaged."""
    averaging = state.policies.averaging
    if not isinstance(averaging, EMA):  # the averaging methods (FAWA is an EMA)
        return None
    accepted = sorted({int(r["epoch"]) for r in state.records if r["averaged"]})
    averaging_type = state.run.method_config.averaging.type if state.run.method_config.averaging else None
    report = {"type": averaging_type,
              "accepted_epochs": len(accepted), "first_accepted": accepted[0] if accepted else None,
              "never_accepted": not accepted}
    if not accepted:
        rule = (f"worst-class validation robust accuracy never reached {averaging.threshold:g}"
                if isinstance(averaging, FAWA) else "no epoch reached its start")
        _log(f"warning: run {state.run_dir.name}: {report['type']} averaging accepted no epoch ({rule} from epoch "
             f"{averaging.start_epoch}); model.pt and model_best.pt are the un-averaged model")
    if state.has_validation:
        path = state.run_dir / VALIDATION_FILE
        atomic_write_json(path, {**json.loads(path.read_text()), "averaging": report})
    return report


def finish_run(state: RunState, compiled: dict | None = None) -> list[str]:
    """model.pt (the averaged weights where the method averages), the stand-ins of the checkpoints
    the run keeps none of, and meta.json; `compiled` is the step's compile record (TrainStep.record:
    requested, resolved, ran, reason). Returns the stand-ins' files."""
    save_model(state.run_dir / CHECKPOINT_FILES["last"], state.output_model(), state.model, state.arch, state.spec.key,
               state.epochs)
    stand_ins = write_stand_ins(state)
    has_val = state.has_validation
    averaging = averaging_report(state)
    atomic_write_json(state.run_dir / META_FILE, {
        **state.machine,
        "epoch_seconds": state.timings,
        # the batches alone, without the epoch's evaluation and checkpoint (what `study bench` compares)
        "train_loop_seconds": state.loop_timings,
        "train_seconds": float(sum(state.timings)),
        "train_images": int(state.x_train.shape[0]),
        "validation_images": int(state.y_val.numel()) if state.y_val is not None else 0,
        "best_epoch": state.best["epoch"] if has_val else None,
        "best_val_score": state.best["score"] if has_val else None,
        # model_published.pt's epoch (the published protocol, on the test subset; published.json)
        "published_epoch": (choose_published(state.records, state.epochs, state.run.published_selection).chosen_epoch
                            if state.run.published_selection is not None else None),
        "init_from": state.run.init_from,
        # the TF32 switches the run trained under (a GPU's "fp32"; no effect on a CPU)
        "tf32": tf32_flags(),
        # the torch threads the arithmetic ran on (the run's `threads` on a CPU; set_numerics_threads)
        "threads": torch.get_num_threads(),
        # cuDNN's per-shape algorithm timing (on for a CUDA run; study.device.set_cudnn_benchmark)
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "averaging": averaging,
        # what `speed.compile` asked for and the region that ran (this process's; a resumed
        # run compiles again): the records are that region's
        "compile": compiled,
    })
    return stand_ins
