"""Provenance written beside every result: code version, packages, hardware."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

_PACKAGES = ("torch", "numpy", "pandas", "pyarrow", "pyautoattack", "snakemake", "dvc")


def git_commit(cwd: Path | None = None) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True, text=True
    ).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def provenance(device: torch.device | None = None) -> dict:
    import torch  # here: the table jobs write provenance-free files and never need torch

    info = {
        "git_commit": git_commit(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "torch_threads": torch.get_num_threads(),
    }
    from study.device import gpu_share

    if share := gpu_share():  # the GPU memory share and compile workers of a job that shares the GPU
        info["gpu_share"] = share
    if device is not None:
        info["device"] = str(device)
        if device.type == "cuda":
            info["gpu"] = torch.cuda.get_device_name(device)
    return info
