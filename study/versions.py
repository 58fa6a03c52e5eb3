"""DVC's record of what Snakemake made: one `.dvc` file per finished job, under versions/.

Snakemake makes every artifact of the study (prepared and constructed datasets, trained runs,
per-sample evaluation records, each preset's tables, figures and report) and DVC versions them.
A DVC stage that owned a whole folder (results/runs) would hold one hash for it, so DVC would
delete from that folder whatever it has no record of (a run Snakemake trained outside DVC, a
log), or whatever a later experiment added, when it checks out an experiment. So DVC owns no
folder: each finished Snakemake job gets its own record, `versions/<its log>.dvc`, listing the
files the job made (its outputs, log and benchmark) with their hashes, their content in DVC's
cache. DVC then manages exactly the files of finished jobs: a file it has no record of it never
touches, and a file it has a record of it can always restore. The runs are keyed by their
configuration, so two experiments that share a run share its record.

`record` writes the records of every finished job that Snakemake's own job records
(`.snakemake/metadata`) list, once a Snakemake run ends (the Snakefile's onsuccess and onerror,
whichever front end started it). A job whose input is newer than its output (an upstream job ran
again and this one did not, as in an experiment that stops before the figures) has no record:
the files it left are another configuration's, and an experiment holds only its own.
`restore_times` sets each pulled file's time to its job's end (the record's `meta`), so that
after `dvc pull` Snakemake sees the same order of inputs and outputs as where the files were made.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
from base64 import urlsafe_b64decode
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

#: the folder of the records, under the project's root (kept in git: a commit says which files it made)
VERSIONS = "versions"
#: files a record never lists: git keeps them (each experiment's commit holds them, dvc.yaml's
#: top-level metrics and plots and the stages' summaries), or they are a run's resolved params
GIT_KEPT = ("results/*/metrics/*", "results/*/figure_images/*", "results/params.resolved.yaml",
            "results/*/run_summary/*", "results/*/run_summary.md")
#: what `pull --records-only` leaves on the remote: the model weights (the bulk: 3.1 of the reproduce
#: preset's 3.3 GB), recorded apart from a job's other files, in `<record>.weights.dvc`. The datasets'
#: tensors (data/) travel with the records: a figure draws their images, and preparing a dataset
#: again would make every training that read it look outdated to Snakemake
WEIGHTS_SUFFIX = ".weights.dvc"


def is_weights(path: str) -> bool:
    """A model's weights: a `.pt` file under results/ (a run's checkpoints, a zoo model's)."""
    return path.startswith("results/") and path.endswith(".pt")


@dataclass(frozen=True)
class Job:
    """A finished Snakemake job, read from Snakemake's records of its outputs."""

    rule: str
    outputs: tuple[str, ...]
    logs: tuple[str, ...]
    inputs: tuple[str, ...]
    endtime: float

    @property
    def record(self) -> str:
        """Its record's path: versions/ and the path of its log (or first output), `.dvc` for the suffix."""
        name = self.logs[0] if self.logs else self.outputs[0]
        return f"{VERSIONS}/{Path(name).with_suffix('').as_posix()}.dvc"

    @property
    def heavy_record(self) -> str:
        """The record of its model weights (is_weights) beside the other: a records-only pull leaves
        them on the remote by leaving this file alone."""
        return self.record.removesuffix(".dvc") + WEIGHTS_SUFFIX

    def files(self, root: Path, owned: Iterable[str] = ()) -> list[str]:
        """What the job made: outputs, logs and the benchmark beside the log (each rule writes one
        at the log's path under benchmarks/, .tsv), and the other files of the folders it `owned`
        (a run's folder: the checkpoint to resume from, the selection's records), those that exist
        and git does not keep."""
        benchmarks = [_benchmark_of(log) for log in self.logs]
        extra = [p.relative_to(root).as_posix() for folder in owned for p in (root / folder).iterdir() if p.is_file()]
        paths = [*self.outputs, *self.logs, *benchmarks, *extra]
        return sorted({p for p in paths if (root / p).is_file() and not git_kept(p)})


def git_kept(path: str) -> bool:
    return any(fnmatch.fnmatch(path, pattern) for pattern in GIT_KEPT)


