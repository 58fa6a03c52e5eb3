"""FAT's early-stopped PGD, the training adversary's per-sample options, its start and BatchNorm
mode per method, the validation split."""

import functools

import pytest
import torch

from study.attacks.fat import early_stopped_pgd
from study.attacks.pgd import pgd_attack
from study.train.adversary import Adversary
from study.train.validation import validation_split


class Threshold(torch.nn.Module):
    """Two classes on the mean pixel: logit_1 - logit_0 = 20 * (mean - 0.5)."""

    def forward(self, x):
        m = x.flatten(1).mean(1, keepdim=True)
        return torch.cat([torch.zeros_like(m), 20 * (m - 0.5)], dim=1)


def test_early_stopped_pgd_stops_at_the_first_misclassification_with_tau_zero():
    model = Threshold()
    x = torch.tensor([0.3, 0.49, 0.6]).view(3, 1, 1, 1).expand(3, 1, 2, 2).contiguous()
    y = torch.tensor([0, 0, 0])  # the third sample is already misclassified
    gen = torch.Generator().manual_seed(0)
    adv = early_stopped_pgd(model, x, y, eps=0.1, alpha=0.02, steps=10, tau=0, generator=gen, random_start=False)
    assert torch.equal(adv[2], x[2]), "misclassified at the start: no step"
    # 0.49 crosses 0.5 after one step of 0.02, then stops; 0.3 never crosses within eps 0.1
    assert torch.allclose(adv[1], torch.full_like(adv[1], 0.51))
    assert torch.allclose(adv[0], torch.full_like(adv[0], 0.4))
    # tau = 2 lets the crossing sample take two more steps
    adv2 = early_stopped_pgd(model, x, y, eps=0.1, alpha=0.02, steps=10, tau=2, generator=gen, random_start=False)
    assert torch.allclose(adv2[1], torch.full_like(adv2[1], 0.55))
    assert torch.allclose(adv2[2], torch.full_like(adv2[2], 0.64)), "tau steps even when fooled from the start"


def test_adversary_classwise_eps_and_targets_match_pgd():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
    x = torch.rand(4, 3, 2, 2)
    y = torch.tensor([0, 1, 2, 0])
    eps = torch.tensor([0.01, 0.02, 0.03, 0.04])
    cfg = {"type": "pgd", "eps": 0.04, "alpha": 0.01, "steps": 3, "random_start": True, "alpha_scaling": "sample"}
    adv = Adversary(cfg).perturb(model, x, y, torch.Generator().manual_seed(1), eps=eps, target=(y + 1) % 3)
    ref = pgd_attack(model, x, y, eps=eps, alpha=0.01 * eps / 0.04, steps=3, targeted=True, target=(y + 1) % 3,
                     generator=torch.Generator().manual_seed(1))
    assert torch.equal(adv, ref)
    assert ((adv - x).abs().flatten(1).amax(1) <= eps + 1e-6).all()
    kl = Adversary(cfg).perturb(model, x, y, torch.Generator().manual_seed(1), inner="kl")
    assert not torch.equal(kl, x)


def test_validation_split_holds_out_the_last_share_of_each_class():
    labels = torch.tensor([0] * 50 + [1] * 100)
    train, val = validation_split(torch.arange(150), labels, 0.02)
    assert val.tolist() == [49, 148, 149]
    assert set(train.tolist()).isdisjoint(val.tolist()) and len(train) + len(val) == 150
    again, val2 = validation_split(torch.arange(150).flip(0), labels, 0.02)
    assert torch.equal(val, val2) and torch.equal(train, again)


@functools.cache
def _paper_params(repo_root):
    from study.config import load_params

    return load_params(repo_root / "params.yaml", {"preset": "paper"}, presets_dir=repo_root / "workflow/presets",
                       schema_path=repo_root / "workflow/schemas/params.schema.yaml")


def _adversary(repo_root, method, **override):
    from study.config import resolve_method

    return Adversary({**resolve_method(_paper_params(repo_root), method)["adversary"], **override})


