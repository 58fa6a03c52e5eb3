"""A method's policies, built from its resolved config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch

from study.config.types import Method
from study.train.policies.averaging import AVERAGING, NoAveraging
from study.train.policies.epsilon import EPSILON, FixedEpsilon
from study.train.policies.loss import LOSS, CELoss
from study.train.policies.registry import PolicyContext, Registry
from study.train.policies.regularizer import REGULARIZER, NoRegularizer
from study.train.policies.stats import EpochStats
from study.train.policies.targets import TARGETS, Untargeted
from study.train.policies.weights import WEIGHTS, NoWeights

#: Every policy kind of a method, in params.yaml's order, with its table of types.
REGISTRIES: dict[str, Registry] = {
    registry.kind: registry for registry in (TARGETS, EPSILON, LOSS, WEIGHTS, AVERAGING, REGULARIZER)
}
POLICY_KEYS = tuple(REGISTRIES)


@dataclass
class Policies:
    targets: Untargeted
    epsilon: FixedEpsilon
    loss: CELoss
    weights: NoWeights
    averaging: NoAveraging
    regularizer: NoRegularizer

    @property
    def needs_soft_confusion(self) -> bool:
        """Whether a policy reads the epoch's soft confusion matrix (DAFA): the step sums the
        softmax of the training outputs per true class only then."""
        return any(getattr(getattr(self, key), "needs_soft_confusion", False) for key in POLICY_KEYS)

    @property
    def needs_priming(self) -> bool:
        return any(getattr(getattr(self, key), "primes", False) for key in POLICY_KEYS)

    def update(self, stats: EpochStats) -> None:
        """Adapt to the epoch that just ended (averaging is updated by the engine, it needs the model)."""
        for policy in (self.targets, self.epsilon, self.loss, self.weights):
            policy.update(stats)

    def prime(self, stats: EpochStats) -> None:
        """Before epoch 1 of a fresh run: the policies that fair_robust updates at the start of
        every epoch (FRL reweight, remargin) take their first step from the starting model's
        validation statistics (`stats.epoch` 0, no training counts); the others wait for an
        epoch of training."""
        if stats.epoch != 0:
            raise ValueError(f"prime takes the starting model's statistics (epoch 0), got epoch {stats.epoch}")
        for key in POLICY_KEYS:
            policy = getattr(self, key)
            if getattr(policy, "primes", False):
                policy.update(stats)

    def state_dict(self) -> dict:
        return {key: getattr(self, key).state_dict() for key in POLICY_KEYS if key != "regularizer"}

    def load_state_dict(self, state: Mapping) -> None:
        for key, value in state.items():
            getattr(self, key).load_state_dict(value)


def build_policies(method: Method, num_classes: int, epochs: int, class_counts: torch.Tensor) -> Policies:
    """The policies of a resolved method (a run config's `method_config`, typed). What training needs
    of them (an adversary for an adaptive attack, DAFA's margins with DAFA's weights, class indices
    and costs of the dataset's classes, ...) was checked where the config entered
    (study.config.requirements)."""
    adversary = method.adversary
    eps = adversary.eps if adversary is not None else 0.0
    ctx = PolicyContext(num_classes=num_classes, epochs=epochs, eps=eps,
                        class_counts=torch.as_tensor(class_counts))
    weights = WEIGHTS.build(method.weights, ctx)
    # The loss reduces the class-weighted terms the way the weight policy's reference does.
    ctx = replace(ctx, weight_normalization=weights.normalization)
    built = {key: weights if key == "weights" else registry.build(getattr(method, key), ctx)
             for key, registry in REGISTRIES.items()}
    # A policy that reads another's state (DAFA's margins read DAFA's class weights) binds to it.
    for policy in built.values():
        if hasattr(policy, "bind"):
            policy.bind(built)
    return Policies(**built)
