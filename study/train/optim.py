"""Optimizers and per-iteration learning-rate schedules, each one table from the name
params.yaml uses to the function that builds it.

The training step applies the optimizer's arithmetic itself (`PARAM_UPDATES`, below), so
what a run needs of an optimizer is its state: the parameter group's hyperparameters and
each parameter's buffers, saved in checkpoints. `OptimizerState` and `LrSchedule` keep
those in the layout of torch.optim's `state_dict` and of `LambdaLR`'s, without
torch.optim: constructing any torch.optim.Optimizer imports torch._dynamo (its methods are
wrapped in `torch._disable_dynamo`), 3.5 s of CPU in every training process (measured
with cProfile on `study train`), more than a small run's training takes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from itertools import chain

import torch

from study.config.types import OptimizerSettings, ScheduleSettings

LrFactor = Callable[[int], float]


class OptimizerState:
    """One parameter group (`param_groups[0]`: the parameters and their hyperparameters)
    and the per-parameter state (`state[p]`: momentum buffer, Adam's moments and step),
    with torch.optim.Optimizer's `state_dict` / `load_state_dict` layout."""

    def __init__(self, params: Iterable[torch.Tensor], defaults: Mapping):
        params = list(params)
        if not params:
            raise ValueError("the optimizer got an empty parameter list")
        self.defaults = dict(defaults)
        self.param_groups: list[dict] = [{"params": params, **self.defaults}]
        self.state: dict[torch.Tensor, dict] = {}

    def _params(self) -> list[torch.Tensor]:
        return list(chain.from_iterable(g["params"] for g in self.param_groups))

    def state_dict(self) -> dict:
        """{"state": {index: buffers}, "param_groups": [hyperparameters + parameter indices]}."""
        index = {id(p): i for i, p in enumerate(self._params())}
        groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [index[id(p)] for p in g["params"]]}
                  for g in self.param_groups]
        return {"state": {index[id(p)]: s for p, s in self.state.items() if s}, "param_groups": groups}

    def load_state_dict(self, saved: Mapping) -> None:
        groups = saved["param_groups"]
        if [len(g["params"]) for g in groups] != [len(g["params"]) for g in self.param_groups]:
            raise ValueError("the saved optimizer state has other parameter groups than this model's")
        by_index = dict(zip(chain.from_iterable(g["params"] for g in groups), self._params(), strict=True))

        def placed(p: torch.Tensor, key: str, value: object) -> object:
            if not isinstance(value, torch.Tensor):
                return value
            # as torch.optim does: buffers take the parameter's device and dtype, a step count its device
            return value.to(device=p.device) if key == "step" else value.to(device=p.device, dtype=p.dtype)

        self.state = {by_index[i]: {k: placed(by_index[i], k, v) for k, v in s.items()}
                      for i, s in saved["state"].items()}
        for group, saved_group in zip(self.param_groups, groups, strict=True):
            group.update({k: v for k, v in saved_group.items() if k != "params"})


def _sgd(params: Iterable, opt: OptimizerSettings) -> OptimizerState:
    return OptimizerState(params, {
        "lr": opt.lr, "momentum": opt.momentum, "dampening": 0, "weight_decay": opt.weight_decay,
        "nesterov": opt.nesterov, "maximize": False, "foreach": None, "differentiable": False,
        "fused": None})


def _adam(params: Iterable, opt: OptimizerSettings) -> OptimizerState:
    return OptimizerState(params, {
        "lr": opt.lr, "betas": tuple(opt.betas), "eps": 1e-8,
        "weight_decay": opt.weight_decay, "amsgrad": False, "maximize": False, "foreach": None,
        "capturable": False, "differentiable": False, "fused": None})


OPTIMIZERS: dict[str, Callable[[Iterable, OptimizerSettings], OptimizerState]] = {"sgd": _sgd, "adam": _adam}


def build_optimizer(params: Iterable[torch.Tensor], opt: OptimizerSettings) -> OptimizerState:
    """The optimizer a run config's `optimizer` names (its defaults: study.config.types)."""
    return OPTIMIZERS[opt.name](params, opt)


def _step(cfg: ScheduleSettings, epochs: int, iters_per_epoch: int) -> LrFactor:
    """Divide by 1/gamma at each milestone (fractions of the epochs, 0.5 and 0.75 in Rice et
    al. 2020), changing at epoch boundaries."""
    milestones = sorted(round(m * epochs) for m in cfg.milestones)
    gamma = cfg.gamma

    def step(it: int) -> float:
        epoch = it // iters_per_epoch
        return gamma ** sum(epoch >= m for m in milestones)

    return step


