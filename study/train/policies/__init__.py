"""The adaptive policies of the training engine (docs/architecture.md: methods are compositions).

A method is one choice per policy; `build_policies` reads a resolved method config
(`params.yaml` `methods:` entry) and returns them. Each policy kind has one table of its
types (`TARGETS`, `EPSILON`, `LOSS`, `WEIGHTS`, `AVERAGING`, `REGULARIZER`; `REGISTRIES`
holds them all). Every policy has the same small life:

    per-class values for the next epoch   (class_eps, targets, class_beta, weights)
    update(stats)                         after each epoch, from `EpochStats`
    state_dict() / load_state_dict()      saved in checkpoint.pt, restored on resume
"""

from study.train.policies.averaging import AVERAGING, EMA, FAWA, NoAveraging
from study.train.policies.build import POLICY_KEYS, REGISTRIES, Policies, build_policies
from study.train.policies.epsilon import EPSILON, CFAEpsilon, FixedEpsilon, RemarginEpsilon
from study.train.policies.loss import LOSS, CELoss, MixedLoss, TradesLoss
from study.train.policies.registry import PolicyContext, Registry
from study.train.policies.regularizer import REGULARIZER, CosinePenalty, NoRegularizer
from study.train.policies.stats import EpochStats
from study.train.policies.targets import TARGETS, CFPTargets, FixedTarget, UniformTargets, Untargeted
from study.train.policies.weights import WEIGHTS, BalancedWeights, BoostWeights, FRLReweight, NoWeights, StaticWeights

__all__ = [
    "AVERAGING", "EMA", "EPSILON", "FAWA", "LOSS", "POLICY_KEYS", "REGISTRIES", "REGULARIZER", "TARGETS", "WEIGHTS",
    "BalancedWeights", "BoostWeights", "CELoss", "CFAEpsilon", "CFPTargets", "CosinePenalty", "EpochStats",
    "FRLReweight", "FixedEpsilon", "FixedTarget", "MixedLoss", "NoAveraging", "NoRegularizer", "NoWeights",
    "Policies", "PolicyContext", "Registry", "RemarginEpsilon", "StaticWeights", "TradesLoss", "UniformTargets",
    "Untargeted", "build_policies",
]
