"""The training engine: one loop for every method of the study.

A run is fully described by its resolved config (study.config.run_config). The engine
keeps the training data on the device as uint8, augments there, asks the adversary
policy for the inputs to train on, and after every epoch records class-wise clean and
robust accuracy on a fixed test subset. Each epoch ends with an atomic checkpoint, so a
killed job rerun with the same command continues where it stopped and, on the CPU with
a fixed seed, finishes with the same records as an uninterrupted run.
"""

from __future__ import annotations

import copy
import math
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from study.config import run_key
from study.data.augment import random_crop_flip, to_float
from study.data.batches import epoch_batches
from study.data.prepared import Splits, stratified_subset
from study.device import describe, select_device, train_autocast
from study.evaluate.predict import class_counts, predict
from study.io import atomic_torch_save, atomic_write_json, atomic_write_text, load_torch
from study.models.registry import build_model
from study.provenance import provenance
from study.train.adversary import Adversary
from study.train.checkpoint import load_checkpoint, restore_rng, rng_state, save_checkpoint
from study.train.optim import build_optimizer, build_scheduler
from study.train.policies import EpochStats, FixedEpsilon, build_policies
from study.train.validation import validation_split

CHECKPOINT_FILES = {"last": "model.pt", "best": "model_best.pt"}

