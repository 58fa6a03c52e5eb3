"""Early-stopped PGD of friendly adversarial training (FAT, Zhang et al. 2020;
zjfheart/Friendly-Adversarial-Training earlystop.py:earlystop).

Each sample follows PGD until it is misclassified, then takes at most `tau` further
steps and stops: the adversarial example is the least adversarial one that fools the
model (tau = 0) or a few steps beyond it. Like `pgd_run` it takes per-sample eps and
alpha, a targeted mode (`sign` -1: descending the loss towards the target; the stopping
rule stays "misclassified") and a loss callable. The training step
(study/train/step.py:TrainStep.adversarial) runs it from the start and with the step noise
that `TrainStep.draws` drew (FAT.py: a uniform start in the eps-ball, omega 0.001).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from study.attacks.pgd import LossFn, project, step_direction


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
    sign: float | Tensor,  # +1 ascends, -1 descends; per sample (B, 1, ..) for TRIX's mixed attack
    loss_fn: LossFn,
    step_noise: Callable[[int], Tensor | None],
) -> Tensor:
    """FAT's early-stopped steps from `delta` (fp32 images `x32`, per-sample (B, 1, ..)
    `eps_t`, `alpha_t`); `step_noise(i)` is step i's noise or None. The loop runs every
    step: leaving once every sample has stopped would read a value back to the host, and a
    stopped sample does not move, so the result is the same."""
    budget = torch.full((x32.shape[0],), int(tau), device=x32.device)
    active = torch.ones(x32.shape[0], dtype=torch.bool, device=x32.device)
    for i in range(steps):
        delta.requires_grad_(True)
        logits = model((x32 + delta).to(x32.dtype)).float()
        wrong = logits.argmax(1) != y
        # A fooled sample with no budget left stops here; one with budget spends a step.
        active = active & ~(wrong & (budget == 0))
        budget = torch.where(wrong & active, budget - 1, budget)
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
