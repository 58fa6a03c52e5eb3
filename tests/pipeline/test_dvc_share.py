"""Results that travel: the ci preset run through DVC (`dvc exp run`), committed and pushed to a
real SSH server on 127.0.0.1 (Debian's OpenSSH, DVC's SSH remote); a fresh clone pulls them
(`study pull`, what `make pull` runs) and then `dvc status` is clean, Snakemake plans no
training or evaluation, and the report rebuilds from what was pulled. A second clone pulls the
records alone (no model weights): the tables, figures and report rebuild all the same, and a job
that would need the weights refuses in one line that names the command fetching them."""

import sys
import time
from pathlib import Path

from helpers.dvc import BIN, dvc_project, run_process
from helpers.ssh_server import configure_dvc_remote, ssh_remote
from helpers.workflow import job_stats

from study.versions import is_weights, record_outs, records

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
#: the rules whose jobs a pull must leave nothing to do for (the expensive ones)
COSTLY = ("train", "construct", "prepare", "evaluate", "corruptions", "check")


def _size(project: Path, paths) -> int:
    return sum((project / p).stat().st_size for p in paths if (project / p).is_file())


def _planned(project: Path) -> dict[str, int]:
    """Snakemake's dry run of the report's inputs: {rule: jobs} of what it would run."""
    out = run_process([BIN / "snakemake", "-n", "--profile", "workflow/profiles/cpu", "--cores", "2", "--",
                       "report_inputs"], project)
    return {rule: n for rule, n in job_stats(out.stdout + out.stderr).items() if rule != "total"}


def _clone(origin: Path, dest: Path, remote) -> Path:
    run_process(["git", "clone", "-q", origin, dest], dest.parent)
    configure_dvc_remote(dest, remote, local_only=True)
    return dest


def test_a_pushed_result_set_is_pulled_and_rebuilds_nothing(tmp_path):
    project, dvc = dvc_project(tmp_path / "owner")
    # the owner: the preset through DVC (dvc.lock records what ran), committed as `git add -A` finds it
    run_process([dvc, "exp", "run", "-S", "preset=ci"], project)
    run_process([*GIT, "add", "-A"], project)
    run_process([*GIT, "commit", "-qm", "the ci preset's results"], project)
    untracked = run_process(["git", "status", "--porcelain"], project).stdout
    assert not untracked.strip(), untracked
    with ssh_remote(tmp_path / "server") as remote:
        configure_dvc_remote(project, remote)
        run_process([*GIT, "commit", "-qam", "the default remote"], project)
        start = time.monotonic()
        run_process([dvc, "push"], project)
        pushed_s = time.monotonic() - start
        recorded = sorted({out for path in records(project) for out in record_outs(project, path)[0]})
        assert any(p.endswith("report.html") for p in recorded)  # the report travels with the results
        heavy = [p for p in recorded if is_weights(p)]
        light = [p for p in recorded if not is_weights(p)]
        print(f"pushed {len(recorded)} files ({_size(project, recorded) / 1e6:.1f} MB) in {pushed_s:.1f} s; "
              f"records {len(light)} files ({_size(project, light) / 1e6:.1f} MB), weights "
              f"{len(heavy)} ({_size(project, heavy) / 1e6:.1f} MB)", file=sys.stderr)

        reader = _clone(project, tmp_path / "reader", remote)
        start = time.monotonic()
        run_process([BIN / "study", "pull"], reader)
        pulled_s = time.monotonic() - start
        assert all((reader / p).is_file() for p in recorded)
        status = run_process([dvc, "status"], reader).stdout
        assert "Data and pipelines are up to date" in status, status
        planned = _planned(reader)
        assert not {rule for rule in planned if rule.startswith(COSTLY)}, planned
        start = time.monotonic()
        report = reader / "results/ci/report.html"
        report.unlink()
        run_process([BIN / "snakemake", "--profile", "workflow/profiles/cpu", "--cores", "2", "--report", report,
                     "--", "report_inputs"], reader)
        report_s = time.monotonic() - start
        assert report.stat().st_size > 0
        print(f"full pull: {pulled_s:.1f} s; dvc status: {status.strip()}; planned after it: {planned or 'nothing'}; "
              f"report rebuilt in {report_s:.1f} s", file=sys.stderr)

        records_only = _clone(project, tmp_path / "records-only", remote)
        start = time.monotonic()
        run_process([BIN / "study", "pull", "--records-only"], records_only)
        light_s = time.monotonic() - start
        assert all((records_only / p).is_file() for p in light)
        assert not any((records_only / p).exists() for p in heavy)
        planned = _planned(records_only)
        assert not {rule for rule in planned if rule.startswith(COSTLY)}, planned
        # every table, figure and the report rebuilt from the records alone
        for folder in ("tables", "figures"):
            for path in sorted((records_only / "results/ci" / folder).rglob("*")):
                if path.is_file():
                    path.unlink()
        # (what `make report` runs: the report's inputs, then the report of them)
        rebuilt = run_process([BIN / "snakemake", "--profile", "workflow/profiles/cpu", "--cores", "2", "--",
                               "report_inputs"], records_only)
        assert not {rule for rule in job_stats(rebuilt.stdout + rebuilt.stderr) if rule.startswith(COSTLY)}
        run_process([BIN / "snakemake", "--profile", "workflow/profiles/cpu", "--cores", "2", "--report",
                     records_only / "results/ci/report.html", "--", "report_inputs"], records_only)
        assert {p.name for p in (records_only / "results/ci/figures").rglob("*.png")} == {
            Path(p).name for p in light if p.startswith("results/ci/figures/") and p.endswith(".png")}
        print(f"records-only pull: {light_s:.1f} s", file=sys.stderr)
        # a job that needs the weights refuses, naming the pull that fetches them
        model = next(p for p in heavy if p.startswith("results/runs/") and p.endswith("/model.pt"))
        job = run_process([BIN / "snakemake", "--profile", "workflow/profiles/cpu", "--cores", "1", "--", model],
                          records_only, ok=False)
        assert job.returncode != 0
        text = job.stdout + job.stderr
        assert "was left on the DVC remote by `study pull --records-only`" in text and "`study pull`" in text, \
            text[-3000:]
        assert not (records_only / model).exists()
