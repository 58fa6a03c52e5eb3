"""Where a job runs and in which precision: the same code path serves CPU and GPU."""

from __future__ import annotations

import contextlib
import os

import torch

VALID_DEVICES = ("auto", "cpu", "cuda")


def select_device(name: str | torch.device = "auto") -> torch.device:
    """`auto`: the GPU if there is one, else the CPU; `cpu`, `cuda`, `cuda:N` as named (an
    already selected torch.device passes through)."""
    name = str(name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.split(":")[0] not in ("cpu", "cuda"):
        raise ValueError(f"--device {name!r} is not a device; valid: {', '.join(VALID_DEVICES)} (or cuda:N)")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"--device {name!r}: no CUDA GPU is visible on this machine; valid here: auto, cpu")
    try:
        return torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"--device {name!r} is not a device ({err}); valid: {', '.join(VALID_DEVICES)} "
                         "(or cuda:N)") from None


def set_threads(threads: int | None) -> None:
    """Use the cores the scheduler granted (Snakemake passes {threads}); default: all."""
    n = threads or os.cpu_count() or 1
    torch.set_num_threads(max(1, n))


PRECISIONS = ("fp32", "bf16")

#: TF32 as PyTorch sets it by default (torch 1.12 to 2.13: cuDNN convolutions in TF32, matmuls in
#: full fp32), which the reference codes ran with; `train.tf32` of a run sets both explicitly.
DEFAULT_TF32 = {"cudnn": True, "matmul": False}


def tf32_flags() -> dict:
    """The TF32 switches in effect (they matter on Ampere and later GPUs only)."""
    return {"cudnn": bool(torch.backends.cudnn.allow_tf32), "matmul": bool(torch.backends.cuda.matmul.allow_tf32)}


def set_tf32(setting: dict | None = None) -> dict:
    """Set torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32 from a
    run's `tf32` ({cudnn, matmul}; missing keys: DEFAULT_TF32); returns the flags now in effect."""
    wanted = {**DEFAULT_TF32, **(setting or {})}
    unknown = set(wanted) - set(DEFAULT_TF32)
    if unknown:
        raise ValueError(f"unknown tf32 key(s) {sorted(unknown)}; valid: cudnn, matmul")
    torch.backends.cudnn.allow_tf32 = bool(wanted["cudnn"])
    torch.backends.cuda.matmul.allow_tf32 = bool(wanted["matmul"])
    return tf32_flags()


def train_autocast(device: torch.device, precision: str = "fp32") -> contextlib.AbstractContextManager:
    """bf16 autocast for training only where asked for and on a GPU; fp32 otherwise (the
    reference codes train in fp32, and bf16 on a CPU is slow)."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
    if precision == "bf16" and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def describe(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({torch.get_num_threads()} threads)"


#: `batch_size: auto` of an evaluation, per device kind: a GPU is only kept busy by large
#: batches; on a CPU larger batches gain nothing. Multiples of RNG_CHUNK (study.attacks.pgd),
#: so that the records are those of any other such batch size.
AUTO_EVAL_BATCH = {"cuda": 1024, "cpu": 256}


def eval_batch_size(setting: int | str | None, device: torch.device) -> int:
    """The evaluation batch size of `setting` (an integer, or `auto`/None) on `device`."""
    if setting is None or setting == "auto":
        return AUTO_EVAL_BATCH.get(device.type, 256)
    if isinstance(setting, bool) or not isinstance(setting, int) or setting < 1:
        raise ValueError(f"evaluation batch_size must be a positive integer or auto, got {setting!r}")
    return setting
