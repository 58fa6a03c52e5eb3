"""The demo's data step through Snakemake, downloading CIFAR-10 and MNIST from a local server with
no mirror."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers.data_sources import ROOT

from study.data.download import MIRROR_ENV, URL_BASE_ENV
from study.data.prepared import load_prepared

_HOOK = '''# Written by tests/integration/test_data_sources.py: the tiny served archives' digests.
import dataclasses
from study.data import archives
for key, digests in {digests!r}.items():
    key = tuple(key.split("/"))
    archives.VARIANT_ARCHIVES[key] = tuple(
        dataclasses.replace(s, md5=digests[s.filename]) for s in archives.VARIANT_ARCHIVES[key])
'''


def test_demo_data_step_downloads_cifar10_and_mnist_with_no_mirror(official_archives, server, tmp_path):
    """`make demo`'s data step (Snakemake's prepare jobs of the demo preset) on a machine with
    internet and no mirror: both datasets come from the (local) official URLs."""
    base, _, httpd = server
    hook = tmp_path / "hook"
    hook.mkdir()
    digests = {"/".join(key): {s.filename: s.md5 for s in specs} for key, specs in official_archives.items()}
    (hook / "sitecustomize.py").write_text(_HOOK.format(digests=digests))
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ROOT / "params.yaml", work)  # Snakemake reads its configfile from the working directory
    env = {k: v for k, v in os.environ.items() if k not in (MIRROR_ENV, "PYTHONPATH")}
    env.update({URL_BASE_ENV: base, "PYTHONPATH": str(hook),
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"})
    snakemake = shutil.which("snakemake", path=env["PATH"])
    proc = subprocess.run([snakemake, "-s", str(ROOT / "Snakefile"), "--directory", str(work), "--cores", "2",
                           "--config", "preset=demo", "--", "data_all"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    prepared = sorted(p.name for p in (work / "data" / "prepared").iterdir())
    assert prepared == ["cifar10-official.pt", "mnist-official.pt"]
    assert load_prepared(work / "data" / "prepared" / "cifar10-official.pt").meta["variant"] == "official"
    assert sum(r.startswith("200") for r in httpd.requests) == 5
