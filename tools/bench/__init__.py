"""`study bench`: the throughput of this package's engine against a plain PyTorch
reference loop, task by task, in one process (see docs/performance.md)."""

from tools.bench.run import ALL_TASKS, run_bench

__all__ = ["ALL_TASKS", "run_bench"]
