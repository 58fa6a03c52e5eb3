"""Resumable training state: everything a killed run needs to continue bit-for-bit, what its
weights were trained from (the inputs' digests), and the training's own copies of the model
files it chooses on the way (model_best.pt, model_published.pt), from which a finished run's
declared files are rewritten when a workflow reruns its job (study.train.engine)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from study.io import atomic_path, atomic_torch_save, load_torch


def tensor_digest(named: Iterable[tuple[str, Any]]) -> str:
    """sha256 of named tensors' content (name, dtype, shape and bytes, in the given order) and
    of any other values' repr: the same content digests the same however its file was written."""
    digest = hashlib.sha256()
    for name, value in named:
        digest.update(name.encode())
        if isinstance(value, torch.Tensor):
            array = value.detach().cpu().contiguous().reshape(-1)  # (a 0-d tensor has no byte view)
            digest.update(f"{array.dtype}{tuple(value.shape)}".encode())
            if array.numel():
                digest.update(array.view(torch.uint8).numpy().tobytes())
        else:
            digest.update(repr(value).encode())
    return digest.hexdigest()


def place_copy(src: Path, dest: Path) -> None:
    """`dest` becomes a copy of `src` (a hard link where the file system has them), atomically."""
    with atomic_path(dest) as tmp:
        tmp.unlink()
        try:
            os.link(src, tmp)
        except OSError:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            shutil.copyfile(src, tmp)


def rng_state(cpu_gen: torch.Generator, dev_gen: torch.Generator) -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "cpu_gen": cpu_gen.get_state(),
                             "dev_gen": dev_gen.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any], cpu_gen: torch.Generator, dev_gen: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    cpu_gen.set_state(state["cpu_gen"])
    dev_gen.set_state(state["dev_gen"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    atomic_torch_save(state, path)


def load_checkpoint(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        state = load_torch(path)
    except Exception as err:  # a truncated file from a crash mid-write cannot happen (atomic), but a disk can fail
        raise RuntimeError(
            f"checkpoint {path} cannot be read ({err}); move it aside to restart the run from scratch"
        ) from err
    require_training_state(path, state)
    return state


#: what every checkpoint.pt written by the training loop holds (setup.resume_or_start reads them)
STATE_KEYS = ("run_key", "model", "optimizer", "scheduler", "rng", "records", "timings", "epoch")


def require_training_state(path: Path, state: Any) -> None:
    """One line if `path` is not a training checkpoint (a model file copied over it, say)."""
    missing = list(STATE_KEYS) if not isinstance(state, dict) else [k for k in STATE_KEYS if k not in state]
    if missing:
        what = " (it holds a model file's arch and state_dict: a model.pt copied over it?)" \
            if isinstance(state, dict) and {"arch", "state_dict"} <= state.keys() else ""
        raise ValueError(f"{path} is not a training checkpoint: it lacks {', '.join(missing)}{what}; put the run's "
                         "own checkpoint.pt back, or move it aside to restart the run from scratch")
