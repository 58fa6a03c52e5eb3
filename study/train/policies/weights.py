"""Class-weight policies: per-class multipliers of the training loss.

`weights()` returns (w_nat, w_bndy): multipliers of the natural (CE) term and of the
boundary (TRADES KL) term; the static policies use one vector for both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from study.config.types import WeightsPolicy
from study.train.policies.dafa import class_similarity, dafa_class_weights
from study.train.policies.dro import class_margins, faal_class_weights
from study.train.policies.registry import PolicyContext, Registry
from study.train.policies.stats import EpochStats, StatelessPolicy, warmup_epochs

# How the loss reduces a class-weighted term over a batch: `mean` divides by the batch size
# (weights with class mean 1), FRL's `separate` / `joint` by the batch's weight sums.
WEIGHT_NORMALIZATIONS = ("mean", "separate", "joint")
FRL_NORMALIZATIONS = ("separate", "joint")


class NoWeights(StatelessPolicy):
    normalization = "mean"

    def __init__(self, num_classes: int):
        self.num_classes = num_classes

    @classmethod
    def from_config(cls, cfg: WeightsPolicy, ctx: PolicyContext) -> NoWeights:
        return cls(ctx.num_classes)

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        ones = torch.ones(self.num_classes, dtype=torch.float64)
        return ones, ones


class StaticWeights(NoWeights):
    """Cost-sensitive learning with fixed class costs, normalized to mean 1 (so the loss
    scale, and the effective learning rate, stay those of the unweighted method)."""

    def __init__(self, num_classes: int, values: Sequence[float] | torch.Tensor):
        super().__init__(num_classes)
        w = torch.as_tensor(values, dtype=torch.float64)
        if w.shape != (num_classes,) or not bool((w > 0).all()):
            raise ValueError(f"class weights must be {num_classes} positive numbers, got {list(values)}")
        self.w = w / w.mean()

    @classmethod
    def from_config(cls, cfg: WeightsPolicy, ctx: PolicyContext) -> StaticWeights:
        # (a static method's config has its costs, one per class: study.config.requirements)
        return cls(ctx.num_classes, cfg.values or ())

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.w, self.w


def balanced_weights(class_counts: torch.Tensor) -> torch.Tensor:
    """Inverse class frequency: every class contributes equally to the loss."""
    counts = torch.as_tensor(class_counts, dtype=torch.float64)
    if not bool((counts > 0).all()):
        raise ValueError(f"class-balanced weights need samples of every class, got counts {counts.tolist()}")
    return 1.0 / counts


class BalancedWeights(StaticWeights):
    """Inverse class frequency of the run's training split (all classes count equally)."""

    @classmethod
    def from_config(cls, cfg: WeightsPolicy, ctx: PolicyContext) -> BalancedWeights:
        if ctx.class_counts is None:
            raise ValueError("weights type 'balanced' needs the training split's class counts")
        return cls(ctx.num_classes, balanced_weights(ctx.class_counts))


class BoostWeights(NoWeights):
    """One critical class weighted `factor` times the others (normalized to mean 1): a class
    index, or `weakest` (lowest validation robust accuracy of the previous epoch, training
    robust accuracy without a validation split; unweighted before the first epoch ends)."""

    def __init__(self, num_classes: int, target_class: int | str = "weakest", factor: float = 2.0):
        super().__init__(num_classes)
        # (a class index beyond the dataset's classes is refused where the config enters)
        if factor <= 0:
            raise ValueError(f"weights.factor must be > 0, got {factor}")
        self.mode, self.factor = target_class, float(factor)
        self.target: int | None = None if target_class == "weakest" else int(target_class)

    @classmethod
    def from_config(cls, cfg: WeightsPolicy, ctx: PolicyContext) -> BoostWeights:
        return cls(ctx.num_classes, cfg.class_, cfg.factor)

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        w = torch.ones(self.num_classes, dtype=torch.float64)
        if self.target is not None:
            w[self.target] = self.factor
        w = w / w.mean()
        return w, w

    def update(self, stats: EpochStats) -> None:
        if self.mode == "weakest":
            acc = stats.val_robust_acc if stats.val_n is not None else stats.train_robust_acc
            self.target = int(torch.argmin(acc))

    def state_dict(self) -> dict:
        return {"target": self.target}

    def load_state_dict(self, state: Mapping) -> None:
        self.target = state["target"]