def _benchmark_of(log: str) -> str:
    parts = Path(log).with_suffix(".tsv").parts
    return Path(*["benchmarks" if p == "logs" else p for p in parts]).as_posix()


def output_of(metadata: Path, path: Path) -> str:
    """The output path a Snakemake metadata record is of: its file name (split into folders, each
    but the last marked `@`, where the name is longer than the file system allows) in urlsafe base64."""
    parts = path.relative_to(metadata).parts
    return urlsafe_b64decode("".join(p.removeprefix("@") for p in parts)).decode()


def finished_jobs(root: Path) -> list[Job]:
    """Every job whose outputs Snakemake recorded as finished (not incomplete) and that are all
    there, grouped by job (its rule and log; a job without a log by its hash)."""
    metadata = root / ".snakemake" / "metadata"
    incomplete_dir = root / ".snakemake" / "incomplete"
    incomplete = set()
    if incomplete_dir.is_dir():
        incomplete = {output_of(incomplete_dir, p) for p in incomplete_dir.rglob("*") if p.is_file()}
    groups: dict[tuple, dict] = {}
    for path in sorted(p for p in metadata.rglob("*") if p.is_file()) if metadata.is_dir() else []:
        try:
            output = output_of(metadata, path)
            meta = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue  # not a record of Snakemake's
        logs = tuple(meta.get("log") or ())
        key = (meta.get("rule"), logs or meta.get("job_hash"))
        group = groups.setdefault(key, {"rule": meta.get("rule"), "logs": logs, "outputs": [], "inputs": set(),
                                        "endtime": 0.0, "bad": False})
        group["outputs"].append(output)
        group["inputs"].update(meta.get("input") or ())
        group["endtime"] = max(group["endtime"], float(meta.get("endtime") or 0.0))
        group["bad"] |= bool(meta.get("incomplete")) or output in incomplete or not (root / output).is_file()
    jobs = []
    for group in groups.values():
        if group["bad"]:
            continue
        outputs = tuple(sorted(group["outputs"]))
        jobs.append(Job(group["rule"], outputs, group["logs"], tuple(sorted(group["inputs"])), group["endtime"]))
    return jobs


def _older_than_an_input(job: Job, root: Path) -> bool:
    outputs = [(root / p).stat().st_mtime for p in job.outputs]
    inputs = [(root / p).stat().st_mtime for p in job.inputs if (root / p).is_file()]
    return bool(inputs and outputs) and max(inputs) > min(outputs)


#: the folders a job owns whole: a run's (its training writes, beside the files Snakemake names, the
#: checkpoint it resumes from and the records of its checkpoint selection)
RUN_FOLDERS = ("results/runs/*", "results/zoo/runs/*")


def owned_folders(jobs: list[Job]) -> dict[Job, list[str]]:
    """The run folders each job owns: those holding its outputs and no other job's."""
    holders: dict[str, set[Job]] = {}
    for job in jobs:
        for out in job.outputs:
            folder = Path(out).parent.as_posix()
            if any(fnmatch.fnmatch(folder, pattern) and "/" not in folder[len(pattern) - 1:]
                   for pattern in RUN_FOLDERS):
                holders.setdefault(folder, set()).add(job)
    return {job: sorted(folder for folder, who in holders.items() if who == {job}) for job in jobs}


def stale_jobs(jobs: list[Job], root: Path) -> set[Job]:
    """The jobs whose files are left from before their inputs changed: an input newer than the
    job's oldest output (Snakemake's own test), or made by such a job (a figure's copy is as stale
    as the figure, though the figure's file is older)."""
    made_by = {out: job for job in jobs for out in job.outputs}
    stale = {job for job in jobs if _older_than_an_input(job, root)}
    grown = True
    while grown:
        more = {job for job in jobs if job not in stale and any(made_by.get(i) in stale for i in job.inputs)}
        stale |= more
        grown = bool(more)
    return stale


def _relative(record: str, path: str) -> str:
    return os.path.relpath(path, Path(record).parent)


