"""No DVC command loses a result that Snakemake made: after the ci preset's results are made with
plain Snakemake, `dvc exp run` (refused, then valid), `dvc repro` (refused by the price),
`dvc checkout`, `dvc exp apply` and `dvc exp remove` leave every file under data/ and results/
with its hash; the files Snakemake made are recorded job by job (versions/*.dvc), and the
experiment's commit holds its own records."""

import hashlib
import subprocess
import time
from pathlib import Path

import yaml
from helpers.dvc import BIN, dvc_project, run_process

from study.versions import VERSIONS, WEIGHTS_SUFFIX, finished_jobs, git_kept, owned_folders, record_outs, records

PROTECTED = ("data", "results")


def _hashes(project: Path) -> dict[str, str]:
    """Every file under data/ and results/ with its content's hash, but those git versions (each
    experiment's commit holds its own: the stages' outs, the metrics, the figures' image copies,
    which an experiment that stops before the figures removes as another configuration's)."""
    return {p.relative_to(project).as_posix(): hashlib.md5(p.read_bytes()).hexdigest()
            for root in PROTECTED for p in sorted((project / root).rglob("*"))
            if p.is_file() and not git_kept(p.relative_to(project).as_posix())}


def _cached(project: Path, md5: str) -> bool:
    return (project / ".dvc/cache/files/md5" / md5[:2] / md5[2:]).is_file()


def _kept(before: dict[str, str], project: Path, command: str, since: float | None = None,
          switch: bool = False) -> dict[str, str]:
    """The files after `command`: every one there before kept with its hash, but those that a job
    the command itself ran (Snakemake's records: ended after `since`) wrote again, and (`switch`:
    `dvc exp apply`, which checks out another experiment's version of a file) those whose content
    before is in DVC's cache, where a checkout of that version restores it."""
    after = _hashes(project)
    rewritten = {f for job in finished_jobs(project) if since is not None and job.endtime >= since
                 for f in [*job.outputs, *job.files(project)]}
    lost = sorted(p for p in before if p not in after)
    changed = sorted(p for p in before if p in after and after[p] != before[p] and p not in rewritten
                     and not (switch and _cached(project, before[p])))
    assert not lost and not changed, (f"{command}: {len(lost)} files deleted ({lost[:5]}), "
                                      f"{len(changed)} changed ({changed[:5]})")
    return after


def test_no_dvc_command_loses_what_snakemake_made(tmp_path):
    project, dvc = dvc_project(tmp_path)
    out = run_process([BIN / "snakemake", "--profile", "workflow/profiles/cpu", "--cores", "2",
                       "--config", "preset=ci", "--", "report_inputs"], project)
    assert "DVC's records:" in out.stderr, out.stderr[-3000:]
    # a record per finished job, listing every file it made that git does not keep
    jobs = finished_jobs(project)
    recorded = {out for path in records(project) for out in record_outs(project, path)[0]}
    # (a job's weights and dataset tensors in a record of their own: records-only pulls leave it)
    assert len([p for p in records(project) if not p.name.endswith(WEIGHTS_SUFFIX)]) == len(jobs) > 0
    owned = owned_folders(jobs)  # (a run's folder: its checkpoint to resume from, its selection's records)
    made = {f for job in jobs for f in job.files(project, owned[job])}
    assert any(p.endswith("/checkpoint.pt") for p in made)
    assert made == recorded
    assert any(p.startswith("results/runs/") and p.endswith("model.pt") for p in recorded)
    # a file no job made (planted by hand) is no record's: DVC must leave it alone all the same
    (project / "results/runs/planted.txt").write_text("kept\n")
    (project / "results/logs/train/planted.log").write_text("kept\n")
    before = _hashes(project)
    assert len(before) > len(recorded)

    refused = run_process([dvc, "exp", "run", "-S", "preset=dmeo"], project, ok=False)
    assert refused.returncode != 0 and "unknown preset 'dmeo'" in refused.stdout + refused.stderr
    before = _kept(before, project, "dvc exp run -S preset=dmeo")

    start = time.time()
    run_process([dvc, "exp", "run", "-n", "batch32", "-S", "preset=ci", "-S", "train.batch_size=32", "evaluate"],
                project)
    # (the preset's tables and metrics are this experiment's now: its jobs wrote them again)
    shared = {p: h for p, h in before.items() if not p.startswith("results/ci/")}
    before = _kept(before, project, "dvc exp run -S preset=ci -S train.batch_size=32", since=start)
    assert all(before[p] == h for p, h in shared.items())
    # the experiment's commit holds the records of the jobs it ran, and the values it set
    refs = run_process(["git", "for-each-ref", "--format=%(refname)", "refs/exps"], project).stdout.split()
    exp_ref = [r for r in refs if r.endswith("/batch32")]
    assert len(exp_ref) == 1, refs
    files = run_process(["git", "ls-tree", "-r", "--name-only", exp_ref[0]], project).stdout.split()
    exp_records = [f for f in files if f.startswith(f"{VERSIONS}/")]
    assert exp_records and all(f.endswith(".dvc") for f in exp_records)
    shown = run_process(["git", "show", f"{exp_ref[0]}:params.yaml"], project).stdout
    assert yaml.safe_load(shown)["train"]["batch_size"] == 32

    # the experiment is applied to the workspace: `dvc repro` runs what it left out (the figures)
    start = time.time()
    run_process([dvc, "repro"], project)
    before = _kept(before, project, "dvc repro (the applied experiment)", since=start)
    # params.yaml as committed: the paper preset, refused on this CPU by its price, in -S syntax
    run_process(["git", "checkout", "--", "params.yaml"], project)
    repro = run_process([dvc, "repro"], project, ok=False)
    assert repro.returncode != 0 and "-S confirm_price=true" in repro.stdout + repro.stderr, repro.stderr[-2000:]
    assert "--config" not in "\n".join(line for line in (repro.stdout + repro.stderr).splitlines()
                                       if line.startswith("refused:"))
    before = _kept(before, project, "dvc repro")

    for command in (["checkout"], ["checkout", "--force"], ["exp", "apply", "batch32"], ["exp", "remove", "batch32"],
                    ["checkout", "--force"]):
        run_process([dvc, *command], project, ok=command[0] != "checkout" or "--force" in command)
        before = _kept(before, project, f"dvc {' '.join(command)}", switch=command[:2] == ["exp", "apply"])
    assert (project / "results/runs/planted.txt").read_text() == "kept\n"
    # a recorded file changed by hand: a checkout without --force refuses and touches nothing
    model = next(project / p for p in sorted(recorded) if p.endswith("model.pt"))
    model.write_bytes(model.read_bytes() + b"changed by hand")
    before = _hashes(project)
    proc = subprocess.run([str(dvc), "checkout"], cwd=project, capture_output=True, text=True)
    assert proc.returncode != 0 and "unsaved" in proc.stderr
    _kept(before, project, "dvc checkout of a changed recorded file")
