"""The device's peak and the FLOPs each bench task costs per image.

Peak (docs/performance.md, "Peak"): a fraction of peak above 100% is impossible by
construction. The basis of each precision is the highest of (a) the hardware's peak where the
machine reports its facts (a CPU: cores x clock x fp32 lanes of its widest FMA x 2 FLOPs per
FMA x FMA units per core, `hardware_peak`; every fact not reported is an assumption, named),
(b) the best rate of a timed large matmul in the same process (fp32 on the CPU; bf16, fp32
with TF32 off and TF32 on CUDA) and (c) the fastest rate any timed task of the bench itself
reached in that precision (`honest_peak`): a convolution may run faster than the matmul
(oneDNN's Winograd kernels do fewer multiplies than the direct count charges), and then the
peak is that kernel's, said so in the report. A side's FLOP/s are divided by the peak of the precision it computes in
(`peak_basis`): TF32 on CUDA where the TF32 switches are on for its convolutions or matmuls
(PyTorch's default for cuDNN convolutions), bf16 for an engine run under bf16 autocast on a GPU
(`--precision bf16`), fp32 otherwise; a CPU has no TF32, so fp32, and a CPU's bf16 run is divided by
its fp32 peak (the bf16 peak of a CPU is not timed).

FLOPs: one forward pass of the model costs F (`count_flops`: 2 x multiply-accumulates of
the convolutions and linear layers). A backward pass costs ~2F when it computes both the
input and the weight gradients, ~F when only the input gradient is needed (an attack
step). Each task is charged its *useful* work, the same for engine and reference, so the
achieved FLOP/s of the two are comparable; work a side does beyond that (the reference's
weight gradients during the attack, TRADES' recomputed clean logits) makes it slower, not
busier.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch

FLOPS_CONVENTION = (
    "F = forward FLOPs per image (count_flops: 2 x multiply-accumulates of convolutions and linear layers). "
    "Backward = 2F with weight gradients, F for an input gradient only. Each task is charged its useful work, "
    "the same for engine and reference (see each task's flops_accounting); fraction_of_peak = achieved FLOP/s "
    "over the peak of the precision named by peak_basis: the highest of the hardware's peak (cores x clock x FMA "
    "width x 2 x FMA units, where the machine reports them), the measured matmul and the fastest task of the bench "
    "in that precision (peak.source says which).")

# Matmul sides: large enough to reach the device's sustained rate, small enough to take
# about a second.
_CPU_SIDE = 2048
_CUDA_SIDE = 8192


def _time_matmul(side: int, dtype: torch.dtype, device: torch.device, reps: int) -> float:
    a = torch.randn(side, side, device=device, dtype=dtype)
    b = torch.randn(side, side, device=device, dtype=dtype)
    for _ in range(2):  # warm-up: thread pools, cuBLAS handles, clocks
        a @ b
    best = float("inf")
    for _ in range(reps):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * side**3 / best


def measure_peak(device: torch.device) -> dict:
    """{dtype name: FLOP/s, ...} of a timed square matmul, plus how it was measured."""
    if device.type == "cuda":
        side = _CUDA_SIDE
        was = torch.backends.cuda.matmul.allow_tf32
        try:
            torch.backends.cuda.matmul.allow_tf32 = False
            peaks = {"bf16": _time_matmul(side, torch.bfloat16, device, 10),
                     "fp32": _time_matmul(side, torch.float32, device, 10)}
            torch.backends.cuda.matmul.allow_tf32 = True
            peaks["tf32"] = _time_matmul(side, torch.float32, device, 10)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = was
        method = f"best of timed {side}x{side} @ {side}x{side} matmuls (fp32 with TF32 off, tf32 with it on)"
    else:
        side = _CPU_SIDE
        peaks = {"fp32": _time_matmul(side, torch.float32, device, 5)}
        method = f"best of timed {side}x{side} @ {side}x{side} matmuls"
    return {"flops": peaks, "method": method}


def combine_peaks(start: dict, end: dict) -> dict:
    """The better of two measurements (start and end of the bench): other load on the
    machine only ever lowers a measured peak."""
    flops = {k: max(start["flops"][k], end["flops"][k]) for k in start["flops"]}
    return {**start, "flops": flops, "start": start["flops"], "end": end["flops"],
            "method": start["method"] + ", at the start and the end of the bench, the higher kept"}


BASIS_RULE = ("the precision a side computes in: tf32 on CUDA where torch.backends.cudnn.allow_tf32 or "
              "torch.backends.cuda.matmul.allow_tf32 is on while it runs (the run's train.tf32; PyTorch's default "
              "turns it on for cuDNN convolutions), fp32 otherwise and always on a CPU (no TF32 there, and its bf16 "
              "peak is not timed: a CPU bf16 run's fraction is of the fp32 peak); bf16 for the engine's runs under "
              "bf16 autocast on a GPU (--precision bf16; the reference trains in fp32)")


def peak_basis(device: torch.device, tf32: dict | None = None, precision: str = "fp32") -> str:
    """The precision a side computes in (BASIS_RULE), from the TF32 switches in effect while it
    ran (`tf32`: {cudnn, matmul}, as study.device.tf32_flags gives them) and the run's training
    precision (`bf16`: autocast)."""
    if device.type != "cuda":
        return "fp32"
    if precision == "bf16":
        return "bf16"
    flags = tf32 if tf32 is not None else {"cudnn": torch.backends.cudnn.allow_tf32,
                                            "matmul": torch.backends.cuda.matmul.allow_tf32}
    return "tf32" if flags.get("cudnn") or flags.get("matmul") else "fp32"


def task_flops(task: str, forward: float, *, steps: int = 0, iterations: int = 0,
               attacked: float = 1.0) -> tuple[float, str]:
    """(useful FLOPs per image, how they were counted) for one task; `forward` is F."""
    if task == "standard_epoch":
        return 3 * forward, "3F: forward + backward (input and weight gradients, 2F)"
    if task == "pgd10_at_epoch":
        return (2 * steps + 3) * forward, (
            f"(2k+3)F with k={steps}: k attack steps of forward + input-gradient backward (2F), then a "
            "training forward + backward (3F). The reference's loss.backward() attack also computes "
            "weight gradients, (3k+3)F, not counted.")
    if task == "trades_epoch":
        return (2 * steps + 7) * forward, (
            f"(2k+7)F with k={steps}: clean logits for the KL target (F), k attack steps (2F), "
            "training forward + backward on clean and adversarial inputs (6F). The published "
            "TRADES code (the reference) recomputes the clean logits at every attack step and twice "
            "in the loss, (3k+9)F, not counted.")
    if task == "pgd20_eval":
        return (2 * steps + 1) * forward, (
            f"(2k+1)F with k={steps}: k attack steps (2F) and the final classification (F)")
    if task == "autoattack_eval":
        return (1 + attacked * 2 * (iterations + 1)) * forward, (
            f"(1 + a * 2(n+1))F with n={iterations} APGD iterations and a={attacked:.3f} the fraction "
            "of images classified correctly (the only ones AutoAttack attacks): the clean pass (F), "
            "then an initial and n gradient steps (2F each) per attacked image")
    raise ValueError(f"unknown task {task!r}")


#: fp32 lanes of one FMA instruction, by the widest vector extension the CPU flags report
FMA_LANES = (("avx512f", 16), ("avx2", 8), ("fma", 8), ("sse2", 4))
#: FMA units per core: no machine reports it; 2 is the most any x86 core has, so the peak is an upper bound
ASSUMED_FMA_UNITS = 2


def _cpu_facts(cpuinfo: str, lscpu: str, max_khz: str | None) -> dict:
    """Clock (Hz) and its source, the fp32 FMA width and threads per core, from /proc/cpuinfo,
    `lscpu` and cpufreq's cpuinfo_max_freq (text; None where absent)."""
    flags = set(next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines()
                      if line.startswith("flags")), []))
    lanes, extension = next(((n, f) for f, n in FMA_LANES if f in flags), (1, "scalar"))
    field = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in lscpu.splitlines())}
    model = field.get("Model name") or next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                                             if line.startswith("model name")), "")
    named = re.search(r"@\s*([0-9.]+)\s*GHz", model)
    bogomips = field.get("BogoMIPS") or next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                                              if line.lower().startswith("bogomips")), None)
    if max_khz:
        clock, source = float(max_khz) * 1e3, "cpufreq cpuinfo_max_freq"
    elif field.get("CPU max MHz"):
        clock, source = float(field["CPU max MHz"]) * 1e6, "lscpu CPU max MHz"
    elif named:
        clock, source = float(named.group(1)) * 1e9, "the model name's clock"
    elif bogomips:
        # x86 Linux calibrates BogoMIPS at twice the TSC clock: the base clock, not the boost
        clock, source = float(bogomips) / 2 * 1e6, ("ASSUMED: no maximum clock is reported (no cpufreq, no "
                                                    "lscpu CPU max MHz, none in the model name); BogoMIPS / 2, "
                                                    "the TSC (base) clock")
    else:
        clock, source = None, "no clock reported"
    per_core = field.get("Thread(s) per core")
    return {"clock_hz": clock, "clock_source": source, "fma_lanes": lanes, "extension": extension,
            "threads_per_core": int(per_core) if per_core and per_core.isdigit() else 1,
            "threads_per_core_source": "lscpu" if per_core else "ASSUMED 1 (lscpu does not say)", "model": model}


