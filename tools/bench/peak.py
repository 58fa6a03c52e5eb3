"""The device's measured peak and the FLOPs each bench task costs per image.

Peak: the best rate of a timed large matmul in the same process (fp32 on the CPU; bf16,
fp32 with TF32 off and TF32 on CUDA), which is what well-shaped convolutions can approach on
that device. A side's FLOP/s are divided by the peak of the precision it computes in
(`peak_basis`): TF32 on CUDA where the TF32 switches are on for its convolutions or matmuls
(PyTorch's default for cuDNN convolutions), bf16 for an engine run under bf16 autocast
(`--precision bf16`, CUDA only), fp32 otherwise; a CPU has no TF32, so fp32.

FLOPs: one forward pass of the model costs F (`count_flops`: 2 x multiply-accumulates of
the convolutions and linear layers). A backward pass costs ~2F when it computes both the
input and the weight gradients, ~F when only the input gradient is needed (an attack
step). Each task is charged its *useful* work, the same for engine and reference, so the
achieved FLOP/s of the two are comparable; work a side does beyond that (the reference's
weight gradients during the attack, TRADES' recomputed clean logits) makes it slower, not
busier.
"""

from __future__ import annotations

import time

import torch

FLOPS_CONVENTION = (
    "F = forward FLOPs per image (count_flops: 2 x multiply-accumulates of convolutions and linear layers). "
    "Backward = 2F with weight gradients, F for an input gradient only. Each task is charged its useful work, "
    "the same for engine and reference (see each task's flops_accounting); fraction_of_peak = achieved FLOP/s "
    "over the measured matmul peak of the precision named by peak_basis.")

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
              "turns it on for cuDNN convolutions), fp32 otherwise and always on a CPU (no TF32 there); bf16 for "
              "the engine's runs under bf16 autocast (--precision bf16, CUDA only; the reference trains in fp32)")


def peak_basis(device: torch.device, tf32: dict | None = None, precision: str = "fp32") -> str:
    """The precision a side computes in (BASIS_RULE), from the TF32 switches in effect while it
    ran (`tf32`: {cudnn, matmul}, as study.device.tf32_flags gives them) and the run's training
    precision (`bf16`: autocast, CUDA only)."""
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
