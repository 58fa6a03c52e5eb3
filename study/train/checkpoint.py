"""Resumable training state: everything a killed run needs to continue bit-for-bit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from study.io import atomic_torch_save, load_torch


def rng_state(cpu_gen: torch.Generator, dev_gen: torch.Generator) -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "cpu_gen": cpu_gen.get_state(), "dev_gen": dev_gen.get_state()}
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