class FRLReweight(NoWeights):
    """FRL reweight (Xu et al. 2021; hannxu123/fair_robust utils_frl.py:frl_train). From the
    validation split, per-class gaps gamma0_c = clean_err_c - clean_err - tau and
    gamma1_c = bndy_err_c - bndy_err - tau (clean_err, bndy_err over the whole split);
    multipliers lambda_nat += rate * gamma0 and lambda_bndy += boundary_rate * gamma1
    (the reference steps the boundary multipliers at twice the rate, `rate1 * 2`; both
    rates halve every `halve_every` epochs), clamped >= 0 and rescaled so that each set
    sums to at most `bound`. FRL remargin alone (the reference's frlrm.py) keeps the
    natural-error reweighting and leaves the boundary multipliers at 0: boundary_rate 0.

    Class c's weight is 1/C + lambda_c - mean(lambda) (utils_frl.py:cost_sensitive); here
    scaled by C to 1 + C * (lambda_c - mean(lambda)), whose class mean is 1. The loss
    divides each weighted term by the batch's weight sum (`normalize: separate`,
    utils_frl.py / utils_frl2.py:train_model) or both by the sum of the two weights
    (`joint`, the remargin-alone script's utils_frl1.py:train_model); the factor C cancels.

    The reference updates at the start of each epoch from the model trained so far: the
    update after epoch e sets epoch e + 1's multipliers, with the rate of epoch e + 1. It reads the
    validation split (study.config.requirements.VALIDATION_READERS)."""

    primes = True   # takes a first step from the starting model (Policies.prime)

    def __init__(self, num_classes: int, rate: float = 0.05, halve_every: int = 40, tau: float = 0.05,
                 bound: float = 0.5, boundary_rate: float | None = None, normalize: str = "separate"):
        super().__init__(num_classes)
        if normalize not in FRL_NORMALIZATIONS:
            raise ValueError(f"unknown weights normalize {normalize!r}; valid: {', '.join(FRL_NORMALIZATIONS)}")
        self.rate, self.halve_every, self.tau, self.bound = float(rate), int(halve_every), float(tau), float(bound)
        self.boundary_rate = 2 * self.rate if boundary_rate is None else float(boundary_rate)
        self.normalization = normalize
        self.lam_nat = torch.zeros(num_classes, dtype=torch.float64)
        self.lam_bndy = torch.zeros(num_classes, dtype=torch.float64)

    @classmethod
    def from_config(cls, cfg: WeightsPolicy, ctx: PolicyContext) -> FRLReweight:
        return cls(ctx.num_classes, rate=cfg.rate, halve_every=cfg.halve_every, tau=cfg.tau, bound=cfg.bound,
                   boundary_rate=cfg.boundary_rate, normalize=cfg.normalize)

    def halving(self, epoch: int) -> float:
        """The factor on both rates for the multipliers of training epoch `epoch` (frlrw.py
        halves its rate before the update of every 40th epoch)."""
        return 0.5 ** (int(epoch) // self.halve_every)

    def _step(self, lam: torch.Tensor, gap: torch.Tensor, rate: float) -> torch.Tensor:
        lam = torch.clamp(lam + rate * gap, min=0.0)
        total = float(lam.sum())
        return lam * (self.bound / total) if total > self.bound else lam

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.num_classes
        return 1 + c * (self.lam_nat - self.lam_nat.mean()), 1 + c * (self.lam_bndy - self.lam_bndy.mean())

    def update(self, stats: EpochStats) -> None:
        factor = self.halving(stats.epoch + 1)
        gap_nat = stats.val_clean_err - stats.val_clean_err_total - self.tau
        gap_bndy = stats.val_boundary_err - stats.val_boundary_err_total - self.tau
        self.lam_nat = self._step(self.lam_nat, gap_nat, self.rate * factor)
        self.lam_bndy = self._step(self.lam_bndy, gap_bndy, self.boundary_rate * factor)

    def state_dict(self) -> dict:
        return {"lam_nat": self.lam_nat, "lam_bndy": self.lam_bndy}

    def load_state_dict(self, state: Mapping) -> None:
        self.lam_nat, self.lam_bndy = state["lam_nat"], state["lam_bndy"]


class DAFAWeights(NoWeights):
    """DAFA (Lee et al., ICLR 2024; rucy74/DAFA utils.py:calculate_class_weights, train.py):
    class weights computed once, from the epoch that ends the warm-up share of the run, out of
    the class-mean softmax of that epoch's adversarial training outputs (a soft confusion
    matrix, study.train.policies.dafa), and kept to the end; 1 before. Only the natural term is
    weighted (losses.py:trades_loss weights the clean CE, not the KL; madry_loss the adversarial
    CE). The epsilon policy `dafa` scales each class's attack radius and step by the same weights.

    The weights are in the policy's state_dict, so a resumed run keeps them (the reference
    recomputes them only at its warm-up epoch, so a run resumed after it trains without DAFA)."""

    needs_soft_confusion = True

    def __init__(self, num_classes: int, lam: float = 1.0, epochs: int = 1, warmup: float = 0.35,
                 warmup_epoch: int | None = None):
        super().__init__(num_classes)
        self.lam = float(lam)
        # (a warm-up epoch outside [1, epochs), whose weights would never be computed, is refused where
        # the config enters: study.config.requirements)
        # a count (DAFA's --dafa_warmup) keeps the reference's epoch at any length; a share scales with it
        self.warmup_epochs = warmup_epoch if warmup_epoch is not None else warmup_epochs(warmup, epochs)
        self.w: torch.Tensor | None = None

    @classmethod
    def from_config(cls, cfg: WeightsPolicy, ctx: PolicyContext) -> DAFAWeights:
        return cls(ctx.num_classes, cfg.lambda_, ctx.epochs, cfg.warmup, cfg.warmup_epoch)

    def class_weights(self) -> torch.Tensor:
        """The class weights (ones before the warm-up epoch has ended)."""
        return torch.ones(self.num_classes, dtype=torch.float64) if self.w is None else self.w

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.class_weights(), torch.ones(self.num_classes, dtype=torch.float64)

    def update(self, stats: EpochStats) -> None:
        if self.w is None and stats.epoch >= self.warmup_epochs:
            if stats.train_soft_confusion is None:
                raise ValueError("weights type 'dafa' needs the epoch's soft confusion matrix (EpochTotals soft=True)")
            self.w = dafa_class_weights(class_similarity(stats.train_soft_confusion, stats.train_n), self.lam)

    def state_dict(self) -> dict:
        return {"w": self.w}

    def load_state_dict(self, state: Mapping) -> None:
        self.w = state["w"]


class FAALWeights(NoWeights):
    """FAAL (Zhang et al., CVPR 2024; TrustAI/FAAL ft_prn.py, FAAL.py:DAW): class weights of every
    batch from a distributionally robust problem over the classes (study.train.policies.dro): p
    maximizes sum_c n_c p_c m_c, m_c the mean margin max_{j != y} p_j - p_y of the batch's
    class-c samples on the adversarial softmax of the training forward, in a KL ball of `radius`
    around the uniform distribution. Both terms of the loss are weighted by C p_y with the batch
    mean (ft_prn.py: (loss * weights[y]).sum() * C / B). The epoch's weights (the records'
    `weight`) stay 1: the step computes the batch's own (`batch_weights`)."""

    #: the step asks for the batch's weights after the training forward
    per_batch = True

    def __init__(self, num_classes: int, radius: float = 0.5):
        super().__init__(num_classes)
        self.radius = float(radius)

    @classmethod
    def from_config(cls, cfg: WeightsPolicy, ctx: PolicyContext) -> FAALWeights:
        return cls(ctx.num_classes, cfg.radius)

    def batch_weights(self, adv_logits: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(w_nat, w_bndy) of the batch: C p, p from its adversarial logits (fp32, no gradient)."""
        p = faal_class_weights(class_margins(adv_logits.detach(), y, self.num_classes), self.radius)
        w = (self.num_classes * p).float()
        return w, w


class WATWeights(NoWeights):
    """WAT (Li & Liu, AAAI 2023; boqili/WAT worst_class_adversarial_train.py --alg wat): Hedge
    (no-regret) weights over C + 1 entries from the validation split's costs, cost_c = CE(clean)
    + beta KL(clean || adversarial) of class c under the TRADES attack and, last, the same over
    the whole split (EpochStats.val_cost), summed over the epochs: w = C softmax(eta * sum of
    costs). Class c's samples train on (w_c + w_C) (CE + beta KL): its class term and the mean
    TRADES loss that the extra entry weights. Before the first update every entry is 1 (the
    reference's initial weights), so the first epoch trains on twice the TRADES loss.

    The summed costs are in the policy's state_dict (the reference's resume loses them). It reads the
    validation split (study.config.requirements.VALIDATION_READERS)."""

    #: the engine computes EpochStats.val_cost on the validation split (study.train.records.validate)
    needs_validation_losses = True

    def __init__(self, num_classes: int, eta: float = 0.1):
        super().__init__(num_classes)
        self.eta = float(eta)
        self.cost: torch.Tensor | None = None   # the costs summed over the epochs so far

    @classmethod
    def from_config(cls, cfg: WeightsPolicy, ctx: PolicyContext) -> WATWeights:
        return cls(ctx.num_classes, cfg.eta)

    def hedge(self) -> torch.Tensor:
        """The C + 1 Hedge weights (ones before the first update)."""
        if self.cost is None:
            return torch.ones(self.num_classes + 1, dtype=torch.float64)
        return self.num_classes * torch.softmax(self.eta * self.cost, dim=0)

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.hedge()
        per_class = w[: self.num_classes] + w[self.num_classes]
        return per_class, per_class.clone()

    def update(self, stats: EpochStats) -> None:
        if stats.val_cost is None:
            raise ValueError("weights type 'wat' needs the validation costs (EpochStats.val_cost); "
                             "set train.validation")
        cost = stats.val_cost.double()
        self.cost = cost.clone() if self.cost is None else self.cost + cost

    def state_dict(self) -> dict:
        return {"cost": self.cost}

    def load_state_dict(self, state: Mapping) -> None:
        self.cost = state["cost"]


WEIGHTS = Registry("weights", default="none", config=WeightsPolicy, types={
    "none": NoWeights,
    "balanced": BalancedWeights,
    "static": StaticWeights,
    "boost": BoostWeights,
    "frl": FRLReweight,
    "dafa": DAFAWeights,
    "faal": FAALWeights,
    "wat": WATWeights,
})
