"""The hardware tier: tests that need something beyond the CPU and the venv, each module
marked with what it needs: a CUDA device (`gpu`: make gpu-check), the real inductor compiler's
code generation (`inductor`: make test-compile), the SLURM executor (`slurm`: make test-slurm),
a headless browser over the built report (`browser`: make test-pipeline). All are marked
`hardware`, which `make test` leaves out."""

import pytest
from helpers.tiers import mark_folder

NEEDS = {
    "test_gpu": ("gpu",),
    "test_gpu_host_reads": ("gpu",),
    "test_inductor_compile": ("inductor",),
    "test_slurm_profile": ("slurm",),
    "test_report_browser": ("browser",),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_folder(config, items, "hardware", "hardware", by_module=NEEDS)
