"""The Snakemake DAG as Snakemake describes it: a dry run whose structured log records (each
job's rule, files, resources, shell command and group; the job counts per rule) come back
through Snakemake's logger-plugin interface as JSON (the dagjson plugin beside this file), not
parsed from the printed log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent
#: the folder holding the snakemake_logger_plugin_dagjson package, for the snakemake process's PYTHONPATH
PLUGINS = Path(__file__).resolve().parent / "snakemake_plugins"


@dataclass(frozen=True)
class Job:
    rule: str
    input: tuple[str, ...]
    output: tuple[str, ...]
    log: tuple[str, ...]
    resources: dict
    threads: int
    shell: str
    wildcards: dict
    group: str | None  # the group job it belongs to (a pipe or `group:`), else None


@dataclass(frozen=True)
class Dag:
    jobs: tuple[Job, ...]
    counts: dict[str, int]  # jobs per rule and "total", as Snakemake counts them
    printed: str  # what the command printed, for the workflow's own lines (not the DAG's)

    def of(self, *rules: str) -> list[Job]:
        return [j for j in self.jobs if j.rule in rules]


def plugin_env(env: dict | None = None) -> dict:
    """`env` (default: this process's) with the dagjson plugin importable by snakemake."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PLUGINS), env.get("PYTHONPATH")) if p)
    return env


def read_records(path: Path, printed: str = "") -> Dag:
    jobs, counts, groups = [], {}, {}
    for line in path.read_text().splitlines() if path.exists() else ():
        rec = json.loads(line)
        if rec["event"] == "group":
            groups.update({jobid: rec["group"] for jobid in rec["jobs"]})
        elif rec["event"] == "stats":  # (a remote executor's dry run repeats them at its end)
            counts = rec["stats"]
        else:
            jobs.append(rec)
    return Dag(tuple(Job(j["rule"], tuple(j["input"]), tuple(j["output"]), tuple(j["log"]), j["resources"],
                         j["threads"], j["shell"], j["wildcards"], groups.get(j["jobid"]) if j["in_group"] else None)
                     for j in jobs), counts, printed)


def dry_run(args: list, cwd: Path, env: dict | None = None, timeout: int = 900) -> Dag:
    """`snakemake -n ARGS` in `cwd` (a copy of the project), its DAG read from its records."""
    with tempfile.TemporaryDirectory() as tmp:
        records = Path(tmp) / "dag.jsonl"
        argv = [str(BIN / "snakemake"), "-n", "--logger", "dagjson", "--logger-dagjson-path", str(records),
                *map(str, args)]
        proc = subprocess.run(argv, cwd=cwd, env=plugin_env(env), capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, f"{' '.join(argv)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        dag = read_records(records, proc.stdout + proc.stderr)
    assert dag.counts and len(dag.jobs) == dag.counts["total"], "the records name every job of the DAG"
    return dag
