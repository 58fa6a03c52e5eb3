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
