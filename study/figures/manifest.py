"""`results/<preset>/figures/all`: the list of every figure of the configured study, with checksums,
so one target stands for the whole set and a changed figure is visible in `git diff`/DVC."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable
from pathlib import Path

from study.io import atomic_write_text


def write_manifest(out: str | Path, files: Iterable[str | Path]) -> None:
    lines = ["# figure\tsha256\tbytes"]
    for f in sorted(Path(p) for p in files):
        if not f.exists():
            raise FileNotFoundError(f"figure {f} listed for the manifest does not exist")
        data = f.read_bytes()
        lines.append(f"{f}\t{hashlib.sha256(data).hexdigest()[:16]}\t{len(data)}")
    atomic_write_text(out, "\n".join(lines) + "\n")
    print(f"manifest of {len(lines) - 1} figure files -> {out}", file=sys.stderr)
