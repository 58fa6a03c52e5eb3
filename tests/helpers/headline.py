"""The headline command's setting: a served weights folder on 127.0.0.1 (`weights_server`), a
project copy with the default profile (`headline_project`; both fixtures registered by
tests/conftest.py), the preset cut to the headline's figures, and Snakemake run in it."""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
import yaml

from helpers.workflow import BIN, command_env, copy_project
from helpers.zoo import place_random_weights
from study.models.weights import WEIGHTS_ENV, WEIGHTS_URL_BASE_ENV
from study.models.zoo import ZooEntry

SERVED = ZooEntry("cifar10", "Linf", "Wong2020Fast")  # PreAct-ResNet-18, as the ci preset's zoo entry


FAILING = ZooEntry("cifar10", "Linf", "Ding2020MMA")  # WRN-28-4: the smallest folder-loaded CIFAR-10 model


FIGURES = ["fig01_classwise_standard", "fig02_classwise_adversarial",
           "fig15_zoo_classwise", "fig16_zoo_ranks", "fig17_zoo_gap"]


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # the requests are asserted on, not printed
        pass

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        super().do_GET()


@pytest.fixture(scope="module")
def weights_server(tmp_path_factory):
    """An HTTP server on 127.0.0.1 serving a folder in robustbench's layout
    (<dataset>/<threat_model>/<name>.pt): the served model's random weights; anything else 404."""
    folder = tmp_path_factory.mktemp("served")
    place_random_weights(folder, SERVED)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(folder)))
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}", server.requests
    server.shutdown()


def write_headline_preset(project: Path, name: str, zoo_models: list[dict], **zoo) -> None:
    """The ci preset cut to what the headline needs: two trained runs on 32 px synthetic data
    (RobustBench's CIFAR architectures take 32 px), figures 1-2 and the zoo's 15-17."""
    presets = project / "workflow" / "presets"
    overlay = yaml.safe_load((presets / "ci.yaml").read_text())
    overlay["data"]["synthetic"]["image_size"] = 32
    overlay["experiments"] = [{"group": "baseline", "dataset": "synthetic", "models": ["small_cnn"],
                               "methods": ["standard", "pgd_at"], "seeds": [0], "evaluations": ["clean", "pgd3"]}]
    overlay["figures"] = FIGURES
    overlay["features"] = None
    overlay["robustness"]["groups"] = ["baseline"]
    overlay["robustness"]["checks"].pop("groups", None)
    overlay["zoo"].update(require_weights=False, models=zoo_models, **zoo)
    (presets / f"{name}.yaml").write_text(yaml.safe_dump(overlay))


def on_synthetic(entry: ZooEntry) -> dict:
    return {"dataset": entry.dataset, "threat_model": entry.threat_model, "name": entry.name, "data": "synthetic"}


@pytest.fixture
def headline_project(tmp_path, monkeypatch):
    """A copy of the project with its default workflow profile and none of the data or weights
    variables of the machine's environment."""
    (tmp_path / "project").mkdir()
    project = copy_project(tmp_path / "project")
    shutil.copytree(Path(__file__).resolve().parents[2] / "profiles", project / "profiles")
    for var in (WEIGHTS_ENV, WEIGHTS_URL_BASE_ENV, "STUDY_DATA_MIRROR", "STUDY_DATA_URL_BASE"):
        monkeypatch.delenv(var, raising=False)
    return project


def run_snakemake(project: Path, *args: str, env: dict | None = None, timeout: int = 900):
    return subprocess.run([BIN / "snakemake", *args], cwd=project, env={**command_env(), **(env or {})},
                          capture_output=True, text=True, timeout=timeout)
