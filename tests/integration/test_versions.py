"""DVC's records of what Snakemake made (study.versions), on a real two-job Snakemake run in a real
git + DVC repository: one record per finished job, listing its outputs and log with their hashes;
none for a job whose input changed since or that Snakemake marks incomplete; the job's end time
put back on its files after a pull; a records-only pull's refusal of a job that needs what it left."""

import os
import subprocess
import sys
from base64 import urlsafe_b64encode
from pathlib import Path

import pytest
import yaml

from study.versions import (
    NOT_PULLED,
    VERSIONS,
    drop_under,
    finished_jobs,
    pull_targets,
    record,
    record_outs,
    records,
    refuse_not_pulled,
    restore_times,
    write_not_pulled,
)

BIN = Path(sys.executable).parent
SNAKEFILE = """
rule make_weights:
    output: "results/runs/r1/model.pt", "results/runs/r1/epochs.csv"
    log: "results/logs/train/r1.log"
    shell: "echo weights > {output[0]} && echo 1,2 > {output[1]} && echo trained > {log}"

rule table:
    input: "results/runs/r1/epochs.csv"
    output: "results/demo/tables/t.csv", "results/demo/metrics/m.json"
    log: "results/demo/logs/table.log"
    shell: "cat {input} > {output[0]} && echo '{{}}' > {output[1]} && echo tabled > {log}"

rule draw:
    input: "results/demo/tables/t.csv"
    output: "results/demo/figures/f.png", "results/demo/figure_images/f.png"
    log: "results/demo/logs/draw.log"
    shell: "cat {input} > {output[0]} && cp {output[0]} {output[1]} && echo drawn > {log}"
"""


