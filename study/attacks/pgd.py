"""Projected gradient descent (Madry et al. 2018) in pixel space, L-inf and L2 balls.

The attack only needs input gradients, so it takes them with ``torch.autograd.grad`` on the
perturbation while the model's parameters are frozen: no parameter gradient is ever
computed or accumulated, and an attack inside a training step cannot leak into the
optimizer's ``.grad`` buffers.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from study.device import host_to_device

NORMS: tuple[str, ...] = ("linf", "l2")
LOSS_NAMES: tuple[str, ...] = ("ce",)

#: ``loss(logits, labels) -> per-sample losses (B,)``; ``labels`` are ``y`` (untargeted) or
#: ``target`` (targeted). A KL/TRADES loss can close over the clean logits.
LossFn = Callable[[Tensor, Tensor], Tensor]


def _cross_entropy(logits: Tensor, labels: Tensor) -> Tensor:
    return F.cross_entropy(logits, labels, reduction="none")


_LOSSES: dict[str, LossFn] = {"ce": _cross_entropy}


@contextlib.contextmanager
def frozen_params(model: nn.Module) -> Iterator[nn.Module]:
    """Set ``requires_grad=False`` on all parameters; restore each flag on exit, even on error."""
    params = list(model.parameters())
    flags = [p.requires_grad for p in params]
    try:
        for p in params:
            p.requires_grad_(False)
        yield model
    finally:
        for p, flag in zip(params, flags, strict=True):
            p.requires_grad_(flag)


def _per_sample(value: float | Tensor, name: str, x: Tensor) -> Tensor:
    """``value`` as an fp32 tensor of shape (B, 1, ..., 1) that broadcasts against ``x``."""
    shape = (-1, *([1] * (x.dim() - 1)))
    if not isinstance(value, Tensor):
        # A number (an evaluation's eps and alpha): checked here, filled on the device, so no
        # batch copies it from the host.
        v = float(value)
        if not (math.isfinite(v) and v >= 0):
            raise ValueError(f"{name} must be finite and >= 0, got {v}")
        return torch.full((x.shape[0],), v, dtype=torch.float32, device=x.device).view(shape)
    t = value.to(dtype=torch.float32)
    if t.dim() == 0:
        t = t.expand(x.shape[0])
    if t.shape != (x.shape[0],):
        raise ValueError(
            f"{name} must be a float or a tensor of shape ({x.shape[0]},), got shape "
            f"{tuple(t.shape)}"
        )
    # Values are checked where they live on the host; a device tensor (the engine's
    # class-wise eps) is not, as reading it back would stall the GPU at every batch.
    if t.device.type == "cpu" and (not bool(torch.isfinite(t).all()) or bool((t < 0).any())):
        raise ValueError(f"{name} must be finite and >= 0, got {t.tolist()}")
    return host_to_device(t, x.device).view(shape)


def _flat_norm(t: Tensor) -> Tensor:
    return torch.linalg.vector_norm(t.flatten(1), dim=1).view(-1, *([1] * (t.dim() - 1)))


def project(delta: Tensor, x: Tensor, eps: Tensor, norm: str) -> Tensor:
    """Project onto the eps-ball, then into the [0, 1] image box.

    Clipping to the box only shrinks each coordinate of ``delta`` towards 0 (``x`` is in
    the box), so the result stays inside the ball for both norms.
    """
    if norm == "linf":
        delta = torch.maximum(torch.minimum(delta, eps), -eps)
    else:
        # The clamp avoids 0/0 when delta is 0; eps == 0 then gives a scale of exactly 0.
        delta = delta * torch.clamp(eps / _flat_norm(delta).clamp_min(1e-12), max=1.0)
    return (x + delta).clamp(0.0, 1.0) - x


#: Random starts are drawn RNG_CHUNK images at a time, so a sample's start does not depend on
#: the batch it is evaluated in (for batch sizes that are multiples of it): a GPU can
#: evaluate in large batches and give the records of small ones.
RNG_CHUNK = 128


def start_draws(x: Tensor, norm: str, generator: torch.Generator | None,
                start_std: float | None = None) -> tuple[Tensor, ...]:
    """The random numbers of one random start, drawn from `generator` in a fixed order,
    RNG_CHUNK images at a time (a compiled training step takes them as inputs: a generator
    cannot live inside a graph)."""
    if x.shape[0] <= RNG_CHUNK:
        return _chunk_draws(x, norm, generator, start_std)
    parts = [_chunk_draws(x[i : i + RNG_CHUNK], norm, generator, start_std) for i in range(0, x.shape[0], RNG_CHUNK)]
    return tuple(torch.cat(p) for p in zip(*parts, strict=True))


def _chunk_draws(x: Tensor, norm: str, generator: torch.Generator | None,
                 start_std: float | None) -> tuple[Tensor, ...]:
    if start_std is not None or norm == "linf":
        draw = torch.randn if start_std is not None else torch.rand
        return (draw(x.shape, generator=generator, device=x.device, dtype=torch.float32),)
    direction = torch.randn(x.shape, generator=generator, device=x.device, dtype=torch.float32)
    return direction, torch.rand(x.shape[0], generator=generator, device=x.device, dtype=torch.float32)


def start_from_draws(draws: tuple[Tensor, ...], x: Tensor, eps: Tensor, norm: str,
                     start_std: float | None = None) -> Tensor:
    """The start perturbation (before projection) that `draws` (from `start_draws`) stand for."""
    if start_std is not None:
        # TRADES' start (yaodongyu/TRADES trades.py): x + 0.001 * N(0, 1), whatever the ball.
        return start_std * draws[0]
    if norm == "linf":
        return (2 * draws[0] - 1) * eps
    # Uniform in the L2 ball: Gaussian direction, radius eps * U^(1/d).
    direction, u = draws
    direction = direction / _flat_norm(direction).clamp_min(1e-12)
    radius = u.pow(1.0 / x[0].numel()).view_as(eps)
    return direction * radius * eps


def _random_start(x: Tensor, eps: Tensor, norm: str, generator: torch.Generator | None,
                  start_std: float | None = None) -> Tensor:
    return start_from_draws(start_draws(x, norm, generator, start_std), x, eps, norm, start_std)


def step_direction(grad: Tensor, norm: str) -> Tensor:
    if norm == "linf":
        return grad.sign()
    return grad / _flat_norm(grad).clamp_min(1e-12)


def _losses(
    model: nn.Module, x_in: Tensor, labels: Tensor, loss_fn: LossFn
) -> tuple[Tensor, Tensor]:
    """Per-sample fp32 losses and the logits' predictions for ``x_in``."""
    logits = model(x_in).float()
    losses = loss_fn(logits, labels)
    if losses.shape != labels.shape:
        raise ValueError(
            f"loss must return one value per sample, shape {tuple(labels.shape)}; "
            f"got shape {tuple(losses.shape)}"
        )
    return losses.float(), logits.argmax(dim=1)


