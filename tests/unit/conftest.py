"""The unit tier: pure functions, no subprocess, fast. Every test here is marked `unit`."""

import pytest
from helpers.tiers import mark_folder


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_folder(config, items, "unit", "unit")
