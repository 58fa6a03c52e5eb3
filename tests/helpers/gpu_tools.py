"""The GPU check's scripts (tools/gpu/*.py) loaded as modules for CPU tests of their logic."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_gpu_tool(name: str, prefix: str = "gpu") -> ModuleType:
    """tools/gpu/`name`.py as the module `<prefix>_<name>`."""
    spec = importlib.util.spec_from_file_location(f"{prefix}_{name}", ROOT / "tools" / "gpu" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