def pgd_run(
    model: nn.Module,
    x: Tensor,
    labels: Tensor,
    delta: Tensor,
    eps: Tensor,
    alpha: Tensor,
    steps: int,
    norm: str,
    sign: float | Tensor,
    loss_fn: LossFn,
) -> Tensor:
    """One PGD run from ``delta``; ``sign`` is +1 to ascend the loss, -1 to descend it (or a
    per-sample tensor of shape (B, 1, ..., 1): TRIX's mixed targeted and untargeted attack)."""
    autocast_off = torch.autocast(device_type=x.device.type, enabled=False)
    for _ in range(steps):
        delta.requires_grad_(True)
        losses, _ = _losses(model, (x + delta).to(x.dtype), labels, loss_fn)
        # Summing keeps each sample's gradient its own (a mean would scale it by 1/B).
        (grad,) = torch.autograd.grad(losses.sum(), delta)
        with torch.no_grad(), autocast_off:
            delta = delta.detach() + sign * alpha * step_direction(grad.float(), norm)
            delta = project(delta, x.float(), eps, norm)
    return delta.detach()


def _check_attack(x: Tensor, y: Tensor, norm: str, loss: str | LossFn, steps: int, restarts: int) -> LossFn:
    """Validate pgd_attack's arguments; the per-sample loss function to attack with."""
    if norm not in NORMS:
        raise ValueError(f"unknown norm {norm!r}; valid norms: {', '.join(NORMS)}")
    if isinstance(loss, str):
        if loss not in _LOSSES:
            raise ValueError(
                f"unknown loss {loss!r}; valid losses: {', '.join(LOSS_NAMES)} or a callable"
            )
        loss_fn = _LOSSES[loss]
    elif callable(loss):
        loss_fn = loss
    else:
        raise ValueError(f"loss must be one of {', '.join(LOSS_NAMES)} or a callable, got {loss!r}")
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    if restarts < 1:
        raise ValueError(f"restarts must be >= 1, got {restarts}")
    if x.dim() < 2 or y.shape != (x.shape[0],):
        raise ValueError(
            f"need x of shape (B, ...) and y of shape (B,), got {tuple(x.shape)} and "
            f"{tuple(y.shape)}"
        )
    return loss_fn


def _attack_labels(x: Tensor, y: Tensor, targeted: bool, target: Tensor | None) -> Tensor:
    """The labels the loss is computed on: the targets of a targeted attack, else the true labels."""
    if targeted:
        if target is None:
            raise ValueError("targeted=True needs target (a tensor of shape (B,))")
        if target.shape != y.shape:
            raise ValueError(f"target must have shape {tuple(y.shape)}, got {tuple(target.shape)}")
        return host_to_device(target, x.device)
    if target is not None:
        raise ValueError("target was given but targeted=False; pass targeted=True to use it")
    return host_to_device(y, x.device)