def _write_record(root: Path, record: str, job: Job, files: list[str]) -> None:
    """The record's text (its outs' paths, the job it is of), written where it changed."""
    path = root / record
    wanted = [_relative(record, f) for f in files]
    meta: dict = {"rule": job.rule, "endtime": job.endtime}
    if kept := [o for o in job.outputs if git_kept(o)]:
        meta["git_kept"] = kept  # its outputs that git holds: their time is set on a pull as well
    if path.is_file():
        old = yaml.safe_load(path.read_text()) or {}
        if [o.get("path") for o in old.get("outs") or []] == wanted and old.get("meta") == meta:
            return
    path.parent.mkdir(parents=True, exist_ok=True)
    from study.io import atomic_write_text

    atomic_write_text(path, yaml.safe_dump({"outs": [{"path": p} for p in wanted], "meta": meta}, sort_keys=False))


@dataclass(frozen=True)
class Recorded:
    records: list[str]   # the records written or confirmed
    dropped: list[str]   # the records of jobs whose inputs changed since, and the copies git keeps of their files
    files: int           # the files they list


def record(root: Path, stage: bool | None = None, also: Iterable[str] = (), skip: Iterable[str] = ()) -> Recorded:
    """A record of every finished job under versions/, its files hashed into DVC's cache (DVC's
    commit: a file already there is not copied again); a stale job's record removed. With
    `stage`, the records are added to git's index (an experiment's commit then holds them);
    None: where DVC's core.autostage is set. `also`: files no job lists (the report, which
    Snakemake's --report writes), each its own record, its time the file's. `skip`: folders or
    files whose jobs get no record here (what a later DVC stage makes: `drop_under`). A record of
    another job that lists a file one of these jobs made now (the file's maker changed: a copy
    for the preset last selected) is removed: two records never list one file."""
    from dvc.repo import Repo

    root = root.resolve()
    jobs = finished_jobs(root)
    stale = stale_jobs(jobs, root)
    owned = owned_folders(jobs)
    written, dropped, files = [], [], 0
    skipped = {Path(f).as_posix().rstrip("/") for f in skip}
    skip_prefixes = tuple(f"{f}/" for f in skipped)
    with Repo(str(root), _wait_for_lock=True) as repo:
        targets = []
        for job in jobs:
            if any(f in skipped or f.startswith(skip_prefixes) for f in job.outputs):
                continue
            if job in stale:
                dropped += _remove(root, [job.record, job.heavy_record, *(o for o in job.outputs if git_kept(o))])
                continue
            paths = [p for p in job.files(root, owned[job]) if not repo.dvcignore.is_ignored(repo.fs, str(root / p))]
            heavy = [p for p in paths if is_weights(p)]
            for record_path, part in ((job.record, [p for p in paths if p not in heavy]), (job.heavy_record, heavy)):
                if part:
                    _write_record(root, record_path, job, part)
                    targets.append(record_path)
                    files += len(part)
        for path in also:
            rel = (root / path).resolve().relative_to(root).as_posix()
            job = Job("report", (rel,), (), (), (root / rel).stat().st_mtime)
            _write_record(root, job.record, job, [rel])
            targets.append(job.record)
            files += 1
        dropped += _remove(root, superseded(root, targets))
        for target in targets:
            repo.commit(str(root / target), force=True, relink=False)
        written = targets
        if stage is None:
            stage = bool(repo.config["core"].get("autostage", False))
    if stage and (root / ".git").exists():
        _git_stage(root, written, dropped)
    return Recorded(written, dropped, files)


def drop_under(root: Path, folders: Iterable[str], stage: bool = False) -> list[str]:
    """Before a DVC stage runs: the records that list a file under `folders` (what a later stage makes
    from what this one changes: the figures, from the tables) removed, and the copies git keeps
    there; the other files stay, untouched by DVC until a run records them again. An experiment
    that stops before that later stage then holds none of another configuration's files."""
    root = root.resolve()
    exact = {Path(f).as_posix().rstrip("/") for f in folders}
    prefixes = tuple(f"{f}/" for f in exact)
    dropped = []
    for rec in records(root):
        outs, _ = record_outs(root, rec)
        if any(o in exact or o.startswith(prefixes) for o in outs):
            rec.unlink()
            dropped.append(rec.relative_to(root).as_posix())
    for folder in sorted(exact):
        for path in sorted((root / folder).rglob("*")) if (root / folder).is_dir() else []:
            rel = path.relative_to(root).as_posix()
            if path.is_file() and git_kept(rel):
                path.unlink()
                dropped.append(rel)
    if stage and dropped and (root / ".git").exists():
        _git_stage(root, [], dropped)
    return dropped


