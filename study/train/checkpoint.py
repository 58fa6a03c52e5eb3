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
        return load_torch(path)
    except Exception as err:  # a truncated file from a crash mid-write cannot happen (atomic), but a disk can fail
        raise RuntimeError(
            f"checkpoint {path} cannot be read ({err}); move it aside to restart the run from scratch"
        ) from err
