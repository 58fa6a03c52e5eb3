"""The two constructions of Ilyas et al. (2019), on one batch at a time.

Robust / non-robust datasets (D_R, D_NR): each training image x is re-synthesised by
starting from *another* training image and descending ||g(x_r) - g(x)||_2, the distance
between penultimate-layer representations g, with normalized L2 gradient steps. Through
a robust model only robust features can be matched (D_R); through a standard one the
result carries the non-robust features that model relies on (D_NR). The label stays y.

Relabelled datasets (D_rand, D_det): targeted L2 PGD moves x towards a target class t on
a standard model, and the image is relabelled t: the features that carry the new label
are imperceptible (non-robust), while the visible content still shows class y.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from study.attacks.pgd import frozen_params, pgd_attack

KINDS = ("d_r", "d_nr", "d_rand", "d_det")
REPRESENTATION_KINDS = ("d_r", "d_nr")
RELABEL_KINDS = ("d_rand", "d_det")


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown constructed dataset {kind!r}; valid: {', '.join(KINDS)}")


def penultimate(model: nn.Module, x: Tensor) -> Tensor:
    """`model.features(x)`: the penultimate representation every model of the registry has
    (study.models.registry's contract); a module lookup to mypy, so called only once it is callable."""
    features = model.features
    if not callable(features):
        raise TypeError(f"{type(model).__name__} has no features method (study.models.registry)")
    return features(x)


def representation_distance(model: nn.Module, x: Tensor, goal: Tensor) -> Tensor:
    """Per-sample ||g(x) - goal||_2 with g the model's penultimate representation."""
    with torch.no_grad():
        return (penultimate(model, x) - goal).flatten(1).norm(dim=1)


def match_representation(
    model: nn.Module, x_target: Tensor, x_start: Tensor, *, steps: int, step_size: float
) -> Tensor:
    """Descend ||g(x_r) - g(x_target)||_2 from x_start by normalized L2 steps, staying in [0,1].

    The model must be in eval mode (BatchNorm statistics fixed); its parameters are frozen
    so only input gradients are taken.
    """
    if model.training:
        raise ValueError("match_representation needs the model in eval mode")
    with torch.no_grad():
        goal = penultimate(model, x_target)
    x = x_start.clone().float()
    with frozen_params(model):
        for _ in range(steps):
            x.requires_grad_(True)
            loss = (penultimate(model, x) - goal).flatten(1).norm(dim=1).sum()
            (grad,) = torch.autograd.grad(loss, x)
            norm = grad.flatten(1).norm(dim=1).clamp_min(1e-12).view(-1, *([1] * (x.dim() - 1)))
            x = (x.detach() - step_size * grad / norm).clamp(0.0, 1.0)
    return x.detach()


def relabel_targets(kind: str, y: Tensor, num_classes: int, generator: torch.Generator) -> Tensor:
    """D_rand: a target drawn uniformly over the classes (Ilyas et al.: t ~ U{1..k});
    D_det: the deterministic target (y + 1) mod C."""
    if kind == "d_det":
        return (y + 1) % num_classes
    if kind == "d_rand":
        return torch.randint(0, num_classes, y.shape, generator=generator, device=generator.device).to(y.device)
    raise ValueError(f"{kind!r} is not a relabelled dataset; valid: {', '.join(RELABEL_KINDS)}")


def relabel(
    model: nn.Module, x: Tensor, target: Tensor, *, eps: float, step_size: float, steps: int
) -> Tensor:
    """Targeted L2 PGD towards `target` from x itself (no random start), model in eval mode."""
    if model.training:
        raise ValueError("relabel needs the model in eval mode")
    return pgd_attack(
        model, x, target, eps=eps, alpha=step_size, steps=steps, norm="l2",
        targeted=True, target=target, random_start=False,
    )


def other_indices(n: int, generator: torch.Generator) -> Tensor:
    """For each i an index j != i drawn uniformly: the starting image of x_i's synthesis."""
    if n < 2:
        raise ValueError(f"need at least 2 images to start each from another one, got {n}")
    offset = torch.randint(1, n, (n,), generator=generator)
    return (torch.arange(n) + offset) % n
