"""Crash-safe file writing: every artifact is written to a temporary file beside its
destination and renamed into place, so an interrupted job never leaves a half-written
file that a later step would mistake for a finished one."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the destination folder; rename it onto `path` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def atomic_torch_save(obj: Any, path: str | os.PathLike) -> None:
    import torch  # here, so that the table and figure jobs, which never save tensors, start fast

    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def load_torch(path: str | os.PathLike, map_location: str = "cpu", mmap: bool = False) -> Any:
    """Load a tensor file written by this project (tensors, numbers, strings, containers only).
    `mmap` maps the file instead of reading it: a job that uses a few images of a large
    prepared dataset reads only those pages."""
    import torch

    return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
