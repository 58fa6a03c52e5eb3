"""Our side of the bench: the package's own code paths, driven the way the pipeline
drives them (run configs from params.yaml through `run_config`, `train_run` into a run
directory, `predict` for evaluations)."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from study.config import load_params, resolve_evaluation, run_config
from study.config.evaluations import AnyEvaluation
from study.config.spec import EvaluationSpec
from study.config.types import ExperimentGroup, Params, RunConfig, parse
from study.data.splits import Splits, stratified_subset
from study.device import eval_batch_size
from study.io import atomic_torch_save, load_torch
from study.predict import Predictions, predict
from study.run_directory import load_trained_model
from study.train.engine import train_run

#: The bench task -> the params.yaml method its training epoch runs.
TRAIN_METHODS = {"standard_epoch": "standard", "pgd10_at_epoch": "pgd_at", "trades_epoch": "trades"}


def _repo_files() -> tuple[Path, Path, Path]:
    """params.yaml, the presets and the schema: from the working directory (where Snakemake
    and the `study` command run), else from the checkout this package is installed from."""
    for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
        files = (root / "params.yaml", root / "workflow/presets", root / "workflow/schemas/params.schema.yaml")
        if all(f.exists() for f in files):
            return files
    raise FileNotFoundError("study bench needs params.yaml and workflow/ (run it from the repository root)")


def load_bench_params() -> tuple[Params, str]:
    """The published (paper preset) settings, whatever preset params.yaml selects, so the
    attacks match the reference loop's PGD-10 / TRADES settings."""
    params_path, presets, schema = _repo_files()
    params = load_params(params_path, {"preset": "paper"}, presets_dir=presets, schema_path=schema)
    return params, str(params_path)


def train_config(params: Params, splits: Splits, task: str, model: str, *, per_class: int, epochs: int,
                 batch_size: int, seed: int, precision: str = "fp32") -> dict:
    """The run config of a bench training task: the pipeline's config for the method, on the
    bench's subset, with a tiny clean per-epoch evaluation (its cost is part of the epoch), in
    `precision` (the pipeline's train.precision: bf16 autocast on a GPU; the config names it
    only where it is not fp32, as a planned run's)."""
    train = {"train_per_class": per_class, "epochs": epochs, "batch_size": batch_size,
             "epoch_eval": {"per_class": 1, "attack": None}, "precision": precision}
    group = ExperimentGroup(group="bench", dataset=splits.meta["dataset"], models=[model],
                            methods=[TRAIN_METHODS[task]], seeds=[seed], train=train)
    cfg = run_config(params, group, model, TRAIN_METHODS[task], seed)
    planned = parse(RunConfig, cfg, "bench run config")
    # The prepared file names its own variant (and constructed set); train_run checks them.
    constructed = splits.meta.get("constructed")  # the data file's record
    return {**cfg, "data_variant": splits.meta.get("variant", planned.data_variant),  # the data file's record
            **({"constructed": copy.deepcopy(constructed)} if constructed else {})}


def train_task(cfg: Mapping, splits: Splits, run_dir: Path, device: torch.device, progress: bool,
               compile_mode: str = "off") -> dict:
    """Train the run and report its epoch times from meta.json (the second epoch is the
    timed one: the first carries one-time warm-up)."""
    train_run(cfg, splits, run_dir, device=str(device), progress=progress, compile_mode=compile_mode)
    meta = json.loads((run_dir / "meta.json").read_text())
    # The batches of the second epoch: what the reference's epoch time covers (its
    # evaluation and checkpoint are re-timed apart as the engine's overhead).
    return {"epoch_seconds": meta["epoch_seconds"], "seconds": float(meta["train_loop_seconds"][1]),
            "images": int(meta["train_images"]), "overhead": _epoch_overhead(cfg, splits, run_dir, device)}


def _epoch_overhead(cfg: Mapping, splits: Splits, run_dir: Path, device: torch.device) -> float:
    """Seconds of what an engine epoch does besides training, re-timed: the clean
    evaluation on epoch_eval.per_class images per class and the checkpoint write. On a
    small bench set they are a visible part of the epoch; on a full dataset they are not."""
    blob = load_torch(run_dir / "checkpoint.pt")
    model = trained_model(run_dir, device)
    run = parse(RunConfig, cfg, "bench run config")
    idx = stratified_subset(splits.test_y, run.epoch_eval.per_class)
    t0 = time.perf_counter()
    predict(model, splits.test_x[idx], splits.test_y[idx], device=device, seed=run.seed)
    atomic_torch_save(blob, run_dir / "overhead-probe.pt")
    return time.perf_counter() - t0


def trained_model(run_dir: Path, device: torch.device) -> torch.nn.Module:
    return load_trained_model(run_dir, device=device)[0]


def evaluation(params: Params, name: str, **over) -> AnyEvaluation:
    """A params.yaml evaluation (fractions resolved), with bench overrides, typed."""
    return EvaluationSpec.parse({**resolve_evaluation(params, name), **over}, f"bench evaluation {name!r}").config


def timed_predict(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, attack: AnyEvaluation | None, *,
                  device: torch.device, seed: int) -> tuple[float, Predictions]:
    """(seconds, predictions) of the package's evaluation path; `predict` returns host arrays,
    so the device has finished when it returns."""
    batch_size = eval_batch_size(attack.batch_size if attack is not None else None, torch.device(device))
    t0 = time.perf_counter()
    out = predict(model, images, labels, attack=attack, batch_size=batch_size, device=device, seed=seed)
    return time.perf_counter() - t0, out


def accuracy(pred: np.ndarray, labels: torch.Tensor) -> float:
    return float((pred == labels.numpy()).mean())
