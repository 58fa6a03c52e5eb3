"""The checkout's harnesses (`study bench`, `study readme-numbers`): they measure the study
rather than being part of it, so `pip install .` leaves tools/ out."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType


def checkout_tool(module: str) -> ModuleType:
    """`module` of the repository's tools/, imported from the checkout that holds the running
    `study` package (an editable install, or the repository root on sys.path); without one,
    one line says what to run instead."""
    checkout = next(p for p in Path(__file__).resolve().parents if p.name == "study").parent
    if (checkout / "tools" / "__init__.py").is_file() and str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if module != err.name and not module.startswith(f"{err.name}."):
            raise
        raise RuntimeError(f"{module} is not installed: it lives in the repository's tools/, which `pip install .` "
                           "leaves out; run this command from a checkout installed with `make setup` "
                           "(`pip install -e .`)") from None
