"""One training step, the same function for every method: adversary -> loss policy
(+ regularizer) -> parameter update -> the epoch's per-class sums, on device tensors only.

The step reads nothing back to the host, so a GPU never waits for Python between steps,
and it is a pure function of its tensor arguments, so `torch.compile(fullgraph=True)` can
take it whole (a graph break would be a host read or a Python side effect, and is an
error, not a fallback). What the step cannot hold is drawn before it, in a fixed order,
from the run's device generator (`draws`): the attack targets, the random start and FAT's
step noise. The learning rate of each iteration comes from a per-epoch device table.

The last batch of an epoch keeps its true size: padding it with masked samples would
change BatchNorm's batch statistics, and the reference codes train on it, so a compiled
step holds two shapes (full and last batch) and compiles each once per run.

    speed.compile   off      eager
                    default  torch.compile(fullgraph=True) of the whole step; a capture or
                             compile error is raised (the check that the step stays one graph)
                    auto     what `study bench --compile` measured fastest on the device
                             kind: `default` on CUDA, `off` on a CPU (compiling a model costs
                             minutes on 2 cores, more than a CPU-scale run takes), and where the
                             device's torch cannot compile the whole step, a smaller region
                             (`CompiledRegions`: the step, then the model alone, then eager)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from study.attacks.fat import early_stopped_run
from study.attacks.pgd import pgd_run, project, start_draws, start_from_draws
from study.config.requirements import bn_forwards as split_bn_stats
from study.config.requirements import fat_tau, needs_clean
from study.config.types import Adversary as AdversaryConfig
from study.device import train_autocast
from study.train.optim import PARAM_UPDATES
from study.train.policies.loss import trades_kl
from study.train.policies.stats import EpochStats
from study.train.policies.targets import TRIXTargets
from study.train.policies.weights import FAALWeights

if TYPE_CHECKING:  # (setup builds the step: a run-time import would be circular)
    from study.train.setup import RunState

COMPILE_MODES = ("off", "default", "auto")
COMPILE_BACKEND_ENV = "STUDY_COMPILE_BACKEND"
#: What `auto` means per device kind (docs/performance.md has the measurement behind it).
#: Supported torch: 2.13.0 (CPU), where tests/integration/test_step_compile.py passes, the whole step
#: included under inductor; the GPU machines' torch 2.11 is unmeasured, so `auto` on CUDA
#: stays `default` (falling back region by region, `CompiledRegions`) until a GPU run
#: measures it.
AUTO_COMPILE = {"cuda": "default", "cpu": "off"}
#: The regions `auto` compiles, largest first; the first call of each batch shape that
#: fails in one (a capture or compile error) runs again in the next.
REGIONS = ("step", "model", "eager")


def resolve_compile(mode: str, device: torch.device) -> str:
    if mode not in COMPILE_MODES:
        removed = " (CUDA-graph capture was removed until a GPU measurement shows it pays)" if mode == "max" else ""
        raise ValueError(f"unknown speed.compile {mode!r}{removed}; valid: {', '.join(COMPILE_MODES)}")
    if mode == "auto":
        return AUTO_COMPILE.get(device.type, "off")
    return mode


@dataclass
class EpochTotals:
    """Per-class sums over one epoch's training inputs (float64, on the device)."""

    loss: torch.Tensor
    correct: torch.Tensor
    count: torch.Tensor
    confusion: torch.Tensor  # flattened (true * C + predicted)
    # flattened (true * C + class): summed softmax of the training outputs (DAFA), or None
    soft: torch.Tensor | None = None

    @classmethod
    def zeros(cls, num_classes: int, dev: torch.device, soft: bool = False) -> EpochTotals:
        def z(n: int) -> torch.Tensor:
            return torch.zeros(n, device=dev, dtype=torch.float64)

        return cls(z(num_classes), z(num_classes), z(num_classes), z(num_classes * num_classes),
                   z(num_classes * num_classes) if soft else None)

    @property
    def tensors(self) -> list[torch.Tensor]:
        """Every sum the step adds to (a snapshot restores them all)."""
        return [t for t in (self.loss, self.correct, self.count, self.confusion, self.soft) if t is not None]

    def add(self, per_sample_loss: torch.Tensor, logits: torch.Tensor, y: torch.Tensor) -> None:
        num_classes = self.count.shape[0]
        with torch.no_grad():
            y64 = y.long()
            ones = torch.ones_like(per_sample_loss, dtype=torch.float64)
            pred = logits.argmax(1)
            self.loss.index_add_(0, y64, per_sample_loss.detach().double())
            self.correct.index_add_(0, y64, (pred == y).double())
            self.count.index_add_(0, y64, ones)
            self.confusion.index_add_(0, y64 * num_classes + pred.long(), ones)
            if self.soft is not None:
                probs = torch.softmax(logits.detach().float(), dim=1).double()
                self.soft.view(num_classes, num_classes).index_add_(0, y64, probs)

    def stats(self, epoch: int) -> EpochStats:
        """The epoch's statistics for the policies (one host read)."""
        c = self.count.shape[0]
        soft = None if self.soft is None else self.soft.cpu().view(c, c)
        return EpochStats(epoch, self.count.cpu(), self.correct.cpu(), self.confusion.cpu().view(c, c),
                          train_soft_confusion=soft)


@dataclass(frozen=True)
class EpochTables:
    """The per-class values of one epoch, on the device (policies adapt between epochs)."""

    class_eps: torch.Tensor | None  # None: every sample has the adversary's eps
    w_nat: torch.Tensor
    w_bndy: torch.Tensor
    class_beta: torch.Tensor


#: a training step's call: (x, y, target, start, noise, tables, lr, totals), as `TrainStep.step`
StepFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None, tuple, torch.Tensor | None, EpochTables,
                   torch.Tensor, EpochTotals], None]


class TrainStep:
    """The run's step: `draws(x, y)` before, then `__call__` (eager or compiled)."""

    def __init__(self, state: RunState, mode: str = "off", backend: str | None = None):
        adv = state.adversary.cfg
        # (one restart, TRIX with PGD, bn_stats as the loss needs them: checked where the run config
        # entered, study.config.requirements)
        opt_name = state.run.optimizer.name
        if len(state.optimizer.param_groups) != 1 or opt_name not in PARAM_UPDATES:
            raise ValueError(f"the training step updates one parameter group of {', '.join(PARAM_UPDATES)}; "
                             f"got optimizer {opt_name!r}")
        self.state, self.adv = state, adv
        self.requested, self.mode = mode, resolve_compile(mode, state.dev)
        # the module the step calls: the run's model, or (region `model`) its compiled wrapper
        self.model: torch.nn.Module = state.model
        prepare, self.update_params = PARAM_UPDATES[opt_name]
        prepare(state.optimizer)
        self.params = list(state.optimizer.param_groups[0]["params"])
        self.needs_clean = needs_clean(state.run.method_config)
        self.before, self.after = bn_forwards(adv, self.needs_clean)
        backend = backend or os.environ.get(COMPILE_BACKEND_ENV)
        self.regions: CompiledRegions | None
        self.fn: StepFn
        if self.mode == "off":
            self.regions, self.fn = None, self.step
        elif mode == "auto":
            self.regions = CompiledRegions(self, backend)
            self.fn = self.regions
        else:  # `default`: the whole step or an error
            self.regions, self.fn = None, compile_region(self.step, "step", backend)

    @property
    def ran(self) -> str:
        """The region that runs: `step`, `model` or `eager`."""
        if self.regions is not None:
            return self.regions.region
        return "eager" if self.mode == "off" else "step"

    def record(self) -> dict:
        """meta.json's `compile`: the mode asked for, what it resolved to, the region that
        ran and why it is not the whole step where `auto` fell back."""
        reason = self.regions.reasons if self.regions is not None else []
        return {"requested": self.requested, "resolved": self.mode, "ran": self.ran,
                "reason": "; ".join(reason) or None}

    # -- outside the step: random numbers from the run's generator, in a fixed order -------
    def draws(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor | None, tuple, torch.Tensor | None]:
        """(targets, random-start numbers, FAT's step noise) for batch (x, y)."""
        gen, adv = self.state.dev_gen, self.adv
        if adv is None:
            return None, (), None
        target = self.state.policies.targets.sample(y, gen)
        start = start_draws(x, adv.norm, gen, adv.start_std) if adv.random_start else ()
        noise = None
        if adv.type == "fat" and adv.step_noise > 0:
            noise = adv.step_noise * torch.randn((adv.steps, *x.shape), generator=gen,
                                                 device=x.device, dtype=torch.float32)
        return target, start, noise

    # -- the step itself --------------------------------------------------------------------
    def step(self, x: torch.Tensor, y: torch.Tensor, target: torch.Tensor | None, start: tuple,
             noise: torch.Tensor | None, tables: EpochTables, lr: torch.Tensor, totals: EpochTotals) -> None:
        model, policies = self.model, self.state.policies
        precision = self.state.run.precision
        with train_autocast(self.state.dev, precision):
            x_in = self.adversarial(x, y, target, start, noise, tables.class_eps)
            batches = {"adv": x_in, "clean": x}
            # The train-mode forwards before the update, in the reference's order (`bn_forwards`):
            # the first of each batch the loss needs gives its logits, any other only moves
            # BatchNorm's running statistics.
            logits = clean_logits = None
            for name in self.before:
                if name == "adv" and logits is None:
                    logits = model(x_in)
                elif name == "clean" and self.needs_clean and clean_logits is None:
                    clean_logits = model(x).float()
                else:
                    with torch.no_grad():
                        model(batches[name])
        if logits is None:  # bn_forwards puts `adv` in every step's forwards
            raise RuntimeError(f"the step's forwards {self.before} gave no logits of the training inputs")
        w_nat, w_bndy = tables.w_nat, tables.w_bndy
        if isinstance(policies.weights, FAALWeights):
            # weights of this batch from its training outputs, constants of the update
            w_nat, w_bndy = policies.weights.batch_weights(logits.detach().float(), y)
        per_sample = policies.loss.per_sample(clean_logits, logits.float(), y, w_nat, w_bndy, tables.class_beta)
        loss = per_sample.mean() + policies.regularizer.penalty(logits.float(), y)
        grads = torch.autograd.grad(loss, self.params)
        with torch.no_grad():
            self.update_params(self.state.optimizer, self.params, list(grads), lr)
            # Forwards with the updated weights (the references' train-accuracy logs).
            with train_autocast(self.state.dev, precision):
                for name in self.after:
                    model(batches[name])
        totals.add(per_sample, logits, y)

    def adversarial(self, x: torch.Tensor, y: torch.Tensor, target: torch.Tensor | None, start: tuple,
                    noise: torch.Tensor | None, class_eps: torch.Tensor | None) -> torch.Tensor:
        """The inputs the batch trains on (the clean batch without an adversary)."""
        adv = self.adv
        if adv is None:
            return x
        model, norm = self.model, adv.norm
        shape = (-1, *([1] * (x.dim() - 1)))
        base = adv.eps
        eps = torch.full((x.shape[0],), base, device=x.device) if class_eps is None else class_eps[y]
        eps_t = eps.view(shape)
        alpha_t = self.state.adversary.step_sizes(eps).view(shape)
        x32 = x.float()
        if start:
            delta = project(start_from_draws(start, x32, eps_t, norm, adv.start_std), x32, eps_t, norm)
        else:
            delta = torch.zeros_like(x32)
        sign: torch.Tensor | float
        targets = self.state.policies.targets
        if isinstance(targets, TRIXTargets):
            if target is None:
                raise ValueError("TRIX's mixed attack needs the targets policy's targets; it drew none")
            labels, sign, loss_fn = self._mixed_attack(model, adv, targets, x, y, target, shape)
        else:
            labels, sign = (y, 1.0) if target is None else (target, -1.0)
            loss_fn = self._inner_loss(model, adv, x, target)
        if adv.bn_mode == "eval":
            model.eval()
        if adv.type == "fat":
            delta = early_stopped_run(model, x32, y, labels, delta, eps_t, alpha_t, steps=adv.steps,
                                      tau=fat_tau(adv), norm=norm, sign=sign, loss_fn=loss_fn,
                                      step_noise=(lambda i: None) if noise is None else (lambda i: noise[i]))
        else:
            delta = pgd_run(model, x, labels, delta, eps_t, alpha_t, adv.steps, norm, sign, loss_fn)
        model.train()
        return (x32 + delta).clamp(0.0, 1.0).to(x.dtype)

    def _mixed_attack(self, model: torch.nn.Module, adv: AdversaryConfig, targets: TRIXTargets, x: torch.Tensor,
                      y: torch.Tensor, target: torch.Tensor,
                      shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor, Callable]:
        """(labels, per-sample sign, per-sample loss) of TRIX's mixed attack: the targets policy
        splits the batch on its clean logits (BatchNorm in the adversary's mode); a targeted
        sample descends CE towards its target, the others ascend the method's inner loss (TRADES'
        KL to the clean prediction, or CE)."""
        if adv.bn_mode == "eval":
            model.eval()
        with torch.no_grad():
            clean_logits = model(x).float()
        model.train()
        targeted = targets.split(clean_logits, y)
        labels = torch.where(targeted, target, y)
        sign = torch.where(targeted, -1.0, 1.0).view(shape)
        kl = self.state.inner_loss == "kl"

        def mixed(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            ce = F.cross_entropy(logits, labels, reduction="none")
            return torch.where(targeted, ce, trades_kl(logits, clean_logits) if kl else ce)

        return labels, sign, mixed

    def _inner_loss(self, model: torch.nn.Module, adv: AdversaryConfig, x: torch.Tensor,
                    target: torch.Tensor | None) -> Callable:
        """The per-sample loss the attack ascends: CE, or TRADES' KL to the clean prediction
        (targeted attacks always descend CE towards the target)."""
        if self.state.inner_loss != "kl" or target is not None:
            return _cross_entropy
        if adv.bn_mode == "eval":
            model.eval()
        with torch.no_grad():
            clean_logits = model(x).float()
        model.train()

        def kl(logits: torch.Tensor, _labels: torch.Tensor) -> torch.Tensor:
            return trades_kl(logits, clean_logits)

        return kl


def bn_forwards(adv: AdversaryConfig | None, needs_clean: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(forwards before the update, forwards after it) of one step, after the attack, from
    the adversary's `bn_stats`: the sequence of train-mode forwards of the method's reference
    loop, `adv` (the training inputs), `clean` (the clean batch) and `step` (the update), e.g.
    [adv, step, clean] for CFA's AT loop (study.config.requirements.bn_forwards, where the plan
    checks the sequence)."""
    return split_bn_stats(adv.bn_stats if adv is not None else None, needs_clean)


def _cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, labels, reduction="none")


class CompiledRegions:
    """`auto`'s step: the largest region (`REGIONS`) that the device's torch compiles.

    The first call of each batch shape compiles (a full and a last batch); if it raises,
    the model, the optimizer state and the epoch's sums are restored to what they were
    before it (a compiled model may have run forwards, and so moved BatchNorm's running
    statistics, before a later graph failed), and the same batch runs in the next region:
    the whole step compiled, then the model alone (`torch.compile(model)` inside the eager
    step), then eager. One warning line on stderr says what failed and why; `reasons`
    keeps it for meta.json. Calls of a shape that has run once go straight through."""

    def __init__(self, step: TrainStep, backend: str | Callable | None):
        self.step, self.backend = step, backend
        self.region = REGIONS[0]
        self.reasons: list[str] = []
        self._seen: set[tuple[int, ...]] = set()
        self._fn = compile_region(step.step, "step", backend)

    def __call__(self, x: torch.Tensor, y: torch.Tensor, target: torch.Tensor | None, start: tuple,
                 noise: torch.Tensor | None, tables: EpochTables, lr: torch.Tensor, totals: EpochTotals) -> None:
        """`TrainStep.step`'s call, in the region that compiles."""
        shape = tuple(x.shape)
        args = (x, y, target, start, noise, tables, lr, totals)
        if shape in self._seen:
            return self._fn(*args)
        failed = []
        while True:
            saved = _snapshot(self.step.state, totals)
            try:
                out = self._fn(*args)
                break
            except Exception as exc:  # any capture, compile or compiled-code error; eager's is the step's own
                if self.region == REGIONS[-1]:
                    raise
                _restore(self.step.state, totals, saved)
                failed.append(f"{self.region}: {_short(exc)}")
                self._next_region()
        self._seen.add(shape)
        if failed:
            self.reasons += failed
            print(f"warning: run {self.step.state.run_dir.name}: speed.compile {self.step.requested}: compiling "
                  f"failed on a first batch of shape {list(shape)} ({'; '.join(failed)}); running `{self.region}`",
                  file=sys.stderr, flush=True)
        return out

    def _next_region(self) -> None:
        self.region = REGIONS[REGIONS.index(self.region) + 1]
        self._seen.clear()
        step = self.step
        step.model = step.state.model
        if self.region == "model":
            compiled = compile_region(step.state.model, "model", self.backend)
            # torch.compile of a module is an OptimizedModule (its stubs say only "a callable")
            if not isinstance(compiled, torch.nn.Module):
                raise TypeError(f"torch.compile of the model gave a {type(compiled).__name__}, not a module")
            step.model = compiled
        self._fn = step.step


def _snapshot(state: RunState, totals: EpochTotals) -> dict:
    """Copies of everything a step changes: the model's parameters and buffers (and train
    mode), the optimizer state and the epoch's sums."""
    with torch.no_grad():
        return {
            "model": {k: v.clone() for k, v in state.model.state_dict().items()},
            "training": state.model.training,
            "optimizer": {p: {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in s.items()}
                          for p, s in state.optimizer.state.items()},
            "totals": [t.clone() for t in totals.tensors],
        }


def _restore(state: RunState, totals: EpochTotals, saved: dict) -> None:
    """Back to `_snapshot`'s copies, in place (the same tensors, so no compiled guard changes)."""
    with torch.no_grad():
        for k, v in state.model.state_dict().items():
            v.copy_(saved["model"][k])
        state.model.train(saved["training"])
        for p in list(state.optimizer.state):
            if p not in saved["optimizer"]:
                del state.optimizer.state[p]
        for p, s in saved["optimizer"].items():
            now = state.optimizer.state.setdefault(p, {})
            for k in [k for k in now if k not in s]:
                del now[k]
            for k, v in s.items():
                if isinstance(v, torch.Tensor) and isinstance(now.get(k), torch.Tensor):
                    now[k].copy_(v)
                else:
                    now[k] = v
        for t, v in zip(totals.tensors, saved["totals"], strict=True):
            t.copy_(v)


def _short(exc: BaseException) -> str:
    """`Type: first line` of an exception, with the inner error of a backend's failure."""
    inner = getattr(exc, "inner_exception", None) or exc.__cause__
    lines = [line.strip() for line in str(inner or exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}" + (f" ({type(inner).__name__})" if inner is not None else "")
    return f"{text}: {lines[0][:160] if lines else ''}".rstrip(": ")


def compile_region(fn: Callable, region: str, backend: str | Callable | None) -> Callable:
    """`region` `step`: the whole step, one graph (fullgraph=True: a graph break is an error);
    `model`: the model alone, graph breaks allowed (as the fastest CIFAR-10 trainers compile)."""
    import torch._dynamo

    # The attack's input gradient is torch.autograd.grad inside the step; dynamo traces it
    # only when asked to.
    torch._dynamo.config.trace_autograd_ops = True
    # `aot_eager` captures and traces the step without generating code (the tests; a quick
    # check that a change keeps the step one graph): $STUDY_COMPILE_BACKEND or the argument.
    if backend:
        return torch.compile(fn, fullgraph=region == "step", dynamic=False, backend=backend)
    return torch.compile(fn, fullgraph=region == "step", dynamic=False)
