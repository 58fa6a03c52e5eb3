"""Optimizers and per-iteration learning-rate schedules, each one table from the name
params.yaml uses to the function that builds it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import torch

LrFactor = Callable[[int], float]


def _sgd(params: Iterable, cfg: Mapping) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg.get("momentum", 0.9),
                           weight_decay=cfg["weight_decay"], nesterov=cfg.get("nesterov", False))


def _adam(params: Iterable, cfg: Mapping) -> torch.optim.Optimizer:
    return torch.optim.Adam(params, lr=cfg["lr"], betas=tuple(cfg.get("betas", (0.9, 0.999))),
                            weight_decay=cfg["weight_decay"])


OPTIMIZERS: dict[str, Callable[[Iterable, Mapping], torch.optim.Optimizer]] = {"sgd": _sgd, "adam": _adam}


def build_optimizer(params, cfg: Mapping) -> torch.optim.Optimizer:
    name = cfg["name"]
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; valid: {', '.join(OPTIMIZERS)}")
    return OPTIMIZERS[name](params, cfg)


def _step(cfg: Mapping, epochs: int, iters_per_epoch: int) -> LrFactor:
    """Divide by 1/gamma at each milestone (fractions of the epochs, 0.5 and 0.75 in Rice et
    al. 2020), changing at epoch boundaries."""
    milestones = sorted(round(m * epochs) for m in cfg.get("milestones", (0.5, 0.75)))
    gamma = cfg.get("gamma", 0.1)

    def step(it: int) -> float:
        epoch = it // iters_per_epoch
        return gamma ** sum(epoch >= m for m in milestones)

    return step


def _cyclic(cfg: Mapping, epochs: int, iters_per_epoch: int) -> LrFactor:
    """One linear up-and-down cycle over the whole run, peaking at `peak` of the iterations
    (0.4 as in Wong et al. 2020's cyclic schedule), ending at 0."""
    total = max(1, epochs * iters_per_epoch)
    peak = cfg.get("peak", 0.4)

    def cyclic(it: int) -> float:
        t = it / total
        return t / peak if t < peak else max(0.0, (1 - t) / (1 - peak))

    return cyclic


def _constant(cfg: Mapping, epochs: int, iters_per_epoch: int) -> LrFactor:
    return lambda it: 1.0


SCHEDULES: dict[str, Callable[[Mapping, int, int], LrFactor]] = {
    "step": _step, "cyclic": _cyclic, "constant": _constant,
}


def lr_factor(cfg: Mapping, epochs: int, iters_per_epoch: int) -> LrFactor:
    """Multiplier of the base lr at a given iteration."""
    name = cfg["name"]
    if name not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; valid: {', '.join(SCHEDULES)}")
    return SCHEDULES[name](cfg, epochs, iters_per_epoch)


def build_scheduler(
    optimizer: torch.optim.Optimizer, cfg: Mapping, epochs: int, iters_per_epoch: int
) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor(cfg, epochs, iters_per_epoch))


# --- The parameter update inside a training step ------------------------------------------
# torch.optim's step() breaks a compiled graph on purpose (torch/optim/optimizer.py,
# `_use_grad`), so the step applies the same arithmetic itself, on the optimizer's own
# state tensors: checkpoints keep torch's state_dict layout, and the learning rate comes in
# as a device tensor (a Python float would be a constant of the graph).

ParamUpdate = Callable[[torch.optim.Optimizer, list, list, torch.Tensor], None]


def mark_stepped(optimizer: torch.optim.Optimizer) -> None:
    """Tell the LR scheduler that the optimizer steps (it cannot see the step's own update)."""
    optimizer._opt_called = True


def _sgd_state(optimizer: torch.optim.Optimizer) -> None:
    # A zero buffer gives torch's first step exactly: 0 * momentum + d = d.
    for group in optimizer.param_groups:
        for p in group["params"]:
            if group["momentum"] and optimizer.state[p].get("momentum_buffer") is None:
                optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)


def _sgd_update(optimizer: torch.optim.Optimizer, params: list, grads: list, lr: torch.Tensor) -> None:
    """torch.optim.SGD's step (no dampening), one parameter group."""
    group = optimizer.param_groups[0]
    wd, momentum = group["weight_decay"], group["momentum"]
    d = torch._foreach_add(grads, params, alpha=wd) if wd else list(grads)
    if momentum:
        bufs = [optimizer.state[p]["momentum_buffer"] for p in params]
        torch._foreach_mul_(bufs, momentum)
        torch._foreach_add_(bufs, d)
        d = torch._foreach_add(d, bufs, alpha=momentum) if group["nesterov"] else bufs
    torch._foreach_sub_(params, torch._foreach_mul(d, lr))


def _adam_state(optimizer: torch.optim.Optimizer) -> None:
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state[p]
            if not state:
                state["step"] = torch.zeros((), dtype=torch.float32)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            # The step count lives beside the parameters, so bias correction needs no host value.
            state["step"] = state["step"].to(p.device)


def _adam_update(optimizer: torch.optim.Optimizer, params: list, grads: list, lr: torch.Tensor) -> None:
    """torch.optim.Adam's step (L2 weight decay, no amsgrad), one parameter group."""
    group = optimizer.param_groups[0]
    beta1, beta2 = group["betas"]
    wd, eps = group["weight_decay"], group["eps"]
    states = [optimizer.state[p] for p in params]
    step = states[0]["step"] + 1
    for s in states:
        s["step"].copy_(step)
    g = torch._foreach_add(grads, params, alpha=wd) if wd else list(grads)
    avg, avg_sq = [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states]
    torch._foreach_lerp_(avg, g, 1 - beta1)
    torch._foreach_mul_(avg_sq, beta2)
    torch._foreach_addcmul_(avg_sq, g, g, value=1 - beta2)
    step_size = lr / (1 - beta1 ** step)
    denom = torch._foreach_div(torch._foreach_sqrt(avg_sq), (1 - beta2 ** step).sqrt())
    torch._foreach_add_(denom, eps)
    torch._foreach_sub_(params, torch._foreach_mul(torch._foreach_div(avg, denom), step_size))


#: optimizer name -> (prepare its state tensors, apply one update); keys as OPTIMIZERS.
PARAM_UPDATES: dict[str, tuple[Callable[[torch.optim.Optimizer], None], ParamUpdate]] = {
    "sgd": (_sgd_state, _sgd_update), "adam": (_adam_state, _adam_update),
}


def lr_table(scheduler: torch.optim.lr_scheduler.LambdaLR, first: int, count: int,
             device: torch.device) -> torch.Tensor:
    """The learning rates of iterations first .. first + count - 1, as one device tensor
    (read once per epoch; the schedule is a function of the iteration only)."""
    base, factor = scheduler.base_lrs[0], scheduler.lr_lambdas[0]
    return torch.tensor([base * factor(first + i) for i in range(count)], dtype=torch.float32, device=device)