def _cyclic(cfg: ScheduleSettings, epochs: int, iters_per_epoch: int) -> LrFactor:
    """One linear up-and-down cycle over the whole run, peaking at `peak` of the iterations
    (0.4 as in Wong et al. 2020's cyclic schedule), ending at 0."""
    total = max(1, epochs * iters_per_epoch)
    peak = cfg.peak

    def cyclic(it: int) -> float:
        t = it / total
        return t / peak if t < peak else max(0.0, (1 - t) / (1 - peak))

    return cyclic


def _constant(cfg: ScheduleSettings, epochs: int, iters_per_epoch: int) -> LrFactor:
    return lambda it: 1.0


SCHEDULES: dict[str, Callable[[ScheduleSettings, int, int], LrFactor]] = {
    "step": _step, "cyclic": _cyclic, "constant": _constant,
}


def lr_factor(schedule: ScheduleSettings, epochs: int, iters_per_epoch: int) -> LrFactor:
    """Multiplier of the base lr at a given iteration (the schedule's defaults: study.config.types)."""
    return SCHEDULES[schedule.name](schedule, epochs, iters_per_epoch)


class LrSchedule:
    """The learning rate of iteration `last_epoch` (LambdaLR's name for its counter): the
    base lr times the schedule's factor; `step()` after each iteration, and LambdaLR's
    `state_dict` keys."""

    def __init__(self, optimizer: OptimizerState, factor: LrFactor):
        group = optimizer.param_groups[0]
        group.setdefault("initial_lr", group["lr"])
        self.optimizer, self.base_lrs, self.lr_lambdas = optimizer, [group["initial_lr"]], [factor]
        self.last_epoch = 0
        self._set_lr()

    def _set_lr(self) -> None:
        lr = self.base_lrs[0] * self.lr_lambdas[0](self.last_epoch)
        self.optimizer.param_groups[0]["lr"] = lr
        self._last_lr = [lr]

    def step(self) -> None:
        self.last_epoch += 1
        self._set_lr()

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def state_dict(self) -> dict:
        return {"base_lrs": list(self.base_lrs), "last_epoch": self.last_epoch, "_step_count": self.last_epoch + 1,
                "_last_lr": list(self._last_lr), "lr_lambdas": [None]}

    def load_state_dict(self, saved: Mapping) -> None:
        self.base_lrs, self.last_epoch = list(saved["base_lrs"]), int(saved["last_epoch"])
        self._set_lr()


def build_scheduler(optimizer: OptimizerState, schedule: ScheduleSettings, epochs: int,
                    iters_per_epoch: int) -> LrSchedule:
    return LrSchedule(optimizer, lr_factor(schedule, epochs, iters_per_epoch))


# --- The parameter update inside a training step ------------------------------------------
# torch.optim's step() breaks a compiled graph on purpose (torch/optim/optimizer.py,
# `_use_grad`), so the step applies the same arithmetic itself, on the optimizer state's
# tensors, and the learning rate comes in as a device tensor (a Python float would be a
# constant of the graph).

ParamUpdate = Callable[[OptimizerState, list, list, torch.Tensor], None]


def _sgd_state(optimizer: OptimizerState) -> None:
    # A zero buffer gives torch's first step exactly: 0 * momentum + d = d.
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state.setdefault(p, {})
            if group["momentum"] and state.get("momentum_buffer") is None:
                state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)


def _sgd_update(optimizer: OptimizerState, params: list, grads: list, lr: torch.Tensor) -> None:
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


def _adam_state(optimizer: OptimizerState) -> None:
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state.setdefault(p, {})
            if not state:
                state["step"] = torch.zeros((), dtype=torch.float32)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            # The step count lives beside the parameters, so bias correction needs no host value.
            state["step"] = state["step"].to(p.device)


def _adam_update(optimizer: OptimizerState, params: list, grads: list, lr: torch.Tensor) -> None:
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
PARAM_UPDATES: dict[str, tuple[Callable[[OptimizerState], None], ParamUpdate]] = {
    "sgd": (_sgd_state, _sgd_update), "adam": (_adam_state, _adam_update),
}


def lr_table(scheduler: LrSchedule, first: int, count: int,
             device: torch.device) -> torch.Tensor:
    """The learning rates of iterations first .. first + count - 1, as one device tensor
    (read once per epoch; the schedule is a function of the iteration only)."""
    base, factor = scheduler.base_lrs[0], scheduler.lr_lambdas[0]
    return torch.tensor([base * factor(first + i) for i in range(count)], dtype=torch.float32, device=device)
