"""The reproduction report of a tables folder, written to results/reproduction.md (`study reproduction`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from pathlib import Path

import pandas as pd

from study.config.params import typed_params
from study.io import atomic_write_text
from study.provenance import git_commit
from study.reproduction.comparison import compare
from study.reproduction.render import render


def _commit() -> str:
    return git_commit(Path(__file__).resolve().parent) or "unknown"


def reproduction_markdown(classwise: pd.DataFrame, params: Mapping, commit: str | None = None,
                          day: str | None = None) -> str:
    """The report of one class-wise table (results/tables/classwise.csv) under the configured params."""
    values, deltas = compare(classwise, params)
    return render(values, deltas, typed_params(params).preset or "none", commit or _commit(),
                  day or date.today().isoformat())


def reproduction_report(tables_dir: str | Path, params: Mapping, out_md: str | Path) -> Path:
    """Write results/reproduction.md from the tables in `tables_dir` (classwise.csv)."""
    path = Path(tables_dir) / "classwise.csv"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: build the tables first (`study tables`)")
    atomic_write_text(out_md, reproduction_markdown(pd.read_csv(path), params))
    return Path(out_md)
