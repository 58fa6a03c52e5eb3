"""The training adversary as the training step runs it (study/train/step.py:
TrainStep.draws, TrainStep.adversarial, inside the whole step, eager and compiled with
`aot_eager`): FAT's early stopping and step noise, class-wise eps and targets, each method's
attack start; and the validation split."""

import pytest
import torch
from helpers.step_probe import Probe, loss_input, paper_method, run_step, step_state

from study.attacks.pgd import pgd_attack
from study.train.validation import validation_split

MODES = [pytest.param(False, id="eager"), pytest.param(True, id="compiled")]


class Threshold(torch.nn.Module):
    """Two classes on the mean pixel: logit_1 - logit_0 = 20 * scale * (mean - 0.5), scale 1
    (a parameter, so the step has one to update)."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(()))

    def forward(self, x):
        m = x.flatten(1).mean(1, keepdim=True)
        return torch.cat([torch.zeros_like(m), 20 * self.scale * (m - 0.5)], dim=1)


class Flat(torch.nn.Module):
    """Logits that do not depend on the input: a zero input gradient."""

    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.tensor([[1.0, 0.0]]))

    def forward(self, x):
        return x.flatten(1).sum(1, keepdim=True) * 0 + self.bias


def _fat(**cfg):
    return {"adversary": {"type": "fat", "eps": 0.1, "random_start": False, "bn_mode": "eval", **cfg}}


@pytest.mark.parametrize(("tau", "compiled"), [(0, False), (2, False), (2, True)])
def test_fat_stops_at_the_first_misclassification_then_takes_tau_steps(tau, compiled):
    # earlystop.py: a sample misclassified with no budget left stops; with budget it spends a step
    model = Probe(Threshold())
    x = torch.tensor([0.3, 0.49, 0.6]).view(3, 1, 1, 1).expand(3, 1, 2, 2).contiguous()
    y = torch.tensor([0, 0, 0])  # the third sample is already misclassified
    run_step(step_state(_fat(alpha=0.02, steps=6, tau=tau), model, 2), x, y, compiled=compiled)
    adv = loss_input(model, x)
    assert all(not training for training, *_ in model.records[:6]), "earlystop: model.eval() for the attack"
    # 0.3 never crosses 0.5 within eps 0.1; 0.49 crosses after one step of 0.02
    assert torch.allclose(adv[0], torch.full_like(adv[0], 0.4))
    if tau == 0:
        assert torch.equal(adv[2], x[2]), "misclassified at the start: no step"
        assert torch.allclose(adv[1], torch.full_like(adv[1], 0.51))
    else:
        assert torch.allclose(adv[1], torch.full_like(adv[1], 0.55)), "two more steps after crossing"
        assert torch.allclose(adv[2], torch.full_like(adv[2], 0.64)), "tau steps even when fooled from the start"


@pytest.mark.parametrize("compiled", MODES)
def test_fat_adds_omega_noise_at_every_step(compiled):
    # earlystop.py: iter_adv + step_size * sign(grad) + omega * randn; a flat model gives a zero
    # gradient, so only the noise moves the sample: after k steps its spread is omega * sqrt(k)
    x = torch.full((50, 3, 8, 8), 0.5)
    y = torch.zeros(50, dtype=torch.long)
    model = Probe(Flat())
    run_step(step_state(_fat(alpha=0.01, steps=4, tau=0, step_noise=0.001), model, 2), x, y, compiled=compiled)
    assert abs((loss_input(model, x) - x).std().item() - 0.001 * 4 ** 0.5) < 0.0001
    still = Probe(Flat())
    run_step(step_state(_fat(alpha=0.01, steps=4, tau=0), still, 2), x, y)
    assert all(torch.equal(xi, x) for _, xi, _ in still.records), "no noise, no gradient: x itself"


@pytest.mark.parametrize("compiled", MODES)
def test_classwise_eps_and_targets_match_pgd(compiled):
    torch.manual_seed(0)
    model = Probe(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3)))
    x = torch.rand(4, 3, 2, 2)
    y = torch.tensor([0, 1, 2, 0])
    class_eps = torch.tensor([0.01, 0.02, 0.03])
    eps, target = class_eps[y], (y + 1) % 3
    cfg = {"type": "pgd", "eps": 0.04, "alpha": 0.01, "steps": 3, "random_start": True, "alpha_scaling": "sample"}
    ref = pgd_attack(model.inner, x, y, eps=eps, alpha=0.01 * eps / 0.04, steps=3, targeted=True, target=target,
                     generator=torch.Generator().manual_seed(1))
    run_step(step_state({"adversary": cfg}, model, 3, seed=1), x, y, compiled=compiled, class_eps=class_eps,
             target=target)
    adv = loss_input(model, x)
    assert torch.equal(adv, ref) if not compiled else torch.allclose(adv, ref, atol=1e-6)
    assert ((adv - x).abs().flatten(1).amax(1) <= eps + 1e-6).all()


def _start(repo_root, method, compiled):
    """The training inputs of a zero-step attack minus x: the start of the method's attack."""
    torch.manual_seed(0)
    model = Probe(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 3)))
    x = torch.full((200, 3, 8, 8), 0.5)   # mid-grey: no clipping to the image box
    y = torch.arange(200) % 3
    run_step(step_state(paper_method(repo_root, method, steps=0), model, 3), x, y, compiled=compiled)
    return loss_input(model, x) - x


@pytest.mark.parametrize("compiled", MODES)
def test_trades_attack_starts_from_small_gaussian_noise_not_a_uniform_point(repo_root, compiled):
    # yaodongyu/TRADES trades.py:trades_loss: x_adv = x_natural + 0.001 * randn
    delta = _start(repo_root, "trades", compiled)
    eps = 8 / 255
    assert abs(delta.std().item() - 0.001) < 0.00005, "N(0, 0.001^2) per pixel"
    assert abs(delta.mean().item()) < 0.00005
    assert delta.abs().max().item() < 0.01 < eps / 3, "far inside the eps-ball"


@pytest.mark.parametrize(("method", "compiled"), [("at", False), ("fat", False), ("fat", True)])
def test_pgd_and_fat_attacks_start_uniform_in_the_eps_ball(repo_root, method, compiled):
    # (the start is drawn and projected the same way for both: one of them compiled)
    # Madry et al.; FAT.py calls earlystop with randominit_type="uniform_randominit"
    delta = _start(repo_root, method, compiled)
    eps = 8 / 255
    assert delta.abs().max().item() <= eps + 1e-6
    assert abs(delta.std().item() - eps / 3 ** 0.5) < 0.02 * eps, "U(-eps, eps) has std eps / sqrt(3)"
    share = (delta.abs() < eps / 2).float().mean().item()
    assert abs(share - 0.5) < 0.02, "half the mass within eps / 2"


def test_validation_split_holds_out_the_last_share_of_each_class():
    labels = torch.tensor([0] * 50 + [1] * 100)
    train, val = validation_split(torch.arange(150), labels, 0.02)
    assert val.tolist() == [49, 148, 149]
    assert set(train.tolist()).isdisjoint(val.tolist()) and len(train) + len(val) == 150
    again, val2 = validation_split(torch.arange(150).flip(0), labels, 0.02)
    assert torch.equal(val, val2) and torch.equal(train, again)
