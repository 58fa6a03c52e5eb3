"""The headline command on a fresh machine (docs/reliability.md): before any job runs, one
screen says what the plan needs (`study preflight`, the workflow's onstart); a zoo entry on
ImageNet is left out of the plan while ImageNet is not placed, with one line, and comes back
once it is; the zoo's weights are fetched into data/zoo_weights from a server on 127.0.0.1
that serves tiny checkpoints in robustbench's layout ($STUDY_WEIGHTS_URL_BASE), and
robustbench's own load_model reads them; a model whose download fails (404) stops only what
needs it, and the run summary names it. The real Snakemake run uses the default workflow
profile (profiles/default) that Snakemake finds by itself."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from helpers.headline import FAILING, SERVED, on_synthetic, write_headline_preset
from helpers.workflow import BIN, command_env, project_dry_run

from study.models.weights import WEIGHTS_ENV, WEIGHTS_URL_BASE_ENV, WeightsUnavailableError
from study.models.zoo import load_zoo_model

IMAGENET_ENTRY = {"dataset": "imagenet", "threat_model": "Linf", "name": "resnet50", "source": "torchvision",
                  "file": "resnet50-0676ba61.pth", "evaluations": ["zoo_clean"]}






def _preflight(project: Path, preset: str, env: dict | None = None) -> str:
    proc = subprocess.run([BIN / "study", "preflight", "--preset", preset], cwd=project,
                          env={**command_env(), **(env or {})}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_download_from_the_url_base_then_robustbench_loads_it(weights_server, tmp_path, monkeypatch):
    served, url, requests = weights_server
    monkeypatch.setenv(WEIGHTS_URL_BASE_ENV, url + "/")
    model = load_zoo_model(SERVED, tmp_path, download=True)  # robustbench.utils.load_model reads the file
    assert (tmp_path / SERVED.relative_file).read_bytes() == (served / SERVED.relative_file).read_bytes()
    assert f"/{SERVED.relative_file}" in requests
    reference = load_zoo_model(SERVED, served)
    x = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(model(x), reference(x))
    with pytest.raises(WeightsUnavailableError, match=r"HTTP 404") as err:
        load_zoo_model(FAILING, tmp_path, download=True)
    assert f"{url}/{FAILING.relative_file}" in str(err.value) and "\n" not in str(err.value)
    assert not list((tmp_path / "cifar10/Linf").glob("Ding2020MMA*"))  # nothing half-written left behind


def test_preflight_screen_and_imagenet_left_out_then_back(headline_project, weights_server):
    project = headline_project
    _, url, _ = weights_server
    write_headline_preset(project, "with_imagenet", [on_synthetic(SERVED), IMAGENET_ENTRY])
    env = {WEIGHTS_URL_BASE_ENV: url}
    screen = _preflight(project, "with_imagenet", env)
    assert f"zoo weights, 1 models: into data/zoo_weights by ${WEIGHTS_URL_BASE_ENV} ({url})" in screen
    assert "Missing, left out of the plan" in screen and "zoo-imagenet-Linf-resnet50" in screen
    assert "data/raw/imagenet/val/<wnid>/*.JPEG" in screen and "dataset synthetic (default)" in screen
    # the workflow: one line says what is left out, and the plan has no job of it
    dag = project_dry_run(["--cores", "1", "--config", "preset=with_imagenet", "--", "zoo_all"], project, env=env)
    left = [line for line in dag.printed.splitlines() if line.startswith("left out of the plan:")]
    assert len(left) == 1 and "zoo-imagenet-Linf-resnet50" in left[0] and "imagenet__Linf" in left[0]
    assert not [j for j in dag.jobs if "zoo-imagenet" in " ".join((j.shell, *j.input, *j.output))]
    assert "prepare_imagenet" not in dag.counts and dag.counts["zoo_run"] == 1
    # ImageNet placed (the image-folder layout): the entry and its data are back in the plan
    (project / "data/raw/imagenet/val/n01440764").mkdir(parents=True)
    dag = project_dry_run(["--cores", "1", "--config", "preset=with_imagenet", "--", "zoo_all"], project, env=env)
    assert "left out of the plan" not in dag.printed
    counts = dag.counts
    assert counts["prepare_imagenet"] == 1 and counts["zoo_run"] == 2
    screen = _preflight(project, "with_imagenet", env)
    assert "left out" not in screen and "Nothing is missing." in screen
    # a weights folder the user gives is read as it is, never written: missing files are named
    given = {**env, WEIGHTS_ENV: str(project / "offline")}
    screen = _preflight(project, "with_imagenet", given)
    assert "Missing, its jobs will fail" in screen and f"{project / 'offline'}/cifar10/Linf/Wong2020Fast.pt" in screen
    assert f"${WEIGHTS_ENV}" in screen and "Will be downloaded" not in screen




