"""Early-stopped PGD of friendly adversarial training (FAT, Zhang et al. 2020;
zjfheart/Friendly-Adversarial-Training earlystop.py:earlystop).

Each sample follows PGD until it is misclassified, then takes at most `tau` further
steps and stops: the adversarial example is the least adversarial one that fools the
model (tau = 0) or a few steps beyond it. Like `pgd_attack` it takes per-sample eps and
alpha, a targeted mode (descending the loss towards `target`; the stopping rule stays
"misclassified") and a loss callable, and never writes parameter gradients.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from study.attacks.pgd import (
    LossFn,
    _cross_entropy,
    _per_sample,
    _project,
    _random_start,
    _step_direction,
    frozen_params,
)


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
    loss_fn = loss or _cross_entropy
    labels = y if target is None else target
    sign = 1.0 if target is None else -1.0
    x = x.detach()
    x32 = x.float()
    eps_t, alpha_t = _per_sample(eps, "eps", x), _per_sample(alpha, "alpha", x)
    if random_start:
        delta = _project(_random_start(x32, eps_t, norm, generator, start_std), x32, eps_t, norm)
    else:
        delta = torch.zeros_like(x32)
    budget = torch.full((x.shape[0],), int(tau), device=x.device)
    active = torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
    with frozen_params(model):
        for _ in range(steps):
            delta.requires_grad_(True)
            logits = model((x32 + delta).to(x.dtype)).float()
            wrong = logits.argmax(1) != y
            # A fooled sample with no budget left stops here; one with budget spends a step.
            active = active & ~(wrong & (budget == 0))
            budget = torch.where(wrong & active, budget - 1, budget)
            if not bool(active.any()):
                break
            (grad,) = torch.autograd.grad(loss_fn(logits, labels).sum(), delta)
            with torch.no_grad():
                moved = delta.detach() + sign * alpha_t * _step_direction(grad.float(), norm)
                if step_noise > 0:
                    moved = moved + step_noise * torch.randn(x.shape, generator=generator, device=x.device,
                                                             dtype=torch.float32)
                moved = _project(moved, x32, eps_t, norm)
                mask = active.view(-1, *([1] * (x.dim() - 1)))
                delta = torch.where(mask, moved, delta.detach())
    return (x32 + delta.detach()).clamp(0.0, 1.0).to(x.dtype)
