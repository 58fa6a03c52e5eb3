"""A run directory: its files, the config it holds (read back as a ConfigSpec), the
identity columns of its table rows, and loading its trained model. Training writes these
files and evaluation reads them; both import this module and neither imports the other.

A run id (study.config.spec) is a readable slug plus a short hash of the resolved run
config, so presets never collide and a changed hyperparameter is a new run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from study.checkpoints import CHECKPOINT_FILES
from study.config.spec import ConfigSpec
from study.config.types import RunConfig, ZooRunConfig

if TYPE_CHECKING:  # torch is imported where a model is handled: tables and figures never pay for it
    import torch

CONFIG_FILE = "config.json"
STATE_FILE = "checkpoint.pt"
EPOCHS_FILE = "epochs.csv"
META_FILE = "meta.json"
VALIDATION_FILE = "validation.json"
#: the published protocol's evidence beside model_published.pt: every epoch's index, the
#: candidates and the epoch chosen
PUBLISHED_FILE = "published.json"
#: the training's own copies of model_best.pt and model_published.pt, beside checkpoint.pt: a
#: workflow removes a job's declared files before it reruns the job, and a finished run's rerun
#: rewrites them from these (study.train.engine: restore_finished)
KEPT_FILES = {"best": "checkpoint_best.pt", "published": "checkpoint_published.pt"}
#: the key of a stand-in's blob: every run has every file of the checkpoint table, so that the
#: workflow declares a run's files with one rule; a checkpoint the run keeps none of (no validation
#: split: no `best`; no published protocol: no `published`) is a stand-in naming the checkpoint it
#: stands for and holding no weights, which no evaluation, check or fine-tuning loads as a chosen model
STANDS_IN_FOR = "stands_in_for"

#: the columns that name a run's training setting (everything but dataset, model, method, seed)
SETTING_COLUMNS = ["optimizer", "lr", "schedule", "weight_decay", "epochs", "train_per_class", "train_data"]


def training_setting(run: RunConfig | ZooRunConfig) -> dict:
    """The training setting of a run: the one definition the plan, the tables and the
    figures share (a run is dataset x model x method x setting x seed)."""
    constructed = run.constructed if isinstance(run, RunConfig) else None
    return {
        "optimizer": run.optimizer.name,
        "lr": run.optimizer.lr,
        "schedule": run.schedule.name,
        "weight_decay": run.optimizer.weight_decay,
        "epochs": run.epochs,
        "train_per_class": run.train_per_class,
        # "original", or the constructed dataset (d_r, d_nr, d_rand, d_det) the run trained on
        "train_data": constructed.kind if constructed else "original",
    }


def setting_tuple(run: RunConfig | ZooRunConfig) -> tuple:
    """`training_setting` as a hashable tuple in SETTING_COLUMNS order."""
    setting = training_setting(run)
    return tuple(setting[c] for c in SETTING_COLUMNS)


def identity(run_id: str, run: RunConfig | ZooRunConfig) -> dict:
    """The columns that say which run a table row comes from (and its training setting)."""
    return {
        "run_id": run_id,
        "dataset": run.dataset,
        "data_variant": run.data_variant,
        "model": run.model,
        "method": run.method,
        "seed": run.seed,
        **training_setting(run),
    }


def read_run_config(run_dir: str | Path) -> ConfigSpec:
    """The config.json of a run directory, parsed (the boundary where a run's config is read back)."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: {Path(run_dir).name} is not a trained run (`study train`)")
    return ConfigSpec.parse(json.loads(path.read_text()), str(path))


def expected_run_id(spec: ConfigSpec) -> str:
    """The run id a config names: a trained run's `<slug>-<key>` (study.config.spec), a zoo
    model's by its entry (study.config.zoo.zoo_run_id, `data` the dataset it is evaluated on)."""
    if isinstance(spec.config, ZooRunConfig):
        from study.config.zoo import zoo_run_id

        return zoo_run_id(spec.config.zoo, spec.config.dataset)
    return spec.run_id


_MOVE = "put the run's own config.json and model files back, or retrain it (`study train`)"


def owned_run(run_dir: str | Path, checkpoint: str | None = "last") -> ConfigSpec:
    """The config of the run folder `run_dir` where the folder, its config.json and its model
    file (`checkpoint`; None: none is read) are one run's: the folder is named by the run id
    recomputed from config.json, and the model file carries that run's key. A command that
    writes under a run's id calls this first; ValueError of one line otherwise."""
    run_dir = Path(run_dir)
    spec = read_run_config(run_dir)
    want = expected_run_id(spec)
    if run_dir.name != want:
        raise ValueError(f"{run_dir / CONFIG_FILE} holds the config of run {want}, but the folder is run "
                         f"{run_dir.name}: the folder holds another run's files; {_MOVE}")
    if checkpoint is None or isinstance(spec.config, ZooRunConfig):  # a zoo model.pt names its weights
        return spec
    path = run_dir / CHECKPOINT_FILES[checkpoint]
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: the run has not finished training (`study train`)")
    got = _model_blob(path).get("run_key")
    if got != spec.key:
        raise ValueError(f"{path} holds the model of run key {got}, but {run_dir / CONFIG_FILE} and the folder's "
                         f"name are run {run_dir.name} (key {spec.key}): {_MOVE}")
    return spec


def write_stand_in(run_dir: Path, name: str, key: str, chosen: str = "last") -> Path:
    """The file of checkpoint `name` of a run that keeps none: a stand-in for its `chosen` one
    (written atomically; a rerun writes it again)."""
    from study.io import atomic_torch_save

    path = run_dir / CHECKPOINT_FILES[name]
    atomic_torch_save({STANDS_IN_FOR: chosen, "checkpoint": name, "file": CHECKPOINT_FILES[chosen], "run_key": key},
                      path)
    return path


def kept_checkpoints(run: RunConfig) -> list[str]:
    """The checkpoints a run keeps a model of: `last`, `best` with a validation split, `published`
    with the published protocol; the others' files are stand-ins."""
    return ["last", *(["best"] if run.validation is not None else []),
            *(["published"] if run.published_selection is not None else [])]


def stand_in_names(run: RunConfig) -> list[str]:
    """The checkpoints a run keeps no model of: the file of each is a stand-in for model.pt."""
    kept = kept_checkpoints(run)
    return [name for name in CHECKPOINT_FILES if name not in kept]


def missing_stand_ins(run_dir: Path, spec: ConfigSpec) -> list[str]:
    """The checkpoint names whose stand-ins a finished run lacks (a results folder of a version
    that wrote none); none for a zoo model or a run not finished (its train job writes them)."""
    if not isinstance(spec.config, RunConfig) or not (run_dir / CHECKPOINT_FILES["last"]).is_file():
        return []
    return [name for name in stand_in_names(spec.config) if not (run_dir / CHECKPOINT_FILES[name]).is_file()]


def write_missing_stand_ins(run_dir: str | Path) -> list[str]:
    """The stand-ins a finished run lacks, written: the train job's files are then complete, as
    a run trained today leaves them. Returns their files."""
    run_dir = Path(run_dir)
    spec = read_run_config(run_dir)
    return [write_stand_in(run_dir, name, spec.key).name for name in missing_stand_ins(run_dir, spec)]


def stand_in_error(path: Path, blob: Mapping) -> ValueError:
    """The one-line refusal of a stand-in read as a model."""
    return ValueError(f"{path} is a stand-in for {blob['file']} (the run keeps no {blob['checkpoint']} checkpoint), "
                      f"not a model of its own; use the run's {blob[STANDS_IN_FOR]} checkpoint, or plan the run with "
                      f"{'a validation split' if blob['checkpoint'] == 'best' else 'train.published_selection'}")


def save_model(path: Path, out_model: torch.nn.Module, raw_model: torch.nn.Module, arch: dict, key: str,
               epoch: int) -> None:
    """The weights a model file stands for (the averaged ones where the method averages),
    plus the raw trained weights when they differ."""
    from study.io import atomic_torch_save

    blob = {"state_dict": {k: v.detach().cpu() for k, v in out_model.state_dict().items()},
            "arch": arch, "run_key": key, "epoch": epoch}
    if out_model is not raw_model:
        blob["raw_state_dict"] = {k: v.detach().cpu() for k, v in raw_model.state_dict().items()}
    atomic_torch_save(blob, path)


def model_from_arch(arch: Mapping) -> torch.nn.Module:
    """An untrained model of the architecture a model file records."""
    from study.models.registry import build_model

    return build_model(
        arch["name"], arch["num_classes"], in_channels=arch["in_channels"], image_size=arch["image_size"],
        mean=tuple(arch["mean"]), std=tuple(arch["std"]),
    )


def _model_blob(path: Path) -> dict:
    """A model file (weights and architecture, and the run key where `study train` wrote it);
    ValueError naming the file otherwise."""
    from study.io import load_torch

    try:
        blob = load_torch(path)
    except Exception as err:  # torch raises several unrelated types for damaged files
        raise ValueError(f"{path} could not be read as a model file ({type(err).__name__}: {err}); "
                         "retrain the run (`study train`)") from err
    if isinstance(blob, dict) and "zoo" in blob:  # names a RobustBench model instead of holding weights
        return blob
    if isinstance(blob, dict) and STANDS_IN_FOR in blob:
        raise stand_in_error(path, blob)
    missing = [k for k in ("state_dict", "arch") if not isinstance(blob, dict) or k not in blob]
    if missing:
        raise ValueError(f"{path} is not a model file of `study train` (no {', '.join(missing)}); "
                         "put the run's model.pt back or retrain it")
    return blob


def load_trained_model(
    run_dir: str | Path, device: str | torch.device = "cpu", checkpoint: str = "last"
) -> tuple[torch.nn.Module, dict]:
    """The final (`last`), best-on-validation (`best`) or published-protocol (`published`)
    model of a finished run, in eval mode, with its architecture record. On a CPU, torch then
    computes on the run's `threads` (study.device.set_numerics_threads): every evaluation of a
    run's model gets the same numbers, whatever cores its job was granted."""
    if checkpoint not in CHECKPOINT_FILES:
        raise ValueError(f"unknown checkpoint {checkpoint!r}; valid: {', '.join(CHECKPOINT_FILES)}")
    path = Path(run_dir) / CHECKPOINT_FILES[checkpoint]
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: the run has not finished training (`study train`)")
    blob = _model_blob(path)
    from study.device import set_numerics_threads

    if "zoo" in blob:  # a RobustBench zoo model (write_zoo_run): robustbench loads it from the folder
        set_numerics_threads(device, 1)  # a zoo run config names no threads: RunConfig's default
        from study.models.zoo import ZooEntry, load_zoo_model

        zoo_model = load_zoo_model(ZooEntry(**blob["zoo"]), blob["weights_dir"], device, expected=blob.get("files"))
        return zoo_model, {"name": "zoo", **blob["zoo"]}
    config = Path(run_dir) / CONFIG_FILE
    if config.exists():
        spec = ConfigSpec.parse(json.loads(config.read_text()), str(config))
        got = blob.get("run_key")
        if got != spec.key:
            raise ValueError(f"{path} holds the model of run key {got}, but {config} is run key {spec.key}: "
                             "put this run's own model file back, or retrain it (`study train`)")
        set_numerics_threads(device, spec.trained.threads)
    model = model_from_arch(blob["arch"])
    model.load_state_dict(blob["state_dict"])
    return model.to(device).eval(), blob["arch"]


def write_zoo_run(run_dir: str | Path, spec: ConfigSpec, weights_dir: str | Path | None,
                  download: bool = False) -> Path:
    """The run directory of a RobustBench zoo model (study.config.zoo): config.json, and a
    model.pt that names the model and its weights files (with their SHA-256) instead of
    holding weights; `load_trained_model` loads it through robustbench. A missing weights
    file is fetched first with `download` (study.models.zoo.check_zoo_weights), and is an
    error here, when the job runs, otherwise or when the download fails. Each file is checked
    (study.models.zoo_checksums): a pinned one whose hash differs, or one that torch will not
    read with weights_only, is refused; an unpinned one gets a warning line and is listed
    under `unpinned`."""
    from study.io import atomic_torch_save, atomic_write_text
    from study.models.weights import resolve_weights_dir
    from study.models.zoo import ZooEntry, checked_zoo_weights

    run_dir = Path(run_dir)
    folder = resolve_weights_dir(weights_dir).resolve()
    if not isinstance(spec.config, ZooRunConfig):
        raise TypeError(f"run {spec.run_id} is a trained run, not a zoo model's")
    zoo = spec.config.zoo
    entry = ZooEntry(**zoo.model_dump())
    files = checked_zoo_weights(entry, folder, download=download)
    unpinned = [f.relative for f in files if not f.pinned]
    for f in files:
        if not f.pinned:
            print(f"warning: weights of {entry.describe()}: {folder / f.relative} (sha256 {f.sha256}) is unpinned: "
                  "no pinned checksum (study/models/zoo_weights.sha256, $STUDY_ZOO_CHECKSUMS) vouches for it; "
                  "used, read with weights_only", file=sys.stderr)
    atomic_write_text(run_dir / CONFIG_FILE, spec.json)
    # model.pt names the model as the run config writes it (robustbench's entries: three fields)
    blob = {"zoo": zoo.model_dump(exclude_unset=True), "weights_dir": str(folder),
            "files": {f.relative: f.sha256 for f in files}, "unpinned": unpinned}
    atomic_torch_save(blob, run_dir / CHECKPOINT_FILES["last"])
    return run_dir
