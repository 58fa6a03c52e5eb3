"""The headline command on a fresh machine (docs/reliability.md): before any job runs, one
screen says what the plan needs (`study preflight`, the workflow's onstart); a zoo entry on
ImageNet is left out of the plan while ImageNet is not placed, with one line, and comes back
once it is; the zoo's weights are fetched into data/zoo_weights from a server on 127.0.0.1
that serves tiny checkpoints in robustbench's layout ($STUDY_WEIGHTS_URL_BASE), and
robustbench's own load_model reads them; a model whose download fails (404) stops only what
needs it, and the run summary names it. The real Snakemake run uses the default workflow
profile (profiles/default) that Snakemake finds by itself."""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
import torch
import yaml
from test_workflow import BIN, _copy_project, _env, _job_counts
from test_zoo import place_random_weights

from study.models.weights import WEIGHTS_ENV, WEIGHTS_URL_BASE_ENV, WeightsUnavailableError
from study.models.zoo import ZooEntry, load_zoo_model

SERVED = ZooEntry("cifar10", "Linf", "Wong2020Fast")  # PreAct-ResNet-18, as the ci preset's zoo entry
FAILING = ZooEntry("cifar10", "Linf", "Ding2020MMA")  # WRN-28-4: the smallest folder-loaded CIFAR-10 model
PRESET = "headline"
FIGURES = ["fig01_classwise_standard", "fig02_classwise_adversarial",
           "fig15_zoo_classwise", "fig16_zoo_ranks", "fig17_zoo_gap"]
ZOO_FIGURES = FIGURES[2:]


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


def _preset(project: Path, name: str, zoo_models: list[dict], **zoo) -> None:
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


def _on_synthetic(entry: ZooEntry) -> dict:
    return {"dataset": entry.dataset, "threat_model": entry.threat_model, "name": entry.name, "data": "synthetic"}


IMAGENET_ENTRY = {"dataset": "imagenet", "threat_model": "Linf", "name": "resnet50", "source": "torchvision",
                  "file": "resnet50-0676ba61.pth", "evaluations": ["zoo_clean"]}


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "project").mkdir()
    project = _copy_project(tmp_path / "project")
    shutil.copytree(Path(__file__).resolve().parents[1] / "profiles", project / "profiles")
    for var in (WEIGHTS_ENV, WEIGHTS_URL_BASE_ENV, "STUDY_DATA_MIRROR", "STUDY_DATA_URL_BASE"):
        monkeypatch.delenv(var, raising=False)
    return project


