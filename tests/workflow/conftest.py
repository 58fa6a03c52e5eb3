"""The workflow tier: the Snakemake DAG in dry runs, the DVC stages' definitions, the `study`
command in subprocesses. Every test collected here is marked `workflow`."""

import pytest
from helpers.tiers import mark_folder
from helpers.workflow import copy_project, project_dry_run


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_folder(config, items, "workflow", "workflow")


@pytest.fixture(scope="session")
def paper_dry_run(tmp_path_factory):
    """The paper preset's whole DAG (10,000+ jobs) from one dry run, shared by the tests that
    read it, since each run takes half a minute."""
    project = copy_project(tmp_path_factory.mktemp("paper"))
    return project_dry_run(["--cores", "8", "results/figures/all"], project)


@pytest.fixture(scope="module")
def ci_dry_run(project):
    # `all`: the figures and everything else the study makes (reports beside the figures)
    return project_dry_run(["--cores", "2", "--config", "preset=ci", "--", "all"], project)
