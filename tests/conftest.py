import copy
import os
from pathlib import Path

import pytest
from helpers.groups import SHARED_FIXTURE_GROUPS

#: fixtures shared across tiers, defined beside the helpers they use
pytest_plugins = ["helpers.workflow", "helpers.data_sources", "helpers.headline", "helpers.zoo_workflow"]

ROOT = Path(__file__).resolve().parents[1]
# Keep test runs quiet and on two threads like the CI machine; under `pytest -n 2` (make test)
# each of the two workers keeps to one, so they do not compete for the two cores.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "2")


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
    """The end-to-end tests (tests/pipeline) first: with two workers, the rest fills in beside
    them instead of one long test starting last. The groups go on as public `xdist_group`
    marks, before xdist's own hook (tryfirst) reads them."""
    for item in items:
        group = _shared_group(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    pipeline = ROOT / "tests" / "pipeline"
    items.sort(key=lambda item: not item.path.is_relative_to(pipeline))


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
    synthetic = ci_params.data.synthetic.model_dump(exclude_unset=True)
    prepare_dataset("synthetic", "default", out.parent / "raw", None, out, synthetic=synthetic)
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
    cfg["train_per_class"] = ci_params.data.synthetic.train_per_class // 3
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


@pytest.fixture()
def one_thread():
    """One torch thread for the test: on a shared 2-core machine, two OpenMP threads of tiny
    ops spin-wait on each other ~30x slower."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


#: a user property a test records (`record_property`) for the run's summary, such as the pipeline
#: test's estimate against the benchmarks: CI's log shows it whether or not the test's output is
#: captured. Here in the root conftest because under `-n` only the controller prints the summary,
#: and it loads no conftest below this one.
SUMMARY_PROPERTY = "summary"


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Print what the tests recorded for the summary (the workers send their reports' user
    properties to the controller)."""
    for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", []):
        for name, value in getattr(report, "user_properties", ()):
            if name == SUMMARY_PROPERTY and report.when == "call":
                terminalreporter.write_sep("-", f"{report.nodeid.split('::')[-1]}: recorded for the summary")
                terminalreporter.write_line(str(value))