EPOCH_COLUMNS = [
    "epoch", "class", "class_name", "n", "clean_acc", "robust_acc",
    "train_n", "train_acc", "train_loss", "lr", "weight", "epsilon",
    # The policy state used in the epoch (weight and epsilon above, too), the class's CFP on
    # the epoch's training inputs, and the validation accuracies of the output model.
    "weight_boundary", "beta", "cfp", "val_n", "val_clean_acc", "val_robust_acc", "averaged",
]


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is left untouched."""


@dataclass
class TrainResult:
    run_dir: Path
    epochs_done: int
    finished: bool


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


def _check_run_dir(run_dir: Path, cfg: Mapping) -> None:
    path = run_dir / "config.json"
    if path.exists():
        import json

        existing = json.loads(path.read_text())
        if run_key(existing) != run_key(cfg):
            raise ValueError(
                f"{run_dir} already holds a run with a different config "
                f"(key {run_key(existing)} != {run_key(cfg)}); use a new run directory"
            )
    else:
        atomic_write_json(path, cfg)


def _check_data(cfg: Mapping, splits: Splits) -> None:
    got = (splits.meta.get("dataset"), splits.meta.get("variant"))
    want = (cfg["dataset"], cfg["data_variant"])
    if got != want:
        raise ValueError(f"run expects dataset {want[0]} ({want[1]}) but the prepared data is {got[0]} ({got[1]})")
    want_con, got_con = cfg.get("constructed"), splits.meta.get("constructed")
    if (want_con or {}).get("key") != (got_con or {}).get("key"):
        raise ValueError(
            f"run expects training data {want_con['kind'] + ' ' + want_con['key'] if want_con else 'original'} "
            f"but the prepared data is {got_con['kind'] + ' ' + got_con['key'] if got_con else 'original'}"
        )


def build_run_model(cfg: Mapping, splits: Splits, train_x: torch.Tensor) -> tuple[torch.nn.Module, dict]:
    mean, std = channel_stats(train_x)
    arch = {
        "name": cfg["model"],
        "num_classes": len(splits.class_names),
        "in_channels": int(splits.train_x.shape[1]),
        "image_size": int(splits.train_x.shape[2]),
        "mean": mean,
        "std": std,
    }
    model = build_model(
        arch["name"], arch["num_classes"], in_channels=arch["in_channels"],
        image_size=arch["image_size"], mean=tuple(mean), std=tuple(std),
    )
    return model, arch


def train_run(
    cfg: Mapping,
    splits: Splits,
    run_dir: str | Path,
    *,
    device: str = "auto",
    stop_after: int | None = None,
    progress: bool = True,
    init_from: str | Path | None = None,
) -> TrainResult:
    """Train (or resume) the run `cfg` into `run_dir`; `stop_after` ends this call after that epoch.

    A run whose config has `init_from` (a fine-tuning method such as FRL) starts from the
    weights of that parent run, `init_from` being the parent's model file."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    _check_data(cfg, splits)
    _check_run_dir(run_dir, cfg)
    dev = select_device(device)
    seed = int(cfg["seed"])
    num_classes = len(splits.class_names)

    torch.manual_seed(seed)
    cpu_gen = torch.Generator().manual_seed(seed)
    dev_gen = torch.Generator(device=dev).manual_seed(seed + 1)

    train_idx = stratified_subset(splits.train_y, cfg.get("train_per_class"))
    val_idx = None
    if cfg.get("validation"):
        train_idx, val_idx = validation_split(train_idx, splits.train_y, cfg["validation"]["fraction"])
        atomic_write_json(run_dir / "validation.json", {"fraction": cfg["validation"]["fraction"],
                                                        "indices": val_idx.tolist()})
    x_train = splits.train_x[train_idx].to(dev)
    y_train = splits.train_y[train_idx].to(dev)
    eval_cfg = cfg["epoch_eval"]
    eval_idx = stratified_subset(splits.test_y, eval_cfg["per_class"])
    x_eval, y_eval = splits.test_x[eval_idx], splits.test_y[eval_idx]

    model, arch = build_run_model(cfg, splits, splits.train_x[train_idx])
    model = model.to(dev)
    if dev.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    epochs, batch_size = int(cfg["epochs"]), int(cfg["batch_size"])
    iters_per_epoch = math.ceil(x_train.shape[0] / batch_size)
    optimizer = build_optimizer(model.parameters(), cfg["optimizer"])
    scheduler = build_scheduler(optimizer, cfg["schedule"], epochs, iters_per_epoch)
    adversary = Adversary(cfg["method_config"].get("adversary"))
    policies = build_policies(cfg["method_config"], num_classes, epochs,
                              torch.bincount(splits.train_y[train_idx], minlength=num_classes))
    if policies.needs_validation and val_idx is None:
        raise ValueError(f"method {cfg['method']!r} adapts to validation statistics (FRL, FAWA); "
                         "set train.validation (e.g. {fraction: 0.02}) for its experiment group")
    # Per-sample eps only where a policy varies it, so plain PGD-AT keeps its exact attack path.
    classwise_eps = type(policies.epsilon) is not FixedEpsilon
    inner = policies.loss.inner if adversary.active else "ce"
    shadow = None  # the averaged model, for evaluation
    if policies.averaging.active:
        shadow = copy.deepcopy(model)
    best = {"score": float("-inf"), "epoch": 0}
    augment = cfg.get("augment", {})

    records: list[dict] = []
    timings: list[float] = []
    start_epoch = 0
    ckpt_path = run_dir / "checkpoint.pt"
    ckpt = load_checkpoint(ckpt_path)
    if ckpt is not None:
        if ckpt["run_key"] != run_key(cfg):
            raise ValueError(f"{ckpt_path} belongs to another config; move it aside to start this run afresh")
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        restore_rng(ckpt["rng"], cpu_gen, dev_gen)
        records, timings, start_epoch = list(ckpt["records"]), list(ckpt["timings"]), int(ckpt["epoch"])
        policies.load_state_dict(ckpt.get("policies", {}))
        best = dict(ckpt.get("best", best))
        _log(f"resuming {run_dir.name} after epoch {start_epoch}/{epochs}")
    else:
        if cfg.get("init_from"):
            _init_from_parent(model, cfg, init_from)
        _log(f"training {run_dir.name} on {describe(dev)}: {x_train.shape[0]} images, {epochs} epochs")

    for epoch in range(start_epoch + 1, epochs + 1):
        t0 = time.perf_counter()
        model.train()
        loss_sum = torch.zeros(num_classes, device=dev, dtype=torch.float64)
        correct = torch.zeros(num_classes, device=dev, dtype=torch.float64)
        count = torch.zeros(num_classes, device=dev, dtype=torch.float64)
        confusion = torch.zeros(num_classes * num_classes, device=dev, dtype=torch.float64)
        # The policy state of this epoch (policies adapt between epochs, never within one).
        class_eps = policies.epsilon.class_eps()
        w_nat, w_bndy = policies.weights.weights()
        class_beta = policies.loss.class_beta()
        eps_dev = class_eps.to(dev, torch.float32)
        w_nat_dev, w_bndy_dev = w_nat.to(dev, torch.float32), w_bndy.to(dev, torch.float32)
        batches = epoch_batches(x_train.shape[0], batch_size, cpu_gen, shuffle=True)
        bar = tqdm(batches, desc=f"epoch {epoch}/{epochs}", disable=not progress, leave=False,
                   file=sys.stderr, mininterval=2)
        for idx in bar:
            idx = idx.to(dev)
            xb, yb = x_train[idx], y_train[idx]
            if augment.get("crop_padding", 0) or augment.get("flip", False):
                xb = random_crop_flip(
                    xb, padding=augment.get("crop_padding", 0), flip=augment.get("flip", False), generator=dev_gen
                )
            x = to_float(xb)
            if dev.type == "cuda":
                x = x.contiguous(memory_format=torch.channels_last)
            target = policies.targets.sample(yb, dev_gen) if adversary.active else None
            with train_autocast(dev):
                x_in = adversary.perturb(model, x, yb, dev_gen, eps=eps_dev[yb] if classwise_eps else None,
                                         target=target, inner=inner)
                logits = model(x_in)
                clean_logits = model(x).float() if policies.loss.needs_clean else None
            per_sample = policies.loss.per_sample(clean_logits, logits.float(), yb, w_nat_dev, w_bndy_dev)
            loss = per_sample.mean()
            penalty = policies.regularizer.penalty(logits.float(), yb)
            if penalty is not None:
                loss = loss + penalty
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            with torch.no_grad():
                yb64 = yb.long()
                loss_sum.index_add_(0, yb64, per_sample.detach().double())
                pred = logits.argmax(1)
                correct.index_add_(0, yb64, (pred == yb).double())
                count.index_add_(0, yb64, torch.ones_like(per_sample, dtype=torch.float64))
                confusion.index_add_(0, yb64 * num_classes + pred.long(),
                                     torch.ones_like(per_sample, dtype=torch.float64))
        bar.close()
        # One sync per epoch: a NaN anywhere in the epoch poisons the sum.
        if not torch.isfinite(loss_sum.sum()):
            raise TrainingDivergedError(
                f"non-finite training loss in epoch {epoch} of {run_dir.name} "
                f"(lr {scheduler.get_last_lr()[0]:.3g}); the checkpoint of epoch {epoch - 1} is kept. "
                "Lower the learning rate or check the data."
            )

        stats = EpochStats(epoch, count.cpu(), correct.cpu(), confusion.cpu().view(num_classes, num_classes))
        if val_idx is not None:
            stats.val_n, stats.val_clean_correct, stats.val_robust_correct = _class_accuracy(
                model, splits.train_x[val_idx], splits.train_y[val_idx], eval_cfg.get("attack"), dev, seed,
                num_classes)
        averaged = policies.averaging.update(model, stats)
        out_model, val_out = model, stats
        if policies.averaging.average is not None:
            shadow.load_state_dict(policies.averaging.average)
            out_model = shadow
            if val_idx is not None:
                val_out = EpochStats(epoch, stats.train_n, stats.train_correct, stats.train_confusion,
                                     *_class_accuracy(shadow, splits.train_x[val_idx], splits.train_y[val_idx],
                                                      eval_cfg.get("attack"), dev, seed, num_classes))
        n_eval, clean_ok, robust_ok = _class_accuracy(out_model, x_eval, y_eval, eval_cfg.get("attack"), dev, seed,
                                                      num_classes)
        lr = scheduler.get_last_lr()[0]
        count_np, correct_np, loss_np = count.cpu().numpy(), correct.cpu().numpy(), loss_sum.cpu().numpy()
        cfp = stats.train_cfp
        val_clean = val_out.val_clean_acc if val_idx is not None else None
        val_robust = val_out.val_robust_acc if val_idx is not None else None
        for c in range(num_classes):
            records.append({
                "epoch": epoch,
                "class": c,
                "class_name": splits.class_names[c],
                "n": int(n_eval[c]),
                "clean_acc": float(clean_ok[c] / n_eval[c]) if n_eval[c] else float("nan"),
                "robust_acc": float(robust_ok[c] / n_eval[c]) if robust_ok is not None and n_eval[c] else float("nan"),
                "train_n": int(count_np[c]),
                "train_acc": float(correct_np[c] / count_np[c]) if count_np[c] else float("nan"),
                "train_loss": float(loss_np[c] / count_np[c]) if count_np[c] else float("nan"),
                "lr": float(lr),
                "weight": float(w_nat[c]),
                "epsilon": float(class_eps[c]) if adversary.active else 0.0,
                "weight_boundary": float(w_bndy[c]),
                "beta": float(class_beta[c]),
                "cfp": float(cfp[c]),
                "val_n": int(stats.val_n[c]) if val_idx is not None else 0,
                "val_clean_acc": float(val_clean[c]) if val_clean is not None else float("nan"),
                "val_robust_acc": float(val_robust[c]) if val_robust is not None else float("nan"),
                "averaged": int(averaged),
            })
        policies.update(stats)
        if val_idx is not None:
            # The best checkpoint is chosen on validation robust accuracy (clean accuracy
            # without an epoch attack), never on the test set; ties keep the earlier epoch.
            score = float((val_out.val_robust_correct if robust_ok is not None else val_out.val_clean_correct).sum()
                          / val_out.val_n.sum())
            if score > best["score"]:
                best = {"score": score, "epoch": epoch}
                _save_model(run_dir / CHECKPOINT_FILES["best"], out_model, model, arch, cfg, epoch)
        timings.append(time.perf_counter() - t0)
        save_checkpoint(ckpt_path, {
            "run_key": run_key(cfg),
            "epoch": epoch,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": rng_state(cpu_gen, dev_gen),
            "records": records,
            "timings": timings,
            "policies": policies.state_dict(),
            "best": best,
        })
        write_epochs_csv(run_dir / "epochs.csv", records)
        _log(_epoch_line(epoch, epochs, records[-num_classes:], timings[-1]))
        if stop_after is not None and epoch >= stop_after and epoch < epochs:
            _log(f"stopping after epoch {epoch} as asked; rerun the same command to continue")
            return TrainResult(run_dir, epoch, finished=False)

    out_model = model
    if policies.averaging.average is not None:
        shadow.load_state_dict(policies.averaging.average)
        out_model = shadow
    _save_model(run_dir / CHECKPOINT_FILES["last"], out_model, model, arch, cfg, epochs)
    atomic_write_json(run_dir / "meta.json", {
        **provenance(dev),
        "device_name": describe(dev),
        "epoch_seconds": timings,
        "train_seconds": float(sum(timings)),
        "train_images": int(x_train.shape[0]),
        "validation_images": 0 if val_idx is None else int(val_idx.numel()),
        "best_epoch": best["epoch"] if val_idx is not None else None,
        "best_val_score": best["score"] if val_idx is not None else None,
        "init_from": cfg.get("init_from"),
    })
    return TrainResult(run_dir, epochs, finished=True)


