import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Keep test runs quiet and on two threads like the CI machine; under `pytest -n 2` (make test)
# each of the two workers keeps to one, so they do not compete for the two cores.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "2")


#: Costly shared fixtures (module or session scope), named by the module that defines them:
#: their tests go to one worker (pytest -n 2 --dist loadgroup), which then computes each once
#: instead of once per worker (a module fixture's tests otherwise land on both). A conftest
#: fixture may be used by any module; a test module's, by that module's tests.
SHARED_FIXTURE_GROUPS = {
    "conftest.paper_dry_run": "paper_dag",
    "test_workflow.ci_dry_run": "ci_dag",
    "test_bench.tiny_bench": "bench",
    "test_evaluate.trained_runs": "evaluate_runs",
    "test_robustness_suite.records": "suite_records",
    "test_figure_quality.rendered": "rendered_figures",
    "test_features.model": "feature_model",
    "test_corruptions.strength": "corruption_strength",
    "test_faults.tiny_run": "faults_run",
}


def _shared_group(item: pytest.Item) -> str | None:
    """The group of the first shared fixture the test uses, read from public attributes only
    (the test's fixture names and its module), so that no pytest upgrade moves it."""
    module = getattr(item, "module", None)
    if module is None:  # not a Python test function (a doctest, say): no fixtures of ours
        return None
    here = module.__name__.rsplit(".", 1)[-1]
    for name in getattr(item, "fixturenames", ()):
        if f"{here}.{name}" in SHARED_FIXTURE_GROUPS:
            return SHARED_FIXTURE_GROUPS[f"{here}.{name}"]
        # a module's own fixture of that name would hide conftest's
        if f"conftest.{name}" in SHARED_FIXTURE_GROUPS and not hasattr(module, name):
            return SHARED_FIXTURE_GROUPS[f"conftest.{name}"]
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The end-to-end tests (marked slow) first: with two workers, the rest fills in beside
    them instead of one long test starting last. The groups go on as public `xdist_group`
    marks, before xdist's own hook (tryfirst) reads them."""
    for item in items:
        group = _shared_group(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def ci_params():
    from study.config import load_params

    return load_params(
        ROOT / "params.yaml",
        {"preset": "ci"},
        presets_dir=ROOT / "workflow/presets",
        schema_path=ROOT / "workflow/schemas/params.schema.yaml",
    )


@pytest.fixture(scope="session")
def synthetic_file(tmp_path_factory, ci_params) -> Path:
    from study.data.prepared import prepare_dataset

    out = tmp_path_factory.mktemp("data") / "synthetic-default.pt"
    prepare_dataset("synthetic", "default", out.parent / "raw", None, out, synthetic=ci_params["data"]["synthetic"])
    return out


@pytest.fixture(scope="session")
def synthetic_splits(synthetic_file):
    from study.data.prepared import load_prepared

    return load_prepared(synthetic_file)


@pytest.fixture()
def tiny_run_config(ci_params):
    """A 3-epoch PGD-AT run of the small CNN on a third of the CI preset's synthetic data."""
    from study.config import plan_runs

    runs = {r.config["method"]: r for r in plan_runs(ci_params)}
    cfg = copy.deepcopy(runs["pgd_at"].config)
    cfg["epochs"] = 3
    # A third of the preset's images: the engine tests check mechanics (records, resume), not learning.
    cfg["train_per_class"] = ci_params["data"]["synthetic"]["train_per_class"] // 3
    cfg["epoch_eval"]["per_class"] = 4
    return cfg


@pytest.fixture(scope="session")
def standard_run(tmp_path_factory, synthetic_splits, ci_params) -> Path:
    """A finished 2-epoch standard run of the ci preset, shared by the tests that only read it."""
    from study.config import plan_runs
    from study.train.engine import train_run

    cfg = next(r for r in plan_runs(ci_params) if r.config["method"] == "standard").config
    run_dir = tmp_path_factory.mktemp("runs") / "std"
    train_run({**cfg, "epochs": 2}, synthetic_splits, run_dir, device="cpu", progress=False)
    return run_dir


def run_study(*args: str, cwd: Path | None = None, check: bool = True, env: dict | None = None):
    """Run the installed `study` command as a user would."""
    exe = shutil.which("study") or str(Path(sys.executable).parent / "study")
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"study {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="session")
def paper_dry_run(tmp_path_factory):
    """The output of one dry run of the paper preset's whole DAG (10,000+ jobs), with its
    shell commands; shared by the tests that read it, since each run takes half a minute."""
    from test_workflow import BIN, _copy_project, _run

    project = _copy_project(tmp_path_factory.mktemp("paper"))
    return _run([BIN / "snakemake", "-n", "-p", "--cores", "8", "results/figures/all"], project)


@pytest.fixture()
def one_thread():
    """One torch thread for the test: on a shared 2-core machine, two OpenMP threads of tiny
    ops spin-wait on each other ~30x slower."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
