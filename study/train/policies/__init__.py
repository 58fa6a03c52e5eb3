"""The adaptive policies of the training engine (DESIGN.md: training methods are compositions).

A method is one choice per policy; `build_policies` reads a resolved method config
(`params.yaml` `methods:` entry) and returns them. Every policy has the same small life:

    per-class values for the next epoch   (class_eps, targets, class_beta, weights)
    update(stats)                         after each epoch, from `EpochStats`
    state_dict() / load_state_dict()      saved in checkpoint.pt, restored on resume
"""

from study.train.policies.averaging import EMA, FAWA, NoAveraging, build_averaging
from study.train.policies.build import POLICY_KEYS, Policies, build_policies
from study.train.policies.epsilon import CFAEpsilon, FixedEpsilon, RemarginEpsilon, build_epsilon
from study.train.policies.loss import CELoss, MixedLoss, TradesLoss, build_loss
from study.train.policies.regularizer import CosinePenalty, NoRegularizer, build_regularizer
from study.train.policies.stats import EpochStats
from study.train.policies.targets import CFPTargets, FixedTarget, UniformTargets, Untargeted, build_targets
from study.train.policies.weights import BoostWeights, FRLReweight, NoWeights, StaticWeights, build_weights

__all__ = [
    "CELoss", "CFAEpsilon", "CFPTargets", "CosinePenalty", "EMA", "EpochStats", "FAWA", "FRLReweight",
    "FixedEpsilon", "FixedTarget", "MixedLoss", "NoAveraging", "NoRegularizer", "NoWeights", "POLICY_KEYS",
    "Policies", "RemarginEpsilon", "StaticWeights", "BoostWeights", "TradesLoss", "Untargeted",
    "UniformTargets", "build_averaging", "build_epsilon", "build_loss", "build_policies",
    "build_regularizer", "build_targets", "build_weights",
]