def hardware_peak(threads: int, *, cpuinfo: str | None = None, lscpu: str | None = None,
                  max_khz: str | None = None, logical_cpus: int | None = None) -> dict | None:
    """The CPU's fp32 peak from what the machine reports: physical cores used (the logical CPUs
    this process may run on over threads per core, at most `threads`) x clock x fp32 lanes of
    the widest FMA x 2 FLOPs per FMA x ASSUMED_FMA_UNITS; None where no clock is reported.
    The arguments stand in for the files (tests)."""
    def read(path: str) -> str | None:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return None

    if cpuinfo is None:
        cpuinfo = read("/proc/cpuinfo") or ""
        max_khz = read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if lscpu is None:
        lscpu = ""
        if shutil.which("lscpu"):
            try:
                lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10,
                                       env={**os.environ, "LC_ALL": "C"}).stdout
            except (OSError, subprocess.SubprocessError):
                lscpu = ""
    facts = _cpu_facts(cpuinfo, lscpu, max_khz)
    if facts["clock_hz"] is None:
        return None
    if logical_cpus is None:
        logical_cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    cores = max(1, min(threads, logical_cpus // max(1, facts["threads_per_core"])))
    flops = cores * facts["clock_hz"] * facts["fma_lanes"] * 2 * ASSUMED_FMA_UNITS
    return {"flops": flops, "cores": cores, **facts, "fma_units": ASSUMED_FMA_UNITS,
            "fma_units_source": "ASSUMED: not reported by the machine; 2, the most of any x86 core (an upper bound)",
            "method": (f"{cores} cores x {facts['clock_hz'] / 1e9:.3f} GHz ({facts['clock_source']}) x "
                       f"{facts['fma_lanes']} fp32 lanes ({facts['extension']}) x 2 FLOPs per FMA x "
                       f"{ASSUMED_FMA_UNITS} FMA units (assumed)")}


def honest_peak(measured: Mapping, hardware: Mapping | None, records: Iterable[Mapping]) -> dict:
    """The peak of each precision the timed records compute in: the highest of the hardware's
    (fp32 on a CPU, where known), the measured matmul's and the fastest record's FLOP/s, with
    `source` naming which (and `raised_by` the record that lifted it above the other two), so
    that no record's fraction of peak can exceed 1."""
    records = list(records)
    peaks, sources, raised = {}, {}, {}
    bases = set(measured["flops"]) | {r["peak_basis"] for r in records}
    for basis in sorted(bases):
        candidates = []
        if basis in measured["flops"]:
            candidates.append((measured["flops"][basis], "matmul"))
        if hardware is not None and basis == "fp32":
            candidates.append((hardware["flops"], "hardware"))
        fastest = max((r for r in records if r["peak_basis"] == basis), key=lambda r: r["flop_per_s"], default=None)
        if fastest is not None:
            candidates.append((fastest["flop_per_s"], "task"))
        value, source = max(candidates, key=lambda c: c[0])
        if source == "task" and len(candidates) > 1:
            raised[basis] = {"task": fastest.get("task", "?"), "side": fastest.get("side", "?"),
                             "flop_per_s": fastest["flop_per_s"],
                             "above": {s: v for v, s in candidates if s != "task"}}
        peaks[basis], sources[basis] = value, source
    return {**measured, "flops": peaks, "matmul": dict(measured["flops"]), "source": sources, "raised_by": raised,
            "hardware": dict(hardware) if hardware is not None else None}
