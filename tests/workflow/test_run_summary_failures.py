"""The run summary's failed jobs, read from real Snakemake logs of a tiny workflow: a job that
ends without writing a declared output (MissingOutputException: no `Error in rule` block), a job
that fails with a `study`-style error line, and a run stopped with Ctrl-C (SIGINT) while a job runs."""

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers.workflow import BIN, ROOT

SNAKEFILE = '''
rule all:
    input: "silent.txt", "loud.txt"

rule silent:  # exits 0 and writes nothing: Snakemake's MissingOutputException
    output: "silent.txt"
    log: "logs/silent.log"
    shell: "echo 'training run on cpu' > {log}"

rule loud:
    output: "loud.txt"
    log: "logs/loud.log"
    shell: "echo 'study train: error: the data is bad' > {log}; exit 2"

rule slow:
    output: "slow.txt"
    log: "logs/slow.log"
    shell: "echo 'training slow on cpu' > {log}; sleep 60; touch {output}"
'''


def _failed_jobs(logs):
    spec = importlib.util.spec_from_file_location("run_summary", ROOT / "workflow/rules/run_summary.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("run_summary", module)  # (its dataclass looks its module up)
    spec.loader.exec_module(module)
    return module.failed_jobs(logs)


def _workflow(tmp_path) -> Path:
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    return tmp_path


def _snakemake(project, *targets):
    return [BIN / "snakemake", "--cores", "2", "--keep-going", "--latency-wait", "0", "--workflow-profile", "none",
            *targets]


def test_a_missing_output_and_a_failed_job_are_both_listed(tmp_path, monkeypatch):
    project = _workflow(tmp_path)
    proc = subprocess.run(_snakemake(project), cwd=project, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "MissingOutputException in rule silent" in proc.stderr
    monkeypatch.chdir(project)  # the jobs' logs are named relative to the project, as in onerror
    jobs = {job.rule: job for job in _failed_jobs(sorted(project.glob(".snakemake/log/*.log")))}
    assert set(jobs) == {"silent", "loud"}
    assert jobs["silent"].outputs == ("silent.txt",) and jobs["silent"].logs == ("logs/silent.log",)
    assert jobs["silent"].error == "MissingOutputException: the job ended without writing silent.txt"
    assert jobs["loud"].error == "study train: error: the data is bad"
    assert not any(job.interrupted for job in jobs.values())


def test_a_job_stopped_by_ctrl_c_reads_interrupted(tmp_path, monkeypatch):
    project = _workflow(tmp_path)
    proc = subprocess.Popen(_snakemake(project, "slow.txt"), cwd=project, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    log = project / "logs/slow.log"
    deadline = time.monotonic() + 60
    while not (log.is_file() and log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the terminal's whole process group
    proc.wait(timeout=60)
    monkeypatch.chdir(project)
    jobs = _failed_jobs(sorted(project.glob(".snakemake/log/*.log")))
    assert [(job.rule, job.error, job.interrupted) for job in jobs] == [("slow", "interrupted", True)], jobs
