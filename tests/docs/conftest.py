"""The docs tier: what the README and docs/ say holds (their commands run as written, their
links resolve, the README's numbers and the architecture they describe). Marked `docs`."""

import pytest
from helpers.tiers import mark_folder


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_folder(config, items, "docs", "docs")
