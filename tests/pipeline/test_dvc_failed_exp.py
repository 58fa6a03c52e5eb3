"""A `dvc exp run -S` whose value the study refuses leaves params.yaml as committed (DVC writes the
values into it before the stages run, dropping its comments, and leaves it so when a stage
fails), so the next `dvc repro` runs; Ctrl-C of `dvc repro` is one line and status 130."""

import os
import signal
import subprocess
import time

from helpers.dvc import dvc_env, dvc_project, run_process


def test_a_refused_exp_run_leaves_params_yaml_as_committed(tmp_path):
    project, dvc = dvc_project(tmp_path)
    committed = (project / "params.yaml").read_text()
    proc = run_process([dvc, "exp", "run", "-S", "preset=ci", "-S", "train.epochs=-1"], project, ok=False)
    assert proc.returncode != 0
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("study.stage: ")]
    assert len(lines) == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "train.epochs: -1" in lines[0] and "params.yaml was put back as committed at" in lines[0]
    assert "preset=ci, train.epochs=-1" in lines[0]
    assert (project / "params.yaml").read_text() == committed  # every comment line too
    # the next run of the pipeline starts (its dry run plans the study's stages without an error)
    status = run_process([dvc, "repro", "--dry", "data"], project, ok=False)
    assert status.returncode == 0 and "study.stage:" not in status.stderr, status.stdout + status.stderr


def test_ctrl_c_of_dvc_repro_is_one_line_and_status_130(tmp_path):
    project, dvc = dvc_project(tmp_path)
    (project / "params.yaml").write_text((project / "params.yaml").read_text().replace("preset: paper", "preset: ci"))
    proc = subprocess.Popen([str(dvc), "repro", "data"], cwd=project, env=dvc_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(("rule ", "localrule ")):  # Snakemake runs its first job
            break
    time.sleep(1)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    rest = proc.stdout.read()
    proc.wait(timeout=120)
    out = "".join(seen) + rest
    # (a Ctrl-C while Snakemake still parses the Snakefile gets Snakemake's own traceback; once it runs
    # jobs, it stops them, and each `study` job and the stage say "interrupted")
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-3000:]
    assert "study.stage: interrupted" in out, out[-3000:]
    assert proc.returncode != 0
    # nothing left that stops the next run: Snakemake removed its lock
    assert not any((project / ".snakemake/locks").glob("*")) if (project / ".snakemake/locks").exists() else True
