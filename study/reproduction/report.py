"""The reproduction report of a tables folder, written to results/<preset>/reproduction.md and, as the page the
study's HTML report shows, results/<preset>/reproduction.html (`study reproduction`)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pandas as pd

from study.config.types import Params
from study.io import atomic_write_text
from study.provenance import git_commit
from study.reproduction.comparison import compare
from study.reproduction.page import render_html
from study.reproduction.render import render


def _commit() -> str:
    return git_commit(Path(__file__).resolve().parent) or "unknown"


def reproduction_markdown(classwise: pd.DataFrame, params: Params, commit: str | None = None,
                          day: str | None = None) -> str:
    """The report of one class-wise table (results/<preset>/tables/classwise.csv) under the configured params."""
    values, deltas = compare(classwise, params)
    return render(values, deltas, params.preset or "none", commit or _commit(),
                  day or date.today().isoformat())


def reproduction_report(tables_dir: str | Path, params: Params, out_md: str | Path,
                        out_html: str | Path | None = None) -> Path:
    """Write results/<preset>/reproduction.md from the tables in `tables_dir` (classwise.csv), and the same rows
    as an HTML page to `out_html` where given."""
    path = Path(tables_dir) / "classwise.csv"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: build the tables first (`study tables`)")
    values, deltas = compare(pd.read_csv(path), params)
    # one commit and day for both files: they are the same report
    preset, commit, day = params.preset or "none", _commit(), date.today().isoformat()
    atomic_write_text(out_md, render(values, deltas, preset, commit, day))
    if out_html is not None:
        atomic_write_text(out_html, render_html(values, deltas, preset, commit, day))
    return Path(out_md)
