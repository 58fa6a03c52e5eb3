"""Where a job runs and in which precision: the same code path serves CPU and GPU."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from typing import Any

import torch

VALID_DEVICES = ("auto", "cpu", "cuda")


def select_device(name: str | torch.device = "auto") -> torch.device:
    """`auto`: the GPU if there is one, else the CPU; `cpu`, `cuda`, `cuda:N` as named (an
    already selected torch.device passes through)."""
    name = str(name)
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.split(":")[0] not in ("cpu", "cuda"):
        raise ValueError(f"--device {name!r} is not a device; valid: {', '.join(VALID_DEVICES)} (or cuda:N)")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"--device {name!r}: no CUDA GPU is visible on this machine; valid here: auto, cpu")
    try:
        dev = torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"--device {name!r} is not a device ({err}); valid: {', '.join(VALID_DEVICES)} "
                         "(or cuda:N)") from None
    share_gpu(dev)
    return dev


def set_threads(threads: int | None) -> None:
    """Use the cores the scheduler granted (Snakemake passes {threads}); default: all. torch.compile's
    worker processes are bounded to the same count (TORCHINDUCTOR_COMPILE_THREADS), unless the user
    set that variable: K jobs sharing a machine then compile with K x threads workers, not K x cores."""
    n = max(1, threads or os.cpu_count() or 1)
    torch.set_num_threads(n)
    if threads and USER_COMPILE_THREADS is None:
        os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = str(n)
        # read once, at its import; a config module whose settings are its attributes (no stubs of them)
        inductor: Any = sys.modules.get("torch._inductor.config")
        if inductor is not None:
            inductor.compile_threads = n


def set_numerics_threads(device: str | torch.device, threads: int) -> int:
    """On a CPU, run a model's arithmetic on the `threads` its run config fixes (RunConfig.threads),
    whatever the job was granted (--threads): conv and batch-norm gradients are reductions split
    over the threads, summed in another order on another count (docs/reliability.md). A GPU's
    arithmetic does not depend on the CPU threads: there the job's count stays. Returns the
    count in effect."""
    name = str(device)
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if torch.device(name).type == "cpu":
        torch.set_num_threads(threads)
    return torch.get_num_threads()


#: TORCHINDUCTOR_COMPILE_THREADS as the user set it before this process changed it (None: not set)
USER_COMPILE_THREADS = os.environ.get("TORCHINDUCTOR_COMPILE_THREADS")
#: Set by the workflow (common.smk) from the profile's gpu_slots: how many jobs share one GPU.
GPU_SLOTS_ENV = "STUDY_GPU_SLOTS"
#: An explicit per-process share of the GPU's memory (0 < f <= 1), overriding 1 / STUDY_GPU_SLOTS.
GPU_MEMORY_FRACTION_ENV = "STUDY_GPU_MEMORY_FRACTION"
#: The share share_gpu set in this process (gpu_share reads it for meta.json); empty before.
process_gpu_share: dict = {}


def gpu_memory_fraction(environ: Mapping[str, str] | None = None) -> tuple[float | None, str]:
    """(the fraction of the GPU's memory this process may take, where it comes from): the
    explicit STUDY_GPU_MEMORY_FRACTION, else 1/K for a job that runs as one of K
    (STUDY_GPU_SLOTS = K > 1), else None (the whole GPU)."""
    env = os.environ if environ is None else environ
    if env.get(GPU_MEMORY_FRACTION_ENV):
        fraction = float(env[GPU_MEMORY_FRACTION_ENV])
        if not 0 < fraction <= 1:
            raise ValueError(f"{GPU_MEMORY_FRACTION_ENV}={env[GPU_MEMORY_FRACTION_ENV]!r}: must be in (0, 1]")
        return fraction, GPU_MEMORY_FRACTION_ENV
    slots = int(env.get(GPU_SLOTS_ENV) or 1)
    if slots < 1:
        raise ValueError(f"{GPU_SLOTS_ENV}={slots}: must be >= 1")
    return (1 / slots, f"1/{GPU_SLOTS_ENV} ({slots} jobs share the GPU)") if slots > 1 else (None, "whole GPU")


def share_gpu(device: torch.device) -> dict:
    """Bound this process's GPU memory to its share (torch.cuda.set_per_process_memory_fraction),
    so K jobs on one GPU cannot starve each other; what was set is kept for meta.json
    (`gpu_share`). Nothing on a CPU."""
    fraction, source = gpu_memory_fraction()
    share = {"memory_fraction": fraction, "source": source, "slots": int(os.environ.get(GPU_SLOTS_ENV) or 1)}
    if device.type == "cuda" and fraction is not None:
        torch.cuda.set_per_process_memory_fraction(fraction, device)
        share["applied"] = True
    else:
        share["applied"] = False
    process_gpu_share.clear()
    process_gpu_share.update(share)
    return share


def gpu_share() -> dict | None:
    """The share `share_gpu` set in this process, with the compile workers' bound (None before
    any device was selected)."""
    if not process_gpu_share:
        return None
    return {**process_gpu_share, "compile_threads": os.environ.get("TORCHINDUCTOR_COMPILE_THREADS")}


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


def cpu_supports_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX-512 BF16 or AMX, as oneDNN reports it): only
    there is bf16 autocast faster than fp32 rather than an emulation of it."""
    return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def train_autocast(device: torch.device, precision: str = "fp32") -> contextlib.AbstractContextManager:
    """bf16 autocast for training where asked for, on a GPU or on a CPU with native bf16 (the
    parameters, BatchNorm's statistics, the perturbation and the loss stay fp32: autocast casts
    only the convolutions' and matmuls' inputs); fp32 otherwise, as the reference codes train.
    bf16 on a device that cannot run it is refused, not silently trained in fp32 under bf16's name."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
    if precision == "fp32":
        return contextlib.nullcontext()
    if device.type == "cuda" or (device.type == "cpu" and cpu_supports_bf16()):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    raise ValueError(f"precision 'bf16' needs a GPU or a CPU with native bf16 (AVX-512 BF16 or AMX) and the "
                     f"device is {describe(device)}; valid here: fp32")


def host_to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on `device` without a host wait: through pinned memory and a
    non_blocking copy on CUDA (a copy from pageable memory makes the host wait for it)."""
    if t.device == device:
        return t
    if device.type != "cuda" or t.device.type != "cpu":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


def set_cudnn_benchmark(device: torch.device) -> bool:
    """On CUDA, let cuDNN time its convolution algorithms once per input shape and keep the
    fastest (`torch.backends.cudnn.benchmark`): the shapes are static (training: the batch
    size and the last batch; evaluation: fixed chunks). Nothing changes on a CPU. Returns
    the setting in effect (recorded in meta.json and in evaluation records)."""
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    return bool(torch.backends.cudnn.benchmark)


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
