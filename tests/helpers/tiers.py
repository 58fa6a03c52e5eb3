"""The floor plan of tests/: each folder is a tier, and its conftest.py marks every test
collected under it with the tier's marker (and the hardware tier with what each module needs),
so `-m` selects by where a test lives, never by a decorator a test might lack."""

from pathlib import Path

import pytest


def mark_folder(config: pytest.Config, items: list[pytest.Item], folder: str, *markers: str,
                by_module: dict[str, tuple[str, ...]] | None = None) -> None:
    """Add `markers` to the items under tests/<folder>, and by_module[<module file stem>] to
    that module's items. (A conftest's collection hook sees the whole session's items.)"""
    here = Path(config.rootpath) / "tests" / folder
    for item in items:
        if not item.path.is_relative_to(here):
            continue
        for name in (*markers, *(by_module or {}).get(item.path.stem, ())):
            item.add_marker(getattr(pytest.mark, name))