def _class_accuracy(model, images, labels, attack, dev, seed, num_classes):
    """(n, clean correct, robust correct or None) per class, as float64 CPU tensors."""
    labels_np = labels.numpy()
    clean = predict(model, images, labels, attack=None, device=dev, seed=seed)
    n, clean_ok = class_counts(clean.pred, labels_np, num_classes)
    robust_ok = None
    if attack:
        robust = predict(model, images, labels, attack=attack, device=dev, seed=seed)
        _, robust_ok = class_counts(robust.pred, labels_np, num_classes)
        robust_ok = torch.as_tensor(robust_ok, dtype=torch.float64)
    return (torch.as_tensor(n, dtype=torch.float64), torch.as_tensor(clean_ok, dtype=torch.float64), robust_ok)


def _save_model(path: Path, out_model: torch.nn.Module, raw_model: torch.nn.Module, arch: dict, cfg: Mapping,
                epoch: int) -> None:
    """The weights a checkpoint stands for (the averaged ones where the method averages),
    plus the raw trained weights when they differ."""
    blob = {"state_dict": {k: v.detach().cpu() for k, v in out_model.state_dict().items()},
            "arch": arch, "run_key": run_key(cfg), "epoch": epoch}
    if out_model is not raw_model:
        blob["raw_state_dict"] = {k: v.detach().cpu() for k, v in raw_model.state_dict().items()}
    atomic_torch_save(blob, path)


