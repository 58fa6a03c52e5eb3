"""FAT's early-stopped PGD, the training adversary's per-sample options, the validation split."""

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
    adv = early_stopped_pgd(model, x, y, eps=0.1, alpha=0.02, steps=10, tau=0, generator=gen, init_std=0.0)
    assert torch.equal(adv[2], x[2]), "misclassified at the start: no step"
    # 0.49 crosses 0.5 after one step of 0.02, then stops; 0.3 never crosses within eps 0.1
    assert torch.allclose(adv[1], torch.full_like(adv[1], 0.51))
    assert torch.allclose(adv[0], torch.full_like(adv[0], 0.4))
    # tau = 2 lets the crossing sample take two more steps
    adv2 = early_stopped_pgd(model, x, y, eps=0.1, alpha=0.02, steps=10, tau=2, generator=gen, init_std=0.0)
    assert torch.allclose(adv2[1], torch.full_like(adv2[1], 0.55))
    assert torch.allclose(adv2[2], torch.full_like(adv2[2], 0.64)), "tau steps even when fooled from the start"


def test_adversary_classwise_eps_and_targets_match_pgd():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
    x = torch.rand(4, 3, 2, 2)
    y = torch.tensor([0, 1, 2, 0])
    eps = torch.tensor([0.01, 0.02, 0.03, 0.04])
    cfg = {"type": "pgd", "eps": 0.04, "alpha": 0.01, "steps": 3, "random_start": True}
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
