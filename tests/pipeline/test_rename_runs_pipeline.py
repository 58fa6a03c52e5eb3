"""The ci preset's results as the study wrote them before a run id was the hash of the typed
value's canonical form (commit BASE, run in a git worktree of it), renamed by `study rename-runs`
of today's code: Snakemake then plans no training and no evaluation, its tables and report accept
the renamed records, and no file but the logs names an old id. 8.5 minutes on 2 cores shared with
other jobs, most of it the old code's ci run (2 minutes on an idle machine)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.workflow import BIN, ROOT, TRAIN_RULES, WORKFLOW_FILES, plan_preset, project_dry_run, run_command

from study.checkpoints import CHECKPOINT_FILES

#: the last commit whose run ids hash the config as written (the parent of the change)
BASE = "d9552b4"
TARGETS = ("evaluate_all", "robustness_all")


def _options() -> list:
    return ["--profile", "workflow/profiles/cpu", "--cores", "2", "--config", "preset=ci", "--", *TARGETS]


def _snakemake() -> list:
    return [BIN / "snakemake", *_options()]


@pytest.fixture
def base(tmp_path):
    """A worktree of the repository at BASE (removed afterwards)."""
    path = tmp_path / "base"
    if subprocess.run(["git", "-C", ROOT, "cat-file", "-e", f"{BASE}^{{commit}}"], capture_output=True).returncode:
        pytest.skip(f"this checkout has no commit {BASE} (a shallow clone)")
    run_command(["git", "-C", ROOT, "worktree", "add", "--detach", path, BASE], ROOT)
    yield path
    run_command(["git", "-C", ROOT, "worktree", "remove", "--force", path], ROOT)


def _copy_workflow(src: Path, dest: Path) -> None:
    for name in WORKFLOW_FILES:
        target = dest / name
        if target.is_dir():
            shutil.rmtree(target)
        if (src / name).is_dir():
            shutil.copytree(src / name, target)
        else:
            shutil.copy2(src / name, target)


def _old_run(base: Path, project: Path) -> None:
    _copy_workflow(base, project)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(base)}
    env.pop("STUDY_DATA_MIRROR", None)
    proc = subprocess.run(_snakemake(), cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]


def _files_naming(root: Path, ids: set[str]) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and "logs" not in path.relative_to(root).parts:
            text = path.read_bytes()
            hits += [f"{path}: {i}" for i in ids if i.encode() in text or i in path.name]
    return hits


def test_old_ci_results_renamed_then_nothing_is_trained_again(base, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    _old_run(base, project)
    old_ids = {p.name for p in (project / "results/runs").iterdir()}

    _copy_workflow(ROOT, project)  # today's workflow and code from here on
    _, runs, _ = plan_preset(project, "ci")
    new_ids = {r.run_id for r in runs}
    changed = old_ids - new_ids
    assert changed, "no run id of the ci preset changed: this test would show nothing"
    # only the renamed runs: a folder of the old code lacks the one train rule's stand-ins too, but
    # no job reads a stand-in, so Snakemake does not rerun a train job for them
    before = project_dry_run(_options(), project).counts
    assert sum(before.get(rule, 0) for rule in TRAIN_RULES) == len(changed)  # unrenamed: trained again
    incomplete = {p.name for p in (project / "results/runs").iterdir()
                  if not all((p / file).is_file() for file in CHECKPOINT_FILES.values())}
    assert incomplete, "the old code's folders hold every checkpoint file: the stand-ins are not tested here"

    out = run_command([BIN / "study", "rename-runs"], project)
    renamed = dict(line.split(" -> ") for line in out.splitlines() if " -> " in line)
    assert set(renamed) == changed and set(renamed.values()) == new_ids - old_ids
    assert {p.name for p in (project / "results/runs").iterdir()} == new_ids
    # every run's declared files complete: the stand-ins of the one train rule written
    assert all((p / file).is_file() for p in (project / "results/runs").iterdir() for file in CHECKPOINT_FILES.values())
    assert run_command([BIN / "study", "rename-runs"], project).startswith("nothing to rename")

    after = project_dry_run(_options(), project).counts
    assert set(after) <= {"tables", "reproduction", "evaluate_all", "robustness_all", "total"}, after
    run_command(_snakemake(), project)  # the tables and the report of the renamed records
    assert "Nothing to be done" in run_command([BIN / "snakemake", "-n", *_options()], project)
    assert _files_naming(project / "results", changed) == [] and _files_naming(project / "data", changed) == []