def _initial_perturbation(repo_root, method):
    """The training inputs of a zero-step attack minus x: the start of the method's attack."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 3))
    x = torch.full((200, 3, 8, 8), 0.5)   # mid-grey: no clipping to the image box
    y = torch.arange(200) % 3
    inner = "kl" if method.startswith("trades") else "ce"
    adv = _adversary(repo_root, method, steps=0).perturb(model, x, y, torch.Generator().manual_seed(0), inner=inner)
    return adv - x


def test_trades_attack_starts_from_small_gaussian_noise_not_a_uniform_point(repo_root):
    # yaodongyu/TRADES trades.py:trades_loss: x_adv = x_natural + 0.001 * randn
    delta = _initial_perturbation(repo_root, "trades")
    eps = 8 / 255
    assert abs(delta.std().item() - 0.001) < 0.00005, "N(0, 0.001^2) per pixel"
    assert abs(delta.mean().item()) < 0.00005
    assert delta.abs().max().item() < 0.01 < eps / 3, "far inside the eps-ball"


@pytest.mark.parametrize("method", ["at", "fat"])
def test_pgd_and_fat_attacks_start_uniform_in_the_eps_ball(repo_root, method):
    # Madry et al.; FAT.py calls earlystop with randominit_type="uniform_randominit"
    delta = _initial_perturbation(repo_root, method)
    eps = 8 / 255
    assert delta.abs().max().item() <= eps + 1e-6
    assert abs(delta.std().item() - eps / 3 ** 0.5) < 0.02 * eps, "U(-eps, eps) has std eps / sqrt(3)"
    share = (delta.abs() < eps / 2).float().mean().item()
    assert abs(share - 0.5) < 0.02, "half the mass within eps / 2"


def test_fat_adds_omega_noise_at_every_step():
    # earlystop.py: iter_adv + step_size * sign(grad) + omega * randn; a flat model gives a zero
    # gradient, so only the noise moves the sample: after k steps its spread is omega * sqrt(k)
    class Flat(torch.nn.Module):
        def forward(self, x):
            return x.flatten(1).sum(1, keepdim=True) * 0 + torch.tensor([[1.0, 0.0]])

    x = torch.full((50, 3, 8, 8), 0.5)
    y = torch.zeros(50, dtype=torch.long)
    gen = torch.Generator().manual_seed(0)
    adv = early_stopped_pgd(Flat(), x, y, eps=0.1, alpha=0.01, steps=4, tau=0, generator=gen, random_start=False,
                            step_noise=0.001)
    assert abs((adv - x).std().item() - 0.001 * 4 ** 0.5) < 0.0001
    still = early_stopped_pgd(Flat(), x, y, eps=0.1, alpha=0.01, steps=4, tau=0, generator=gen, random_start=False)
    assert torch.equal(still, x)


class _BNProbe(torch.nn.Module):
    """A BatchNorm model that records the mode of every forward pass."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 4), torch.nn.BatchNorm1d(4),
                                       torch.nn.Linear(4, 3))
        self.modes: list[bool] = []

    def forward(self, x):
        self.modes.append(self.training)
        return self.net(x)


@pytest.mark.parametrize(("method", "mode"), [
    ("at", "train"), ("pgd_at_cfa", "train"), ("pgd_at_fairtat", "train"),   # Rice et al.; CFA, FAIR-TAT code
    ("trades", "eval"), ("trades_cfa", "eval"), ("frl_reweight_remargin", "eval"),   # trades.py, utils_frl*.py
    ("fat", "eval"), ("fat_cfa", "eval"),   # earlystop.py: model.eval()
])
def test_batchnorm_mode_during_the_training_attack_follows_the_reference(repo_root, method, mode):
    model = _BNProbe().train()
    x, y = torch.rand(6, 3, 2, 2), torch.tensor([0, 1, 2, 0, 1, 2])
    inner = "kl" if "trades" in method or "frl" in method else "ce"
    _adversary(repo_root, method, steps=2).perturb(model, x, y, torch.Generator().manual_seed(0),
                                                   eps=torch.full((6,), 8 / 255), inner=inner)
    assert model.modes and set(model.modes) == {mode == "train"}, model.modes
    assert model.training, "the model is back in train mode for the loss"
