"""A copy of the project as a git repository for DVC, and the commands run in it."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


BIN = Path(sys.executable).parent


# results/params.resolved.yaml: committed, so that `dvc repro --dry` finds the params the stages declare
PROJECT_FILES = ["Snakefile", "params.yaml", "dvc.yaml", "workflow", ".gitignore", ".dvcignore", "environment.yml",
                 "results/params.resolved.yaml"]


def dvc_env() -> dict:
    import os

    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("STUDY_DATA_MIRROR", None)
    env.pop("DVC_EXP_BASELINE_REV", None)
    return env


def run_process(args, cwd, ok=True, timeout=1500) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=dvc_env(), capture_output=True, text=True,
                          timeout=timeout)
    if ok:
        assert proc.returncode == 0, f"{args} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


def git_project(dest: Path, with_study: bool = True) -> Path:
    """A copy of the project as a git repository whose commit holds the study's params.yaml."""
    for name in PROJECT_FILES:
        src = ROOT / name
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dest / name)
    if with_study:
        shutil.copytree(ROOT / "study", dest / "study", ignore=shutil.ignore_patterns("__pycache__"))
    run_process(["git", "init", "-q"], dest)
    run_process(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "."], dest)
    run_process(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "study"], dest)
    return dest


def dvc_project(dest: Path) -> tuple[Path, Path]:
    """`git_project` with DVC initialised (analytics off) and committed; the project and DVC's command."""
    project = git_project(dest)
    dvc = BIN / "dvc"
    run_process([dvc, "init", "-q"], project)
    run_process([dvc, "config", "core.analytics", "false"], project)
    run_process(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "."], project)
    run_process(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "dvc"], project)
    return project, dvc
