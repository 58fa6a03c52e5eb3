"""The adversary policy of the training engine: which inputs a batch is trained on.

`none` trains on the (augmented) clean batch; `pgd` on PGD examples (Madry et al.);
`fat` on FAT's early-stopped PGD examples (Zhang et al. 2020, `tau` extra steps).
The start is uniform in the eps-ball (`random_start`), or x + `start_std` * N(0, 1) as in
TRADES' reference code (trades.py:trades_loss, 0.001).
The other policies set, per batch, each sample's eps (class-wise for CFA / FRL remargin),
its target (targeted attacks of FAIR-TAT), and the loss the attack ascends (`kl` for
TRADES: KL(p_clean || p_adv); targeted attacks always descend CE towards the target).
BatchNorm's mode while the attack runs is part of the method's definition (`bn_mode`), and so
are the train-mode forwards of a step after the attack (`bn_stats`: which batches, in which
order around the update, as the method's reference loop runs them; study/train/step.py:bn_forwards).
This module holds the configuration; the attack itself runs inside the training step
(study/train/step.py: TrainStep.draws, TrainStep.adversarial).
"""

from __future__ import annotations

import torch

from study.config.types import Adversary as AdversaryConfig


def _alpha_fixed(alpha: float, eps: torch.Tensor, base: float) -> torch.Tensor:
    return torch.full_like(eps, alpha)


def _alpha_per_sample(alpha: float, eps: torch.Tensor, base: float) -> torch.Tensor:
    return alpha * eps / base


def _alpha_batch_max(alpha: float, eps: torch.Tensor, base: float) -> torch.Tensor:
    # A device-side max: no host sync, the batch keeps one step size.
    return (alpha * eps.max() / base).expand_as(eps)


#: How the step size follows a per-sample eps: `fixed` (CFA attack.py:cw_attack_pgd and
#: FAIR-TAT Targeted_attack.py:cw_attack_pgd keep 2/255; FRL remargin alone, utils_frl1.py),
#: `batch_max` (FRL reweight+remargin, utils_frl2.py:trades_adv: step = max(eps_i) / 4, i.e.
#: alpha * max(eps_i) / eps), `sample` (alpha * eps_i / eps for each sample).
ALPHA_SCALINGS = {"fixed": _alpha_fixed, "sample": _alpha_per_sample, "batch_max": _alpha_batch_max}


class Adversary:
    """A method's training attack (None: train on the clean batch), typed: its defaults are
    study.config.types.Adversary's."""

    def __init__(self, cfg: AdversaryConfig | None):
        # (step noise without FAT's attack is refused where the config enters: study.config.requirements)
        self.cfg: AdversaryConfig | None = cfg

    @property
    def active(self) -> bool:
        return self.cfg is not None

    @property
    def epsilon(self) -> float:
        return self.cfg.eps if self.cfg is not None else 0.0

    def step_sizes(self, eps: torch.Tensor) -> torch.Tensor:
        """Each sample's step size for per-sample radii `eps` (B,), by `alpha_scaling`."""
        if self.cfg is None:
            raise ValueError("step sizes belong to a training attack; this method trains on the clean batch")
        alpha, base = self.cfg.alpha, self.cfg.eps
        if base <= 0:
            return torch.full_like(eps, alpha)
        return ALPHA_SCALINGS[self.cfg.alpha_scaling](alpha, eps, base)
