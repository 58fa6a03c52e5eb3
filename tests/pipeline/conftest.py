"""The pipeline tier: the slow end-to-end runs (the ci preset's whole DAG through Snakemake
and DVC, the zoo's and the headline's jobs, the bench's processes, the real data archives);
`make test-pipeline` runs them. Every test here is marked `pipeline`."""

import pytest
from helpers.tiers import mark_folder


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_folder(config, items, "pipeline", "pipeline")

