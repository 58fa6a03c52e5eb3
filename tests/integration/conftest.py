"""The integration tier: the library's pieces working together in-process (training steps,
evaluation, data and file I/O, checkpoints). Every test here is marked `integration`."""

import pytest
from helpers.tiers import mark_folder


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_folder(config, items, "integration", "integration")
