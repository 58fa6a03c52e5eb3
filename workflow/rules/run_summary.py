"""The summary a workflow run ends with (workflow/rules/preflight.smk: `onsuccess`, `onerror`):
results/<preset>/run_summary.md, also printed. What was made (each configured figure's panels, the
tables), what the plan left out and why (a hand-placed input missing: study.preflight), and
each job that failed, with the error line its log ends with, and what is missing because of it.

A run that keeps going past a failed job (the default profile's keep-going) ends on a
console long scrolled past that job's error; this names it again at the end. Snakemake's own
error block prints `message: None` for every rule of this workflow (its formatter prints the
rule's message field whenever the log record has text); the summary is where a failure is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from study.io import atomic_write_text

_ERROR_BLOCK = re.compile(r"^Error in rule (\w+):\n((?:[ \t]+.*\n?)*)", re.M)
# a job's start (`rule train:` / `localrule train:` and its indented fields) and its end
_JOB_BLOCK = re.compile(r"^(?:local)?rule (\w+):\n((?:[ \t]+.*\n?)*)", re.M)
_FINISHED = re.compile(r"^Finished jobid: (\d+) ", re.M)
# Snakemake's other job failures (MissingOutputException, a failed --latency-wait, ...): no
# `Error in rule` block, their name, the rule, and the job's id in the message's first line
_EXCEPTION = re.compile(r"^(\w+(?:Exception|Error)) in rule (\w+) in file .*\n(.*)\n((?:.*\(missing.*\n)*)", re.M)
_JOB_ID = re.compile(r"\bJob (\d+)\b")
_INTERRUPTED = "Terminating processes on user request"
# a job that failed for want of the network: its study error names a download or an archive not available
_OFFLINE = re.compile(r"download|not available|unreachable|name or service|network is unreachable|timed out|"
                      r"connection refused|temporary failure in name resolution", re.I)
_LINE = 200  # a detail line's length: one line of a wide terminal, the rest is in the job's log
MIRRORS = "set STUDY_DATA_MIRROR / STUDY_WEIGHTS_DIR to folders holding the files (docs/usage.md)"


@dataclass(frozen=True)
class FailedJob:
    """A job that failed: its rule, its outputs, its log files, the error line its log ends with
    (or Snakemake's own, where the job left none); `interrupted` where the run was stopped
    (Ctrl-C) while the job ran and its log names no error of its own."""

    rule: str
    outputs: tuple[str, ...]
    logs: tuple[str, ...]
    error: str
    interrupted: bool = False


def _field(block: str, name: str) -> tuple[str, ...]:
    match = re.search(rf"^\s+{name}: (.*)$", block, re.M)
    if not match:
        return ()
    value = match.group(1).removesuffix(" (check log file(s) for error details)")
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _study_error(logs: Iterable[str]) -> str | None:
    """The last `error:` line of the job's own logs, if any."""
    for log in logs:
        path = Path(log)
        text = path.read_text(errors="replace") if path.is_file() else ""
        errors = [line.strip() for line in text.splitlines() if "error:" in line.lower()]
        if errors:
            return errors[-1]
    return None


def error_line(logs: Iterable[str]) -> str:
    """The line that says why a job failed: a `study` command's one-line error (the last line
    containing `error:`), else its log's last line; where no log was written, says so."""
    logs = list(logs)
    found = _study_error(logs)
    if found:
        return found
    for log in logs:
        path = Path(log)
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()] \
            if path.is_file() else []
        if lines:
            return lines[-1]
    return "no log written (the console shows the job's error)"


def _missing_output(match: re.Match, jobs: Mapping[str, tuple[str, str]]) -> FailedJob:
    """A failure Snakemake reports as an exception of its own (MissingOutputException): the
    files it found missing, and the job's log (from the job's start block, by its id)."""
    name, rule, first, files = match.groups()
    job_id = _JOB_ID.search(first)
    block = jobs.get(job_id.group(1), ("", ""))[1] if job_id else ""
    outputs, logs = _field(block, "output"), _field(block, "log")
    missing = [line.split(" (missing")[0].strip() for line in files.splitlines() if line.strip()]
    said = _study_error(logs)
    error = (f"{name}: the job ended without writing {', '.join(missing) or 'some of its outputs'}"
             + (f"; its log: {said}" if said else ""))
    return FailedJob(rule, outputs, logs, error)