def _run(args, cwd) -> str:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.fixture
def project(tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    _run(["git", "init", "-q"], tmp_path)
    _run([BIN / "dvc", "init", "-q"], tmp_path)
    _run([BIN / "snakemake", "-c1", "results/demo/figures/f.png"], tmp_path)
    return tmp_path


def test_a_record_per_finished_job_lists_its_files_and_git_keeps_the_metrics(project):
    done = record(project)
    assert sorted(done.records) == [f"{VERSIONS}/{name}" for name in (
        "results/demo/logs/draw.dvc", "results/demo/logs/table.dvc", "results/logs/train/r1.dvc",
        "results/logs/train/r1.weights.dvc")]
    outs = {p.relative_to(project).as_posix(): record_outs(project, p) for p in records(project)}
    train, meta = outs[f"{VERSIONS}/results/logs/train/r1.dvc"]
    # the weights apart (a records-only pull leaves that record's files on the remote)
    assert sorted(train) == ["results/logs/train/r1.log", "results/runs/r1/epochs.csv"]
    assert outs[f"{VERSIONS}/results/logs/train/r1.weights.dvc"][0] == ["results/runs/r1/model.pt"]
    assert meta["rule"] == "make_weights" and meta["endtime"] > 0
    table, meta = outs[f"{VERSIONS}/results/demo/logs/table.dvc"]
    # the metrics file is git's (an experiment's commit holds it), so no record lists it
    assert sorted(table) == ["results/demo/logs/table.log", "results/demo/tables/t.csv"]
    assert outs[f"{VERSIONS}/results/demo/logs/draw.dvc"][1]["git_kept"] == ["results/demo/figure_images/f.png"]
    assert meta["git_kept"] == ["results/demo/metrics/m.json"]
    # each hash is the file's, and its content is in DVC's cache
    import hashlib

    data = yaml.safe_load((project / VERSIONS / "results/logs/train/r1.weights.dvc").read_text())
    for out in data["outs"]:
        path = (project / VERSIONS / "results/logs/train" / out["path"]).resolve()
        assert out["md5"] == hashlib.md5(path.read_bytes()).hexdigest()
        assert (project / ".dvc/cache/files/md5" / out["md5"][:2] / out["md5"][2:]).is_file()
    status = _run([BIN / "dvc", "status"], project)
    assert "up to date" in status, status


def test_a_job_older_than_its_input_or_incomplete_gets_no_record(project):
    record(project)
    later = (project / "results/runs/r1/epochs.csv").stat().st_mtime + 10
    os.utime(project / "results/runs/r1/epochs.csv", (later, later))  # the training ran again; the table did not
    done = record(project, stage=True)  # as under `dvc exp run`: into git's index, the experiment's commit
    staged = _run(["git", "diff", "--cached", "--name-only"], project).split()
    assert f"{VERSIONS}/results/logs/train/r1.dvc" in staged
    assert not [p for p in staged if "demo/logs" in p]
    # the table is older than its input; the figure, drawn from that table, is as stale though newer
    assert {f"{VERSIONS}/results/demo/logs/table.dvc", f"{VERSIONS}/results/demo/logs/draw.dvc"} <= set(done.dropped)
    assert not (project / VERSIONS / "results/demo/logs/table.dvc").exists()
    assert not (project / VERSIONS / "results/demo/logs/draw.dvc").exists()
    # their copies in git are another configuration's: removed (Snakemake makes them again), the rest kept
    assert not (project / "results/demo/metrics/m.json").exists()
    assert not (project / "results/demo/figure_images/f.png").exists()
    assert (project / "results/demo/tables/t.csv").exists() and (project / "results/demo/figures/f.png").exists()
    # (the table's job lacks an output now: not finished either, until Snakemake makes it again)
    assert {job.rule for job in finished_jobs(project)} == {"make_weights"}
    # a job Snakemake marks incomplete (killed while it ran) is not finished
    marker = project / ".snakemake/incomplete" / urlsafe_b64encode(b"results/runs/r1/model.pt").decode()
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("")
    assert not finished_jobs(project)


def test_a_pull_puts_back_each_job_end_time_and_a_records_only_pull_refuses_the_jobs_it_starves(project,
                                                                                              monkeypatch):
    record(project)
    endtimes = {}
    for path in records(project):
        outs, meta = record_outs(project, path)
        for out in [*outs, *meta.get("git_kept", [])]:
            endtimes[out] = meta["endtime"]
            os.utime(project / out, (1_000, 1_000))  # a pull's times: in no order
    assert restore_times(project) == len(endtimes)
    assert {out: (project / out).stat().st_mtime for out in endtimes} == pytest.approx(endtimes)
    out = _run([BIN / "snakemake", "-n", "-c1", "results/demo/figures/f.png"], project)
    assert "Nothing to be done" in out
    # a records-only pull leaves the .pt files on the remote, and says which
    targets = pull_targets(project, records_only=True)
    assert f"{VERSIONS}/results/logs/train/r1.dvc" in targets
    assert f"{VERSIONS}/results/logs/train/r1.weights.dvc" not in targets
    assert len(pull_targets(project, records_only=False)) == len(targets) + 1
    assert write_not_pulled(project, targets) == 1
    monkeypatch.chdir(project)
    with pytest.raises(FileNotFoundError, match=r"results/runs/r1/model.pt was left on the DVC remote .*`study pull`"):
        refuse_not_pulled("results/runs/r1/model.pt")
    refuse_not_pulled("results/runs/r1/epochs.csv")  # pulled: nothing to refuse
    assert (project / NOT_PULLED).read_text() == "results/runs/r1/model.pt\n"


def test_a_stage_drops_the_records_of_what_a_later_stage_makes(project):
    """`python -m study.stage --outdates`: the figures' records and image copies go before the
    evaluations change, so an experiment stopping there holds no figure of another's; the files stay."""
    record(project)
    dropped = drop_under(project, ["results/demo/figures", "results/demo/figure_images"])
    assert sorted(dropped) == ["results/demo/figure_images/f.png", f"{VERSIONS}/results/demo/logs/draw.dvc"]
    assert (project / "results/demo/figures/f.png").exists()
    assert (project / VERSIONS / "results/demo/logs/table.dvc").exists()  # its files lie elsewhere too
    assert "up to date" in _run([BIN / "dvc", "status"], project)


def test_two_records_never_list_one_file(project):
    """A file another job makes now (a copy of the preset last selected): the older record that
    listed it goes, or DVC would refuse every command on the overlap."""
    record(project)
    older = project / VERSIONS / "results/other/logs/table.dvc"
    older.parent.mkdir(parents=True)
    older.write_text(yaml.safe_dump({"outs": [{"path": "../../../../results/demo/tables/t.csv"}]}))
    done = record(project)
    assert f"{VERSIONS}/results/other/logs/table.dvc" in done.dropped and not older.exists()
    assert "up to date" in _run([BIN / "dvc", "status"], project)
