"""What the GPU check needs on a bare GPU machine and what `make gpu-bundle` carries there
(docs/performance.md, "On a GPU machine"). Standard library only: the machine's Python runs it."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "gpu-bundle"
WHEELS = BUNDLE / "wheels"
MIRROR = BUNDLE / "mirror"  # a STUDY_DATA_MIRROR layout: mirror/cifar10-jpeg/cifar10-jpeg.tar.gz
SITE = BUNDLE / "site"  # where the check installs the wheels (on PYTHONPATH of its parts)
ARCHIVE = ("cifar10-jpeg", "cifar10-jpeg.tar.gz")
LIMIT_BYTES = 40 * 1024 * 1024  # what travels with the checkout (64 MiB in all) leaves room for it

#: The modules the check's parts import that a bare GPU machine lacks, with the distribution
#: that provides each (`study` needs jsonschema to read params.yaml, pyautoattack for
#: AutoAttack; part (a) runs pytest). robustbench, timm, torchvision and imagecorruptions are
#: only imported by the zoo and CIFAR-10-C code, which the check does not run.
NEEDED = {"jsonschema": "jsonschema", "pyautoattack": "pyautoattack==0.2.0", "pytest": "pytest>=8,<9.2"}


def importable(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def missing_modules(needed: Iterable[str] = NEEDED, is_importable: Callable[[str], bool] = importable) -> list[str]:
    """The modules of `needed` that cannot be imported, in order."""
    return [m for m in needed if not is_importable(m)]


def folder_bytes(folder: Path) -> int:
    """Bytes of every file under `folder` (0 if it does not exist)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def size_line(total: int, limit: int = LIMIT_BYTES) -> tuple[bool, str]:
    """(within the limit, one line saying so)."""
    mib = total / 2**20
    if total > limit:
        return False, f"gpu-bundle: {mib:.1f} MiB is over the {limit / 2**20:.0f} MiB limit"
    return True, f"gpu-bundle: {mib:.1f} MiB (limit {limit / 2**20:.0f} MiB)"
