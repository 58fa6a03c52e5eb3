"""A method's policies, built from its resolved config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from study.train.policies.averaging import FAWA, NoAveraging, build_averaging
from study.train.policies.epsilon import FixedEpsilon, RemarginEpsilon, build_epsilon
from study.train.policies.loss import CELoss, build_loss
from study.train.policies.regularizer import NoRegularizer, build_regularizer
from study.train.policies.stats import EpochStats
from study.train.policies.targets import Untargeted, build_targets
from study.train.policies.weights import FRLReweight, NoWeights, build_weights

POLICY_KEYS = ("targets", "epsilon", "loss", "weights", "averaging", "regularizer")


@dataclass
class Policies:
    targets: Untargeted
    epsilon: FixedEpsilon
    loss: CELoss
    weights: NoWeights
    averaging: NoAveraging
    regularizer: NoRegularizer

    @property
    def needs_validation(self) -> bool:
        return (isinstance(self.weights, FRLReweight) or isinstance(self.epsilon, RemarginEpsilon)
                or isinstance(self.averaging, FAWA))

    def update(self, stats: EpochStats) -> None:
        """Adapt to the epoch that just ended (averaging is updated by the engine, it needs the model)."""
        for policy in (self.targets, self.epsilon, self.loss, self.weights):
            policy.update(stats)

    def state_dict(self) -> dict:
        return {key: getattr(self, key).state_dict() for key in POLICY_KEYS if key != "regularizer"}

    def load_state_dict(self, state: Mapping) -> None:
        for key, value in state.items():
            getattr(self, key).load_state_dict(value)


def build_policies(method: Mapping, num_classes: int, epochs: int, class_counts: torch.Tensor) -> Policies:
    adversary = method.get("adversary")
    eps = float(adversary["eps"]) if adversary else 0.0
    neutral = {"targets": "untargeted", "epsilon": "fixed", "loss": "ce"}
    adaptive = [k for k, plain in neutral.items() if (method.get(k) or {}).get("type", plain) != plain]
    if adversary is None and adaptive:
        raise ValueError(f"policies {adaptive} need an adversary; the method has adversary: null")
    return Policies(
        targets=build_targets(method.get("targets"), num_classes),
        epsilon=build_epsilon(method.get("epsilon"), eps, num_classes),
        loss=build_loss(method.get("loss"), num_classes),
        weights=build_weights(method.get("weights"), num_classes, class_counts),
        averaging=build_averaging(method.get("averaging"), epochs),
        regularizer=build_regularizer(method.get("regularizer"), num_classes),
    )
