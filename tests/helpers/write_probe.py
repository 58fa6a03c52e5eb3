"""Runs every kind of write of the study against a folder that refuses it, then again once the
cause is gone, and prints what happened as JSON (tests/integration/test_write_failures.py runs it in a
subprocess: inside a private mount namespace with a tiny tmpfs for a full disk, or as an
unprivileged user for a folder without write permission).

    python tests/helpers/write_probe.py FOLDER MODE      MODE: full (fill FOLDER's file system first) | as-is
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure

from study.cli import main
from study.evaluate.records import records_frame, write_records
from study.figures.style import save_figure
from study.io import atomic_path, atomic_write_json
from study.train.checkpoint import save_checkpoint

STATE = {"model": torch.arange(50_000, dtype=torch.float32), "epoch": 3}


def _writers(root: Path) -> dict[str, tuple[Path, Callable[[], object]]]:
    """Each write path of the study: the file it makes and the call that makes it."""
    labels = np.arange(20) % 10
    frame = pd.DataFrame({"class": labels, "acc": np.linspace(0, 1, 20)})

    def figure() -> list[Path]:
        fig = Figure(figsize=(2, 2))
        fig.subplots().plot([0, 1], [0, 1])
        return save_figure(fig, root / "figures" / "fig")

    def table() -> None:
        with atomic_path(root / "tables" / "classwise.csv") as tmp:
            frame.to_csv(tmp, index=False)

    return {
        "checkpoint": (root / "runs" / "x" / "checkpoint.pt", lambda: save_checkpoint(root / "runs" / "x" /
                                                                                       "checkpoint.pt", STATE)),
        "records": (root / "evaluations" / "x" / "clean.parquet",
                    lambda: write_records(records_frame(np.arange(20), labels, labels, np.eye(10)[labels]),
                                          root / "evaluations" / "x" / "clean.parquet", {"evaluation": "clean"})),
        "table": (root / "tables" / "classwise.csv", table),
        "json": (root / "runs" / "x" / "meta.json", lambda: atomic_write_json(root / "runs" / "x" / "meta.json",
                                                                              {"ok": True})),
        "figure": (root / "figures" / "fig.png", figure),
    }


def _fill(folder: Path) -> Path:
    """A file that takes every free byte of `folder`'s file system."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 4096)
    return filler


def _cli(argv: list[str]) -> dict:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(argv)
    return {"rc": rc, "stderr": err.getvalue()}


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != "filler")


def fail(root: Path) -> dict:
    """Every write into `root`, which refuses them: what each raised, what the CLI printed and
    the files left."""
    out: dict = {"failed": {}}
    for name, (_, write) in _writers(root).items():
        try:
            write()
            out["failed"][name] = None
        except OSError as err:  # what the CLI catches: its type and its one line
            out["failed"][name] = {"type": type(err).__name__, "message": str(err)}
    out["cli"] = _cli(["manifest", "--out", str(root / "figures" / "all"), __file__])
    out["left"] = _files(root)
    return out


def rerun(root: Path) -> dict:
    """The same writes once the cause is gone: each file written, the checkpoint read back."""
    out: dict = {"rerun": {}}
    for name, (path, write) in _writers(root).items():
        write()
        out["rerun"][name] = path.is_file()
    loaded = torch.load(_writers(root)["checkpoint"][0], weights_only=True)
    out["checkpoint_reads_back"] = bool(torch.equal(loaded["model"], STATE["model"]))
    out["cli"] = _cli(["manifest", "--out", str(root / "figures" / "all"), __file__])
    out["left"] = _files(root)
    return out


def full_disk(root: Path) -> dict:
    """`root`'s file system filled to the last byte, the writes tried, the filler removed, again."""
    filler = _fill(root)
    failed = fail(root)
    filler.unlink()
    return {**failed, "after": rerun(root)}


if __name__ == "__main__":
    step = {"fail": fail, "rerun": rerun, "full": full_disk}[sys.argv[2]]
    print(json.dumps(step(Path(sys.argv[1]))))