def _snakemake(project: Path, *args: str, env: dict | None = None, timeout: int = 900):
    return subprocess.run([BIN / "snakemake", *args], cwd=project, env={**_env(), **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def _preflight(project: Path, preset: str, env: dict | None = None) -> str:
    proc = subprocess.run([BIN / "study", "preflight", "--preset", preset], cwd=project,
                          env={**_env(), **(env or {})}, capture_output=True, text=True, timeout=120)
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


def test_preflight_screen_and_imagenet_left_out_then_back(project, weights_server):
    _, url, _ = weights_server
    _preset(project, "with_imagenet", [_on_synthetic(SERVED), IMAGENET_ENTRY])
    env = {WEIGHTS_URL_BASE_ENV: url}
    screen = _preflight(project, "with_imagenet", env)
    assert f"zoo weights, 1 models: into data/zoo_weights by ${WEIGHTS_URL_BASE_ENV} ({url})" in screen
    assert "Missing, left out of the plan" in screen and "zoo-imagenet-Linf-resnet50" in screen
    assert "data/raw/imagenet/val/<wnid>/*.JPEG" in screen and "dataset synthetic (default)" in screen
    # the workflow: one line says what is left out, and the plan has no job of it
    dry = _snakemake(project, "-n", "--cores", "1", "--config", "preset=with_imagenet", "--", "zoo_all", env=env)
    assert dry.returncode == 0, dry.stderr
    out = dry.stdout + dry.stderr
    left = [line for line in out.splitlines() if line.startswith("left out of the plan:")]
    assert len(left) == 1 and "zoo-imagenet-Linf-resnet50" in left[0] and "imagenet__Linf" in left[0]
    assert "zoo-imagenet" not in out.replace(left[0], "") and "prepare_imagenet" not in _job_counts(out)
    # ImageNet placed (the image-folder layout): the entry and its data are back in the plan
    (project / "data/raw/imagenet/val/n01440764").mkdir(parents=True)
    dry = _snakemake(project, "-n", "--cores", "1", "--config", "preset=with_imagenet", "--", "zoo_all", env=env)
    out = dry.stdout + dry.stderr
    assert dry.returncode == 0 and "left out of the plan" not in out
    counts = _job_counts(out)
    assert counts["prepare_imagenet"] == 1 and counts["zoo_run"] == 2
    screen = _preflight(project, "with_imagenet", env)
    assert "left out" not in screen and "Nothing is missing." in screen
    # a weights folder the user gives is read as it is, never written: missing files are named
    given = {**env, WEIGHTS_ENV: str(project / "offline")}
    screen = _preflight(project, "with_imagenet", given)
    assert "Missing, its jobs will fail" in screen and f"{project / 'offline'}/cifar10/Linf/Wong2020Fast.pt" in screen
    assert f"${WEIGHTS_ENV}" in screen and "Will be downloaded" not in screen


def _figures_made(project: Path, figures: list[str]) -> dict[str, int]:
    return {fig: len(list((project / "results/figures" / fig).glob("*.png"))) for fig in figures}


@pytest.mark.slow
def test_headline_run_a_failed_download_stops_only_the_zoo_then_completes(project, weights_server):
    served, url, requests = weights_server
    _preset(project, PRESET, [_on_synthetic(SERVED), _on_synthetic(FAILING)])
    env = {WEIGHTS_URL_BASE_ENV: url}
    # the headline command as it is (the default profile: keep-going), the preset sized for tests
    args = ["--cores", "2", "--config", f"preset={PRESET}", "--", "results/figures/all"]
    proc = _snakemake(project, *args, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "workflow specific profile profiles/default" in out
    # the preflight screen comes before the first job
    assert out.index(f"Preflight of preset {PRESET}") < out.index("rule prepare:")
    assert "zoo weights, 2 models: into data/zoo_weights" in out
    # the served model was fetched into the project's own folder; Ding2020MMA got a 404
    fetched = project / "data/zoo_weights" / SERVED.relative_file
    assert fetched.read_bytes() == (served / SERVED.relative_file).read_bytes()
    assert f"/{FAILING.relative_file}" in requests
    made = _figures_made(project, FIGURES)
    assert all(made[fig] == 1 for fig in FIGURES if fig not in ZOO_FIGURES), made  # independent work went on
    assert (project / f"results/zoo/evaluations/zoo-cifar10-Linf-{SERVED.name}-on-synthetic/zoo_pgd.parquet").is_file()
    assert not any(made[fig] for fig in ZOO_FIGURES)
    summary = (project / "results/run_summary.md").read_text()
    failed = [line for line in summary.splitlines() if line.startswith("- zoo_run")]
    assert len(failed) == 1 and f"zoo-cifar10-Linf-{FAILING.name}-on-synthetic" in failed[0]
    assert "HTTP 404" in failed[0] and f"{url}/{FAILING.relative_file}" in failed[0]
    assert "- not made: fig15_zoo_classwise" in summary and "fig01_classwise_standard" not in summary
    assert summary in out.replace("\r", "")  # printed at the end, too
    # the file appears on the server: the same command makes only what is missing, and finishes
    place_random_weights(served, FAILING)
    proc = _snakemake(project, *args, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    counts = _job_counts(out)
    assert counts["zoo_run"] == 1 and "train" not in counts
    assert _figures_made(project, FIGURES) == {fig: 1 for fig in FIGURES}
    summary = (project / "results/run_summary.md").read_text()
    assert "Failed jobs: none." in summary and "Left out of the plan: nothing." in summary
    assert f"Made: {len(FIGURES)} of {len(FIGURES)} figures complete" in summary
