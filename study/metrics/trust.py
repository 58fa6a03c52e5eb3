"""Which evaluations the study trusts: the verdicts of the checks against false robustness
(`study check`, checks.json), and the one rule every table, figure and the reproduction
report apply.

The rule: a sample counts as robust only if no check flagged or failed its evaluation. An
evaluation's status is

- 'pass': a checks.json of its run and checkpoint covered it and no check concerning it
  flagged or failed;
- 'flag' / 'fail': a check concerning it flagged / failed (`checks_not_passed` names them,
  e.g. 'large_eps_breaks (flag); more_steps_no_stronger (flag)');
- 'unchecked': no checks.json covers it (the checks run on the groups `robustness.checks`
  names). It counts, marked as unchecked.

A flagged or failed evaluation keeps its measured numbers, marked, but none of its samples
is counted: its counted accuracy is empty (NaN), which, unlike 0, cannot be read as a
measurement, and aggregates over seeds, the headline metrics, the figures' numbers and the
report leave it out and say so."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

CHECK_STATUSES = ("pass", "flag", "fail", "unchecked")
#: the statuses whose samples are not counted as robust
NOT_COUNTED = ("flag", "fail")

Verdicts = Mapping[tuple[str, str], list[str]]


def read_checks(paths: Iterable[str | Path]) -> tuple[dict[tuple[str, str], list[str]], list[dict]]:
    """From checks.json files: (run_id, evaluation) -> the checks that did not pass it, as
    'name (status)', for every evaluation a file covers; and one row per check."""
    verdicts: dict[tuple[str, str], list[str]] = {}
    rows = []
    for path in paths:
        result = json.loads(Path(path).read_text())
        if "evaluations" not in result:
            raise ValueError(f"{path} does not name the evaluations it checked: it was written by an older "
                             "`study check`; run the check again")
        run_id = result["run_id"]
        for name in result["evaluations"]:
            verdicts.setdefault((run_id, name), [])
        for c in result["checks"]:
            rows.append({"run_id": run_id, "checkpoint": result.get("checkpoint", "last"), "check": c["name"],
                         "status": c["status"], "evaluations": " ".join(c["evaluations"]), "detail": c["detail"]})
            if c["status"] != "pass":
                for name in c["evaluations"]:
                    verdicts.setdefault((run_id, name), []).append(f"{c['name']} ({c['status']})")
    return verdicts, rows


def check_status(not_passed: list[str] | None) -> str:
    """The status of an evaluation from its checks that did not pass (None: unchecked)."""
    if not_passed is None:
        return "unchecked"
    return "fail" if any(c.endswith("(fail)") for c in not_passed) else "flag" if not_passed else "pass"


def trust_of(verdicts: Verdicts, run_id: str, evaluation: str) -> dict[str, str]:
    """The status columns of one evaluation: check_status and checks_not_passed."""
    not_passed = verdicts.get((run_id, evaluation))
    return {"check_status": check_status(not_passed), "checks_not_passed": "; ".join(not_passed or [])}


def counted(status: str) -> bool:
    """Whether an evaluation of this status counts its robust samples (the rule above)."""
    if status not in CHECK_STATUSES:
        raise ValueError(f"unknown check status {status!r}; valid: {', '.join(CHECK_STATUSES)}")
    return status not in NOT_COUNTED


def statuses(table: pd.DataFrame) -> pd.Series:
    """Each row's check status; 'unchecked' where the table has no `check_status` (written before
    the checks) or the cell is empty."""
    if "check_status" not in table.columns:
        return pd.Series("unchecked", index=table.index, dtype=object)
    status = table["check_status"].fillna("unchecked").astype(str)
    unknown = sorted(set(status) - set(CHECK_STATUSES))
    if unknown:
        raise ValueError(f"unknown check status {unknown}; valid: {', '.join(CHECK_STATUSES)}")
    return status


def not_counted(table: pd.DataFrame) -> pd.Series:
    """True on the rows of flagged or failed evaluations, whose samples the rule does not count."""
    return statuses(table).isin(NOT_COUNTED)