def failed_jobs(snakemake_logs: Iterable[str]) -> list[FailedJob]:
    """Every failed job of Snakemake's own log files (the `log` its onerror handler gets): its
    `Error in rule` blocks and its other job failures (MissingOutputException ...); in a run
    stopped by the user, every job that had started and not finished reads as interrupted."""
    jobs, seen = [], set()
    for log in snakemake_logs:
        path = Path(log)
        text = path.read_text(errors="replace") if path.is_file() else ""
        started = {_field(m.group(2), "jobid")[0]: (m.group(1), m.group(2))
                   for m in _JOB_BLOCK.finditer(text) if _field(m.group(2), "jobid")}
        interrupted = _INTERRUPTED in text
        for match in _ERROR_BLOCK.finditer(text):
            rule, block = match.group(1), match.group(2)
            outputs, logs = _field(block, "output"), _field(block, "log")
            if (rule, outputs) not in seen:
                seen.add((rule, outputs))
                stopped = interrupted and _study_error(logs) is None
                jobs.append(FailedJob(rule, outputs, logs, "interrupted" if stopped else error_line(logs), stopped))
        for match in _EXCEPTION.finditer(text):
            job = _missing_output(match, started)
            if (job.rule, job.outputs) not in seen:
                seen.add((job.rule, job.outputs))
                jobs.append(job)
        if interrupted:
            finished = set(_FINISHED.findall(text))
            for job_id, (rule, block) in started.items():
                outputs, logs = _field(block, "output"), _field(block, "log")
                if job_id not in finished and (rule, outputs) not in seen:
                    seen.add((rule, outputs))
                    jobs.append(FailedJob(rule, outputs, logs, "interrupted", interrupted=True))
    return jobs


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def causes(parts: Sequence, failed: Sequence[FailedJob]) -> list[str]:
    """One line per cause of what is not made, with its count and its fix: the parts the plan left
    out (study.preflight.Item: `cause`, `count`, `how`) and the failed jobs."""
    lines = []
    offline = [p for p in parts if p.cause == "offline"]
    down = [j for j in failed if not j.interrupted and _OFFLINE.search(j.error)]
    if offline or down:
        datasets = (sum(p.count for p in offline if p.what.startswith("dataset"))
                    + sum(not j.rule.startswith("zoo") for j in down))
        weights = (sum(p.count for p in offline if p.what.startswith("zoo"))
                   + sum(j.rule.startswith("zoo") for j in down))
        how = f"{len(offline)} left out of the plan, {_plural(len(down), 'download')} failed"
        counts = ", ".join(_plural(n, w) for n, w in ((datasets, "dataset"), (weights, "weight file")) if n)
        lines.append(f"offline: {counts or _plural(len(down), 'job')} ({how}): {MIRRORS}")
    for part in (p for p in parts if p.cause == "not placed"):
        lines.append(f"not placed: the {part.what}: {part.how}"[:_LINE * 2])
    stopped = [j for j in failed if j.interrupted]
    if stopped:
        lines.append(f"interrupted: {_plural(len(stopped), 'job')}: run the same command again "
                     "(finished jobs are kept, these start over)")
    errors: dict[str, int] = {}
    for job in failed:
        if not job.interrupted and job not in down:
            errors[job.rule] = errors.get(job.rule, 0) + 1
    for rule, n in errors.items():
        lines.append(f"error in rule {rule}: {_plural(n, 'job')}: the error line of each below; fix it and run "
                     "the same command again")
    return lines


def _job_line(job: FailedJob) -> str:
    outputs = f"{job.outputs[0]}{f' +{len(job.outputs) - 1} more' if len(job.outputs) > 1 else ''}" \
        if job.outputs else "no outputs"
    error = job.error if len(job.error) <= _LINE else job.error[:_LINE - 3] + "..."
    return f"- {job.rule} ({outputs}): {error}" + (f" [log: {job.logs[0]}]" if job.logs else "")


def summary(figures: Mapping[str, Sequence[str]], tables: Sequence[str], left_out: Sequence[str],
            failed: Sequence[FailedJob], preset: str, ok: bool, remade: Sequence[str] = (),
            parts: Sequence = ()) -> str:
    """The markdown text: figures (panels made of planned), tables, the causes of what is not made
    (`parts`: the items the plan left out, study.preflight), what was found missing at the start and
    made again (`remade`: a killed job's outputs), left out, failed jobs."""
    lines = [f"# Run summary (preset {preset}): {'finished' if ok else 'finished with failed jobs'}", ""]
    made = {fig: [f for f in files if f.endswith(".png") and Path(f).is_file()] for fig, files in figures.items()}
    planned = {fig: [f for f in files if f.endswith(".png")] for fig, files in figures.items()}
    complete = [fig for fig in figures if planned[fig] and len(made[fig]) == len(planned[fig])]
    lines.append(f"Made: {len(complete)} of {sum(bool(p) for p in planned.values())} figures complete, "
                 f"{sum(map(len, made.values()))} of {sum(map(len, planned.values()))} panels; "
                 f"{sum(Path(t).is_file() for t in tables)} of {len(tables)} tables.")
    if why := causes(parts, failed):
        lines += ["", "Why, by cause (details below):", *(f"- {line}" for line in why)]
    lines.append("")
    for fig in figures:
        if planned[fig] and fig not in complete:
            missing = [Path(f).name for f in planned[fig] if f not in made[fig]]
            names = ", ".join(missing)
            lines.append(f"- not made: {fig}: {len(missing)} of {len(planned[fig])} panels "
                         f"({names if len(names) <= _LINE // 2 else names[:_LINE // 2 - 3] + '...'})")
    for table in tables:
        if not Path(table).is_file():
            lines.append(f"- not made: {table}")
    if remade:
        lines += ["", f"Found missing at the start and made again (a killed or removed job's outputs): "
                      f"{len(remade)} files, of which {sum(Path(f).is_file() for f in remade)} are now there."]
        lines += [f"- {'remade' if Path(f).is_file() else 'still missing'}: {f}" for f in remade]
    lines += ["", "Left out of the plan:" if left_out else "Left out of the plan: nothing."]
    lines += [f"- {line if len(line) <= _LINE * 2 else line[:_LINE * 2 - 3] + '...'}" for line in left_out]
    lines += ["", "Failed jobs (each failure stops only the jobs that need its outputs):" if failed
              else "Failed jobs: none."]
    lines += [_job_line(job) for job in failed]
    return "\n".join(lines) + "\n"


def write_summary(out: str | Path, *args, **kwargs) -> str:
    """summary(...) written to `out` (atomically), and returned for printing."""
    text = summary(*args, **kwargs)
    atomic_write_text(out, text)
    return text