def _init_from_parent(model: torch.nn.Module, cfg: Mapping, path: str | Path | None) -> None:
    parent = cfg["init_from"]
    if path is None:
        raise ValueError(f"run {cfg['method']!r} fine-tunes run {parent}; pass its model file (--init-from)")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: train the parent run {parent} first")
    blob = load_torch(path)
    if not parent.endswith(f"-{blob['run_key']}"):
        raise ValueError(f"{path} holds run key {blob['run_key']}, but this run fine-tunes {parent}")
    model.load_state_dict(blob["state_dict"])
    _log(f"initialised from {parent} (epoch {blob['epoch']})")


def write_epochs_csv(path: Path, records: list[dict]) -> None:
    frame = pd.DataFrame.from_records(records, columns=EPOCH_COLUMNS)
    atomic_write_text(path, frame.to_csv(index=False))


def load_trained_model(
    run_dir: str | Path, device: str | torch.device = "cpu", checkpoint: str = "last"
) -> tuple[torch.nn.Module, dict]:
    """The final (`last`) or best-on-validation (`best`) model of a finished run, in eval
    mode, with its architecture record."""
    if checkpoint not in CHECKPOINT_FILES:
        raise ValueError(f"unknown checkpoint {checkpoint!r}; valid: {', '.join(CHECKPOINT_FILES)}")
    path = Path(run_dir) / CHECKPOINT_FILES[checkpoint]
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: the run has not finished training (`study train`)")
    blob = load_torch(path)
    arch = blob["arch"]
    model = build_model(
        arch["name"], arch["num_classes"], in_channels=arch["in_channels"], image_size=arch["image_size"],
        mean=tuple(arch["mean"]), std=tuple(arch["std"]),
    )
    model.load_state_dict(blob["state_dict"])
    return model.to(device).eval(), arch


def _epoch_line(epoch: int, epochs: int, rows: list[dict], seconds: float) -> str:
    clean = np.array([r["clean_acc"] for r in rows])
    robust = np.array([r["robust_acc"] for r in rows])
    train_acc = np.nansum([r["train_acc"] * r["train_n"] for r in rows]) / max(1, sum(r["train_n"] for r in rows))
    loss = np.nansum([r["train_loss"] * r["train_n"] for r in rows]) / max(1, sum(r["train_n"] for r in rows))
    worst = rows[int(np.nanargmin(clean))]["class_name"] if np.isfinite(clean).any() else "-"
    line = (f"epoch {epoch}/{epochs}  loss {loss:.3f}  train acc {100 * train_acc:.1f}%  "
            f"eval clean {100 * np.nanmean(clean):.1f}% (worst {worst})")
    if np.isfinite(robust).any():
        line += f"  robust {100 * np.nanmean(robust):.1f}%"
    return line + f"  [{seconds:.1f}s]"


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
