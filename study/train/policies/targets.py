"""Target policies: which class (if any) the training attack pushes each sample towards."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from study.config.types import TargetsPolicy
from study.device import host_to_device
from study.train.policies.dafa import trix_targeted
from study.train.policies.registry import PolicyContext, Registry
from study.train.policies.stats import EpochStats, StatelessPolicy


def uniform_other(y: torch.Tensor, num_classes: int, generator: torch.Generator) -> torch.Tensor:
    """A target drawn uniformly from the classes other than y."""
    shift = torch.randint(1, num_classes, y.shape, generator=generator, device=y.device)
    return (y + shift) % num_classes


class Untargeted(StatelessPolicy):
    targeted = False

    def __init__(self, num_classes: int):
        self.num_classes = num_classes

    @classmethod
    def from_config(cls, cfg: TargetsPolicy, ctx: PolicyContext) -> Untargeted:
        return cls(ctx.num_classes)

    def sample(self, y: torch.Tensor, generator: torch.Generator) -> torch.Tensor | None:
        return None


class UniformTargets(Untargeted):
    """A uniformly random target other than the true class (targeted AT)."""

    targeted = True

    def sample(self, y: torch.Tensor, generator: torch.Generator) -> torch.Tensor | None:
        return uniform_other(y, self.num_classes, generator)


class CFPTargets(Untargeted):
    """FAIR-TAT (Medi et al. 2025): y_t ~ softmax(temperature * CFP) over the classes other
    than y, CFP from the previous epoch's training adversarial predictions; the first epoch
    (no CFP yet) draws uniform targets.

    Drawn on the device by the Gumbel-max trick, argmax over classes of (masked scores +
    Gumbel noise from the run's generator): no host read per batch (torch.multinomial reads
    its input's range back to check it), and the scores reach the device once per epoch."""

    targeted = True

    def __init__(self, num_classes: int, temperature: float = 2.0):
        super().__init__(num_classes)
        self.temperature = float(temperature)
        self.cfp: torch.Tensor | None = None
        self._scores: torch.Tensor | None = None  # temperature * CFP on the device of the batches

    @classmethod
    def from_config(cls, cfg: TargetsPolicy, ctx: PolicyContext) -> CFPTargets:
        return cls(ctx.num_classes, cfg.temperature)

    def masked_scores(self, y: torch.Tensor) -> torch.Tensor:
        """(B, C) log-probabilities up to a per-row constant: temperature * CFP, -inf at y."""
        if self._scores is None or self._scores.device != y.device:
            if self.cfp is None:
                raise ValueError("CFP targets are drawn from the last epoch's CFP; none was set (update first)")
            self._scores = host_to_device((self.temperature * self.cfp).to(torch.float32), y.device)
        scores = self._scores.expand(y.shape[0], -1)
        return scores.scatter(1, y.long().view(-1, 1), float("-inf"))

    def probabilities(self, y: torch.Tensor) -> torch.Tensor:
        """(B, C) target distribution of each sample: softmax over the other classes."""
        return torch.softmax(self.masked_scores(y), dim=1)

    def sample(self, y: torch.Tensor, generator: torch.Generator) -> torch.Tensor | None:
        if self.cfp is None:
            return uniform_other(y, self.num_classes, generator)
        scores = self.masked_scores(y)
        u = torch.rand(scores.shape, generator=generator, device=y.device, dtype=torch.float32)
        # Gumbel(0, 1) = -log(-log U), U kept off 0 (torch.rand is below 1).
        tiny = torch.finfo(torch.float32).tiny
        gumbel = -torch.log(-torch.log(u.clamp_min(tiny)))
        return torch.argmax(scores + gumbel, dim=1)

    def update(self, stats: EpochStats) -> None:
        self.cfp = stats.train_cfp.clone()
        self._scores = None

    def state_dict(self) -> dict:
        return {"cfp": self.cfp}

    def load_state_dict(self, state: Mapping) -> None:
        self.cfp = state["cfp"]
        self._scores = None


class FixedTarget(Untargeted):
    """Attacks aimed at one critical class: a class index, or `weakest` (the class with the
    lowest training robust accuracy in the previous epoch; uniform targets before that).
    Samples of the target class itself get a uniform target among the others."""

    targeted = True

    def __init__(self, num_classes: int, target_class: int | str = "weakest"):
        super().__init__(num_classes)
        # (a class index beyond the dataset's classes is refused where the config enters)
        self.mode = target_class
        self.target: int | None = None if target_class == "weakest" else int(target_class)

    @classmethod
    def from_config(cls, cfg: TargetsPolicy, ctx: PolicyContext) -> FixedTarget:
        return cls(ctx.num_classes, cfg.class_)

    def sample(self, y: torch.Tensor, generator: torch.Generator) -> torch.Tensor | None:
        other = uniform_other(y, self.num_classes, generator)
        if self.target is None:
            return other
        fixed = torch.full_like(y, self.target)
        return torch.where(y == self.target, other, fixed)

    def update(self, stats: EpochStats) -> None:
        if self.mode == "weakest":
            self.target = int(torch.argmin(stats.train_robust_acc))

    def state_dict(self) -> dict:
        return {"target": self.target}

    def load_state_dict(self, state: Mapping) -> None:
        self.target = state["target"]


class TRIXTargets(Untargeted):
    """TRIX (Medi et al. 2025; Fairness-a11y/TRIX losses.py:mixed_trades_loss): per batch, DAFA's
    formula on the batch's clean softmax (eval mode) splits the samples; those of classes whose
    weight is below the batch mean of the samples' weights (the `strong` classes) descend CE
    towards a target drawn uniformly from the other classes, the others ascend the untargeted
    TRADES KL. `sample` draws a target for every sample before the step; the step keeps it where
    `split` marks the sample targeted (study.train.step.TrainStep.adversarial)."""

    targeted = True
    #: the step attacks each sample targeted or untargeted by `split`
    mixed = True

    def __init__(self, num_classes: int, lam: float = 1.0):
        super().__init__(num_classes)
        self.lam = float(lam)

    @classmethod
    def from_config(cls, cfg: TargetsPolicy, ctx: PolicyContext) -> TRIXTargets:
        return cls(ctx.num_classes, cfg.lambda_)

    def sample(self, y: torch.Tensor, generator: torch.Generator) -> torch.Tensor | None:
        return uniform_other(y, self.num_classes, generator)

    def split(self, clean_logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """(B,) bool: the samples attacked towards their target."""
        return trix_targeted(clean_logits, y, self.num_classes, self.lam)


TARGETS = Registry("targets", default="untargeted", config=TargetsPolicy, types={
    "untargeted": Untargeted,
    "uniform": UniformTargets,
    "cfp": CFPTargets,
    "fixed": FixedTarget,
    "trix": TRIXTargets,
})
