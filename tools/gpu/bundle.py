"""`make gpu-bundle`: the git-ignored folder gpu-bundle/ that travels with the checkout to a
bare GPU machine (docs/performance.md, "On a GPU machine"): the wheels that the GPU check
needs and the machine lacks, for CPython 3.12 on manylinux x86_64, and the CIFAR-10 JPEG
archive from the local mirror ($STUDY_DATA_MIRROR). Needs PyPI; fails with one line if the
mirror is missing or the folder is over 40 MiB."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ARCHIVE, BUNDLE, MIRROR, NEEDED, WHEELS, folder_bytes, size_line  # noqa: E402

TARGET = ["--only-binary=:all:", "--python-version", "3.12", "--platform", "manylinux2014_x86_64",
          "--implementation", "cp"]


class BundleError(Exception):
    """One line for the user."""


def mirror_archive(env: dict | None = None) -> Path:
    """The CIFAR-10 JPEG archive in the local mirror that $STUDY_DATA_MIRROR names."""
    env = os.environ if env is None else env
    mirror = env.get("STUDY_DATA_MIRROR")
    if not mirror:
        raise BundleError("gpu-bundle: STUDY_DATA_MIRROR is not set (the local mirror holding cifar10-jpeg/)")
    path = Path(mirror, *ARCHIVE)
    if not path.is_file():
        raise BundleError(f"gpu-bundle: no {'/'.join(ARCHIVE)} in STUDY_DATA_MIRROR ({mirror})")
    return path


def _pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"],
                          capture_output=True, text=True)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise BundleError(f"gpu-bundle: pip {args[0]} failed: {last}")


def pyautoattack_wheel(spec: str, wheels: Path) -> None:
    """A wheel of pyautoattack built from its sdist without its examples (a 45 MB model that
    its own wheel and sdist both hold; the package never imports them)."""
    with tempfile.TemporaryDirectory() as tmp:
        _pip("download", "--no-deps", "--no-binary=:all:", spec, "-d", tmp)
        sdist = next(Path(tmp).glob("pyautoattack-*.tar.gz"))
        with tarfile.open(sdist) as tar:
            try:
                tar.extractall(tmp, filter="data")
            except TypeError:  # a Python without extraction filters (before 3.11.4)
                tar.extractall(tmp)
        src = next(p for p in Path(tmp).iterdir() if p.is_dir())
        shutil.rmtree(src / "pyautoattack" / "examples", ignore_errors=True)
        _pip("wheel", "--no-deps", "-w", str(wheels), str(src))


def build(env: dict | None = None) -> int:
    archive = mirror_archive(env)
    shutil.rmtree(WHEELS, ignore_errors=True)
    WHEELS.mkdir(parents=True)
    binaries = [spec for name, spec in NEEDED.items() if name != "pyautoattack"]
    _pip("download", *TARGET, "-d", str(WHEELS), *binaries)  # with their dependencies, for the target
    pyautoattack_wheel(NEEDED["pyautoattack"], WHEELS)
    dest = MIRROR.joinpath(*ARCHIVE)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(archive, dest)
    total = folder_bytes(BUNDLE)
    ok, line = size_line(total)
    if not ok:
        raise BundleError(line)
    print(line)
    for path in sorted(p for p in BUNDLE.rglob("*") if p.is_file()):
        print(f"  {path.relative_to(BUNDLE)}  {path.stat().st_size / 2**20:.2f} MiB")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(build())
    except BundleError as e:
        print(e, file=sys.stderr)
        sys.exit(1)