def _restart(model: nn.Module, x: Tensor, x32: Tensor, labels: Tensor, delta0: Tensor, eps_t: Tensor,
             alpha_t: Tensor, steps: int, norm: str, sign: float, loss_fn: LossFn, best: Tensor, best_loss: Tensor,
             solved: Tensor) -> bool:
    """One more run on the samples not yet solved, keeping per sample the first success or
    the best final loss (updates `best`, `best_loss`, `solved` in place); False when every
    sample was solved already.

    A model in train mode is attacked on the whole batch: its BatchNorm layers normalise by
    the batch's own statistics, so a subset would be a different model (and a subset of one
    sample has no batch statistics at all); only the unsolved samples' results are kept."""
    unsolved = ~solved
    if not unsolved.any():
        return False
    run = torch.ones_like(solved) if any(m.training for m in model.modules()) else unsolved
    idx = run.nonzero().squeeze(1)
    delta = pgd_run(model, x[idx], labels[idx], delta0[idx], eps_t[idx], alpha_t[idx], steps, norm, sign, loss_fn)
    x_adv = x32[idx] + delta
    with torch.no_grad():
        losses, pred = _losses(model, x_adv.to(x.dtype), labels[idx], loss_fn)
    open_ = unsolved[idx]
    success = (pred == labels[idx] if sign < 0 else pred != labels[idx]) & open_
    # NaN best_loss marks "no run yet", so the first run always fills it.
    better = sign * losses > sign * best_loss[idx]
    take = open_ & (success | better | torch.isnan(best_loss[idx]))
    best[idx[take]] = x_adv[take]
    best_loss[idx[take]] = losses[take]
    solved[idx[success]] = True
    return True


def pgd_attack(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    *,
    eps: float | Tensor,
    alpha: float | Tensor,
    steps: int,
    restarts: int = 1,
    norm: str = "linf",
    targeted: bool = False,
    target: Tensor | None = None,
    random_start: bool = True,
    generator: torch.Generator | None = None,
    loss: str | LossFn = "ce",
    start_std: float | None = None,
) -> Tensor:
    """Adversarial examples for pixel inputs ``x`` in [0, 1] with labels ``y``.

    ``eps`` and ``alpha`` (step size) are floats or per-sample tensors of shape (B,).
    ``norm`` is ``"linf"`` (signed-gradient steps) or ``"l2"`` (normalized-gradient steps).
    Untargeted attacks ascend ``loss`` on ``y``; targeted ones (``targeted=True`` with
    ``target``) descend it towards ``target``. ``loss`` is ``"ce"`` or a callable
    ``(logits, labels) -> per-sample losses`` (labels are ``target`` when targeted).

    Each of ``restarts`` runs starts from a uniform random point in the ball drawn from
    ``generator`` (which must live on ``x``'s device), from ``x + start_std * N(0, 1)``
    (projected into the ball and the box) when ``start_std`` is given, or from ``x`` when
    ``random_start`` is False. Per sample, the first run that succeeds (misclassified / classified as
    ``target``) is kept, else the run with the highest (untargeted) / lowest (targeted)
    final loss. Later runs only attack samples still unsolved (a model in train mode: the
    whole batch, keeping only the unsolved samples' results), but every run draws its
    random start for the whole batch so that, for a model in eval mode, ``restarts=k`` gives
    exactly the per-sample selection over ``k`` consecutive single-run calls sharing
    ``generator``.

    The model's train/eval mode is not changed: the caller decides (in train mode,
    BatchNorm layers use batch statistics and update their running averages during the
    attack). Parameters are frozen while attacking and no ``.grad`` is written. The
    perturbation is kept and updated in fp32, so the call may run under ``torch.autocast``.

    Returns a detached tensor like ``x`` (dtype, device) with every sample inside its
    eps-ball around ``x`` and in [0, 1].
    """
    loss_fn = _check_attack(x, y, norm, loss, steps, restarts)
    if start_std is not None and not start_std >= 0:
        raise ValueError(f"start_std must be >= 0 or None, got {start_std}")
    labels = _attack_labels(x, y, targeted, target)
    x = x.detach()
    eps_t = _per_sample(eps, "eps", x)
    alpha_t = _per_sample(alpha, "alpha", x)
    sign = -1.0 if targeted else 1.0
    x32 = x.float()

    best = x32.clone()
    best_loss = torch.full((x.shape[0],), float("nan"), device=x.device)
    solved = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)
    with frozen_params(model):
        for _ in range(restarts):
            if random_start:
                delta0 = _random_start(x32, eps_t, norm, generator, start_std)
                delta0 = project(delta0, x32, eps_t, norm)
            else:
                delta0 = torch.zeros_like(x32)
            if restarts == 1:
                # Nothing to choose between, so skip the extra scoring forward pass.
                delta = pgd_run(
                    model, x, labels, delta0, eps_t, alpha_t, steps, norm, sign, loss_fn
                )
                best = x32 + delta
                break
            if not _restart(model, x, x32, labels, delta0, eps_t, alpha_t, steps, norm, sign, loss_fn,
                            best, best_loss, solved):
                break
    # x + 0 is exact in fp32, so zero-eps samples come back bit-identical to x.
    return best.clamp(0.0, 1.0).to(x.dtype).detach()
