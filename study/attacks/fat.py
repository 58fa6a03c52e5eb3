"""Early-stopped PGD of friendly adversarial training (FAT, Zhang et al. 2020;
zjfheart/Friendly-Adversarial-Training earlystop.py:earlystop).

Each sample follows PGD until it is misclassified, then takes at most `tau` further
steps and stops: the adversarial example is the least adversarial one that fools the
model (tau = 0) or a few steps beyond it. Like `pgd_attack` it takes per-sample eps and
alpha, a targeted mode (descending the loss towards `target`; the stopping rule stays
"misclassified") and a loss callable, and never writes parameter gradients.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from study.attacks.pgd import (
    LossFn,
    _cross_entropy,
    _per_sample,
    _random_start,
    frozen_params,
    project,
    step_direction,
)


def early_stopped_run(
    model: nn.Module,
    x32: Tensor,
    y: Tensor,
    labels: Tensor,
    delta: Tensor,
    eps_t: Tensor,
    alpha_t: Tensor,
    *,
    steps: int,
    tau: int,
    norm: str,
    sign: float,
    loss_fn: LossFn,
    step_noise: Callable[[int], Tensor | None],
    stop_early: bool = True,
) -> Tensor:
    """FAT's early-stopped steps from `delta` (fp32 images `x32`, per-sample (B, 1, ..)
    `eps_t`, `alpha_t`); `step_noise(i)` is step i's noise or None. `stop_early` ends the
    loop once every sample has stopped, which reads a value back to the host: a compiled
    step runs every step instead (stopped samples do not move, so the result is the same)."""
    budget = torch.full((x32.shape[0],), int(tau), device=x32.device)
    active = torch.ones(x32.shape[0], dtype=torch.bool, device=x32.device)
    for i in range(steps):
        delta.requires_grad_(True)
        logits = model((x32 + delta).to(x32.dtype)).float()
        wrong = logits.argmax(1) != y
        # A fooled sample with no budget left stops here; one with budget spends a step.
        active = active & ~(wrong & (budget == 0))
        budget = torch.where(wrong & active, budget - 1, budget)
        if stop_early and not bool(active.any()):
            break
        (grad,) = torch.autograd.grad(loss_fn(logits, labels).sum(), delta)
        with torch.no_grad():
            moved = delta.detach() + sign * alpha_t * step_direction(grad.float(), norm)
            noise = step_noise(i)
            if noise is not None:
                moved = moved + noise
            moved = project(moved, x32, eps_t, norm)
            mask = active.view(-1, *([1] * (x32.dim() - 1)))
            delta = torch.where(mask, moved, delta.detach())
    return delta.detach()


def early_stopped_pgd(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    *,
    eps: float | Tensor,
    alpha: float | Tensor,
    steps: int,
    tau: int,
    norm: str = "linf",
    target: Tensor | None = None,
    loss: LossFn | None = None,
    generator: torch.Generator | None = None,
    random_start: bool = True,
    start_std: float | None = None,
    step_noise: float = 0.0,
) -> Tensor:
    """FAT's attack. It starts, as FAT.py trains, from a uniform point of the eps-ball
    (`uniform_randominit`), or from x + start_std * N(0, 1) (`normal_distribution_randominit`,
    the TRADES variant) when `start_std` is given, or from x without `random_start`; each
    step adds `step_noise` * N(0, 1) (earlystop's `omega`, 0.001 in FAT.py) before the
    projection."""
    if tau < 0:
        raise ValueError(f"tau must be >= 0, got {tau}")
    if step_noise < 0:
        raise ValueError(f"step_noise must be >= 0, got {step_noise}")
    x = x.detach()
    x32 = x.float()
    eps_t, alpha_t = _per_sample(eps, "eps", x), _per_sample(alpha, "alpha", x)
    if random_start:
        delta = project(_random_start(x32, eps_t, norm, generator, start_std), x32, eps_t, norm)
    else:
        delta = torch.zeros_like(x32)

    def noise(_step: int) -> Tensor | None:
        if step_noise <= 0:
            return None
        return step_noise * torch.randn(x.shape, generator=generator, device=x.device, dtype=torch.float32)

    with frozen_params(model):
        delta = early_stopped_run(model, x32, y, y if target is None else target, delta, eps_t, alpha_t,
                                  steps=steps, tau=tau, norm=norm, sign=1.0 if target is None else -1.0,
                                  loss_fn=loss or _cross_entropy, step_noise=noise)
    return (x32 + delta).clamp(0.0, 1.0).to(x.dtype)
