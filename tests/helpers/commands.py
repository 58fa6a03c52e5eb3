"""The `study` command as a user runs it, from any test."""

import shutil
import subprocess
import sys
from pathlib import Path


def run_study(*args: str, cwd: Path | None = None, check: bool = True, env: dict | None = None):
    """Run the installed `study` command as a user would."""
    exe = shutil.which("study") or str(Path(sys.executable).parent / "study")
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"study {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc
