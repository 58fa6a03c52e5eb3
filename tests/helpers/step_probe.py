"""The training step on tiny models, for tests of what it runs: a method's attack (start,
early stopping, class-wise step sizes) and the sequence of forwards it makes, eager or
compiled (the `aot_eager` backend, as tests/integration/test_step_compile.py).

`Probe` wraps a model and records every forward: the model's mode, the input and the first
parameter's value. `sequence` names them: `train`/`eval`, then `clean` (the clean batch),
`adv` (the inputs the loss trains on) or `attack` (an intermediate attack point), with
`step` where the parameters changed, so a test states a method's sequence in words.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import torch

from study.config.types import Method, OptimizerSettings, parse
from study.train.adversary import Adversary
from study.train.optim import build_optimizer
from study.train.policies.build import build_policies
from study.train.step import EpochTables, EpochTotals, TrainStep


class Probe(torch.nn.Module):
    """`inner` that records (training, input, first parameter) at every forward. The
    records are tensors appended to a list: a compiled step keeps them (dynamo replays the
    appends after the graph) without a host read."""

    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner = inner
        self.records: list[tuple[bool, torch.Tensor, torch.Tensor]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first = next(self.inner.parameters())
        self.records.append((self.training, x.detach().clone(), first.detach().clone()))
        return self.inner(x)


def bn_model(features: int = 12, classes: int = 3) -> Probe:
    """A tiny BatchNorm model (flatten, linear, BatchNorm, linear), recording its forwards."""
    torch.manual_seed(0)
    return Probe(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(features, 4), torch.nn.BatchNorm1d(4),
                                     torch.nn.Linear(4, classes)))


@functools.cache
def paper_params(repo_root):
    from study.config import load_params

    return load_params(repo_root / "params.yaml", {"preset": "paper"}, presets_dir=repo_root / "workflow/presets",
                       schema_path=repo_root / "workflow/schemas/params.schema.yaml")


def paper_method(repo_root, name: str, **adversary) -> dict:
    """A method of the paper preset, its adversary entries overridden by `adversary`."""
    from study.config import resolve_method

    method = resolve_method(paper_params(repo_root), name)
    if adversary:
        method = {**method, "adversary": {**method["adversary"], **adversary}}
    return method


def step_state(method: dict, model: torch.nn.Module, num_classes: int, seed: int = 0) -> SimpleNamespace:
    """What TrainStep reads of a run's state, for `model` and a method definition."""
    typed = parse(Method, method, "method")
    policies = build_policies(typed, num_classes, 10, torch.full((num_classes,), 10))
    adversary = Adversary(typed.adversary)
    optimizer = OptimizerSettings(name="sgd", lr=0.5, weight_decay=0.0)
    return SimpleNamespace(
        # the settings of the run config that TrainStep reads (RunState.run)
        run=SimpleNamespace(optimizer=optimizer, precision="fp32", method_config=typed), model=model,
        dev=torch.device("cpu"),
        optimizer=build_optimizer(model.parameters(), optimizer),
        policies=policies, adversary=adversary, dev_gen=torch.Generator().manual_seed(seed),
        inner_loss=policies.loss.inner if adversary.active else "ce")


def run_step(state, x: torch.Tensor, y: torch.Tensor, *, compiled: bool = False,
             class_eps: torch.Tensor | None = None, target: torch.Tensor | None = None) -> EpochTotals:
    """One whole training step on (x, y), its random numbers from `TrainStep.draws` (the
    targets replaced by `target` where given), eager or compiled with `aot_eager`."""
    if compiled:
        torch._dynamo.reset()
    step = TrainStep(state, "default" if compiled else "off", backend="aot_eager" if compiled else None)
    drawn_target, start, noise = step.draws(x, y)
    c = state.policies.loss.class_beta().shape[0]
    w_nat, w_bndy = (w.float() for w in state.policies.weights.weights())
    tables = EpochTables(None if class_eps is None else class_eps.float(), w_nat, w_bndy,
                         state.policies.loss.class_beta().float())
    totals = EpochTotals.zeros(c, x.device)
    state.model.train()
    step.fn(x, y, drawn_target if target is None else target, start, noise, tables, torch.tensor(0.5), totals)
    return totals


def loss_input(probe: Probe, x: torch.Tensor) -> torch.Tensor:
    """The adversarial input the loss trained on: the first train-mode forward, with the
    weights before the update, of an input that is neither the clean batch nor an attack
    step's point (an attack in train mode forwards its points first: the loss's input is
    the last distinct one before the update)."""
    first_w = probe.records[0][2]
    before = [(t, xi) for t, xi, w in probe.records if torch.equal(w, first_w)]
    adv = [xi for t, xi in before if t and not torch.equal(xi, x)]
    return adv[-1]


def sequence(probe: Probe, x: torch.Tensor) -> list[str]:
    """The recorded forwards in words: `<mode> <batch>`, and `step` where the weights changed."""
    before = [xi for t, xi, w in probe.records if torch.equal(w, probe.records[0][2])]
    trained = loss_input(probe, x) if any(not torch.equal(xi, x) for xi in before) else None
    out, weights = [], probe.records[0][2]
    for training, xi, w in probe.records:
        if not torch.equal(w, weights):
            out.append("step")
            weights = w
        if torch.equal(xi, x):
            batch = "clean"
        elif trained is not None and torch.equal(xi, trained):
            batch = "adv"
        else:
            batch = "attack"
        out.append(f"{'train' if training else 'eval'} {batch}")
    return out
