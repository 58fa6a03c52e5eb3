"""The project installs as a user installs it, and its workflow passes Snakemake's linter.

pyproject.toml declares what `study` imports (torch and torchvision as a range that keeps an
installed build); environment.yml, the one conda environment every rule names, declares the
same packages with the same version specs; `snakemake --lint` finds nothing to report.
`make check-install` (CI) installs the package into a fresh venv and runs `study --help`."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Declared but not imported by study/, and why (each has its comment in pyproject.toml too).
INDIRECT = {
    "setuptools": "robustbench 1.1.1 imports pkg_resources, which setuptools 82 dropped",
    "imagecorruptions": "its frost photographs, located with find_spec (study/data/corruptions/weather.py)",
}
# distribution -> module, where they differ
IMPORT_NAMES = {"pillow": "PIL", "pyyaml": "yaml", "opencv-python": "cv2", "scikit-image": "skimage"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _specs(requirements: list[str]) -> dict[str, str]:
    """{canonical name: version specifier} of requirement strings."""
    out = {}
    for text in requirements:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name not in out, f"{name} declared twice"
        out[name] = str(req.specifier)
    return out


def _pyproject_specs() -> dict[str, str]:
    project = _pyproject()["project"]
    extras = project["optional-dependencies"]
    return _specs(project["dependencies"] + extras["workflow"] + extras["dev"])


def _environment_specs() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1, "environment.yml: one pip section"
    return _specs(pip[0])


def test_environment_yml_declares_what_pyproject_declares_with_the_same_specs():
    ours, env = _pyproject_specs(), _environment_specs()
    assert {"torch", "torchvision", "snakemake", "pytest"} <= set(ours)
    missing = sorted(set(ours) - set(env))
    extra = sorted(set(env) - set(ours))
    differ = {name: (ours[name], env[name]) for name in set(ours) & set(env) if ours[name] != env[name]}
    assert not missing, f"in pyproject.toml, not in environment.yml: {missing}"
    assert not extra, f"in environment.yml, not in pyproject.toml: {extra}"
    assert not differ, f"version specs differ (pyproject.toml, environment.yml): {differ}"


def test_environment_yml_is_one_conda_environment_with_the_package_installed_after():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["name"] and "pip" in env["dependencies"]
    assert any(str(d).startswith("python=") for d in env["dependencies"])
    # `-e .` would resolve against .snakemake/conda/ (where Snakemake copies the file); the
    # post-deploy script beside it installs the package from the working directory instead.
    deploy = ROOT / "environment.post-deploy.sh"
    assert "pip install --no-deps -e ." in deploy.read_text()


def test_torch_range_spans_the_gpu_machines_and_the_cpu_build():
    deps = {canonicalize_name(r.name): r.specifier for r in map(Requirement, _pyproject()["project"]["dependencies"])}
    for name, versions in {"torch": ("2.11.0", "2.13.0", "2.13.0+cpu"), "torchvision": ("0.26.0", "0.28.0")}.items():
        for version in versions:
            assert deps[name].contains(version), f"{name} {version} outside {deps[name]}"
    # The Makefile's setup installs exactly the local CPU build first; the range keeps it.
    makefile = (ROOT / "Makefile").read_text()
    assert "torch==2.13.0 torchvision==0.28.0" in makefile


def _imported_modules() -> set[str]:
    found = set()
    for path in (ROOT / "study").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_every_runtime_dependency_is_imported_by_study_or_says_why_not():
    imported = _imported_modules()
    unused = []
    for text in _pyproject()["project"]["dependencies"]:
        name = canonicalize_name(Requirement(text).name)
        module = IMPORT_NAMES.get(name, name.replace("-", "_"))
        if module not in imported and name not in INDIRECT:
            unused.append(name)
    assert not unused, f"declared in pyproject.toml, imported nowhere in study/: {unused}"


def _lint(tmp_path: Path, config: list[str]) -> subprocess.CompletedProcess:
    for name in ("Snakefile", "params.yaml", "environment.yml", "workflow"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, tmp_path / name)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([BIN / "snakemake", "--lint", *config], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("config", [[], ["--config", "preset=ci"], ["--config", "preset=demo"]],
                         ids=["paper", "ci", "demo"])
def test_snakemake_lint_finds_nothing(tmp_path, config):
    proc = _lint(tmp_path, config)
    out = proc.stdout + proc.stderr
    blocks = re.findall(r"^Lints for (?:rule|snakefile) .*$", out, re.M)
    assert not blocks, f"snakemake --lint {' '.join(config)}: {len(blocks)} findings:\n{out[-6000:]}"
    assert proc.returncode == 0, out[-3000:]
    assert "Congratulations, your workflow is in a good condition!" in out, out[-3000:]