def _remove(root: Path, paths: Iterable[str]) -> list[str]:
    """Those of `paths` that were there, removed. A stale job's records and the copies git keeps of
    its files (a figure's image, a metrics file) may not stand for this configuration's in an
    experiment's commit; Snakemake makes them again."""
    gone = [p for p in paths if (root / p).is_file()]
    for path in gone:
        (root / path).unlink()
    return gone


def superseded(root: Path, targets: list[str]) -> list[str]:
    """The other records that list a file one of `targets` lists: its maker changed (a copy of the
    preset last selected, results/figures/all), and two records never list one file."""
    listed = {(root / t).resolve() for t in targets}
    claimed = {out for t in targets for out in record_outs(root, root / t)[0]}
    return [other.relative_to(root).as_posix() for other in records(root)
            if other.resolve() not in listed and set(record_outs(root, other)[0]) & claimed]


def _git_stage(root: Path, written: list[str], dropped: list[str]) -> None:
    """The records written added to git's index, those dropped (and the copies removed) taken out
    of it where git had them."""
    def git(*args: str) -> None:
        proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"git {args[0]} of the records failed: {proc.stderr.strip()}")

    for start in range(0, len(written), 500):  # a command line's worth at a time
        git("add", "--", *written[start:start + 500])
    for start in range(0, len(dropped), 500):
        git("rm", "--cached", "--ignore-unmatch", "-q", "--", *dropped[start:start + 500])


def records(root: Path) -> Iterable[Path]:
    return sorted((root / VERSIONS).rglob("*.dvc")) if (root / VERSIONS).is_dir() else []


def record_outs(root: Path, path: Path) -> tuple[list[str], dict]:
    """A record's files (paths from the root) and its meta."""
    data = yaml.safe_load(path.read_text()) or {}
    base = path.parent.relative_to(root)
    outs = [os.path.normpath(base / o["path"]) for o in data.get("outs") or []]
    return outs, data.get("meta") or {}


def restore_times(root: Path) -> int:
    """Each file of a record, and each of its job's outputs that git holds, set to its job's end
    time (pulled and checked-out files carry the time of the pull, in no order: Snakemake would
    take them all for outdated); how many files."""
    count = 0
    for path in records(root):
        outs, meta = record_outs(root, path)
        when = meta.get("endtime")
        if not when:
            continue
        for out in [*outs, *meta.get("git_kept", [])]:
            if (root / out).is_file():
                os.utime(root / out, (when, when))
                count += 1
    return count


def pull_targets(root: Path, records_only: bool) -> list[str]:
    """What a pull fetches: every record, or (records only) every record but those of heavy files."""
    return [p.relative_to(root).as_posix() for p in records(root)
            if not (records_only and p.name.endswith(WEIGHTS_SUFFIX))]


#: the files `study pull --records-only` left on the remote, one a line (a full pull removes it)
NOT_PULLED = Path("results/not-pulled.txt")


def write_not_pulled(root: Path, targets: list[str]) -> int:
    """The files of the records that a records-only pull left on the remote, listed."""
    pulled = set(targets)
    left = sorted({out for path in records(root) if path.relative_to(root).as_posix() not in pulled
                   for out in record_outs(root, path)[0]})
    from study.io import atomic_write_text

    (root / NOT_PULLED).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(root / NOT_PULLED, "".join(f"{p}\n" for p in left))
    return len(left)


def refuse_not_pulled(path: str | Path) -> None:
    """One line refusing a job that would make `path` again where a records-only pull left the
    recorded one on the remote: pulling it is minutes, making it again can be GPU-days."""
    listed = Path(NOT_PULLED)
    if not listed.is_file():
        return
    if Path(path).as_posix() in set(listed.read_text().split("\n")):
        raise FileNotFoundError(f"{path} was left on the DVC remote by `study pull --records-only` "
                                f"({NOT_PULLED}): `study pull` fetches it; to make it here instead, remove "
                                f"{NOT_PULLED}")
