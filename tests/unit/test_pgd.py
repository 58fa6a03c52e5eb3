import pytest
import torch
import torch.nn.functional as F
from torch import nn

from study.attacks import frozen_params, pgd_attack

NUM_CLASSES = 4
SHAPE = (3, 8, 8)


def _blobs(n: int, means: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.arange(n) % NUM_CLASSES
    x = (means[y] + 0.15 * torch.randn(n, *SHAPE, generator=gen)).clamp(0, 1)
    return x, y


@pytest.fixture(scope="module")
def toy():
    """A small MLP trained for 300 steps on Gaussian blobs shaped as 3x8x8 images."""
    gen = torch.Generator().manual_seed(0)
    means = 0.4 + 0.2 * torch.rand(NUM_CLASSES, *SHAPE, generator=gen)
    x_train, y_train = _blobs(512, means, gen)
    x_test, y_test = _blobs(256, means, gen)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(192, 32), nn.ReLU(), nn.Linear(32, NUM_CLASSES))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(300):
        opt.zero_grad()
        F.cross_entropy(model(x_train), y_train).backward()
        opt.step()
    model.zero_grad(set_to_none=True)
    return model.eval(), x_test, y_test


def _accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def _seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _linear_binary_problem():
    """Binary linear model with small weights (no softmax saturation) and inputs far
    enough from 0 and 1 that the image box never binds."""
    gen = _seeded(3)
    w = 0.05 * torch.randn(2, 192, generator=gen)
    model = nn.Sequential(nn.Flatten(), nn.Linear(192, 2))
    with torch.no_grad():
        model[1].weight.copy_(w)
        model[1].bias.copy_(-w.sum(1) * 0.5)
    x = 0.3 + 0.4 * torch.rand(16, *SHAPE, generator=gen)
    y = torch.arange(16) % 2
    # Moving towards the other class is the same direction for both losses below.
    direction = (w[1 - y] - w[y]).view(16, *SHAPE)
    return model.eval(), x, y, direction


@pytest.mark.parametrize("targeted", [False, True])
def test_linf_reaches_the_analytic_optimum_of_a_linear_model(targeted):
    model, x, y, direction = _linear_binary_problem()
    eps = 8 / 255
    target = (1 - y) if targeted else None
    x_adv = pgd_attack(
        model,
        x,
        y,
        eps=eps,
        alpha=eps / 4,
        steps=10,
        targeted=targeted,
        target=target,
        generator=_seeded(0),
    )
    torch.testing.assert_close(x_adv - x, eps * direction.sign(), atol=1e-6, rtol=0)


def test_l2_reaches_the_analytic_optimum_of_a_linear_model():
    model, x, y, direction = _linear_binary_problem()
    eps = 0.5
    unit = direction / direction.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
    assert ((x + eps * unit).min() > 0) and ((x + eps * unit).max() < 1)
    x_adv = pgd_attack(model, x, y, eps=eps, alpha=0.2, steps=5, norm="l2", random_start=False)
    torch.testing.assert_close(x_adv - x, eps * unit, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize(("norm", "eps_max"), [("linf", 0.3), ("l2", 3.0)])
def test_result_stays_in_per_sample_ball_and_image_box(toy, norm, eps_max):
    model, x, y = toy
    x = x[:32].clone()
    x[0, :, :2] = 0.0  # pixels on the box edges, where only the clamp keeps them valid
    x[1, :, :2] = 1.0
    eps = torch.linspace(0, eps_max, 32)
    alpha = eps / 3
    x_adv = pgd_attack(
        model, x, y[:32], eps=eps, alpha=alpha, steps=5, norm=norm, generator=_seeded(0)
    )
    assert x_adv.dtype == x.dtype and not x_adv.requires_grad
    assert x_adv.min() >= 0 and x_adv.max() <= 1
    delta = (x_adv - x).flatten(1)
    size = delta.abs().amax(1) if norm == "linf" else delta.norm(dim=1)
    assert (size <= eps * (1 + 1e-5) + 1e-6).all()
    # The budget is used: large-eps samples move by more than small-eps ones.
    assert size[-1] > 0.5 * eps_max and size[-1] > size[1]
    assert torch.equal(x_adv[0], x[0])


def test_zero_eps_returns_x_exactly(toy):
    model, x, y = toy
    for norm in ("linf", "l2"):
        x_adv = pgd_attack(model, x, y, eps=0.0, alpha=0.01, steps=3, norm=norm)
        assert torch.equal(x_adv, x)


def test_untargeted_pgd_lowers_accuracy_substantially(toy):
    model, x, y = toy
    assert _accuracy(model, x, y) >= 0.95
    x_linf = pgd_attack(model, x, y, eps=0.05, alpha=0.0125, steps=10, generator=_seeded(0))
    x_l2 = pgd_attack(model, x, y, eps=1.0, alpha=0.25, steps=10, norm="l2", generator=_seeded(0))
    assert _accuracy(model, x_linf, y) <= 0.3
    assert _accuracy(model, x_l2, y) <= 0.3


def test_targeted_pgd_reaches_the_target_for_most_samples(toy):
    model, x, y = toy
    target = (y + 1) % NUM_CLASSES
    x_adv = pgd_attack(
        model,
        x,
        y,
        eps=0.1,
        alpha=0.02,
        steps=20,
        targeted=True,
        target=target,
        generator=_seeded(0),
    )
    assert _accuracy(model, x_adv, target) >= 0.9


def test_no_parameter_gradients_and_flags_restored(toy):
    model, x, y = toy
    weight, bias = model[1].weight, model[1].bias
    bias.requires_grad_(False)
    sentinel = torch.full_like(model[3].weight, 7.0)
    model[3].weight.grad = sentinel.clone()  # as if mid-way through a training step
    seen = []
    hook = model.register_forward_pre_hook(
        lambda module, args: seen.append(any(p.requires_grad for p in module.parameters()))
    )
    try:
        pgd_attack(model, x[:8], y[:8], eps=0.05, alpha=0.01, steps=3, restarts=2)
        assert seen and not any(seen)  # parameters were frozen for every forward pass
        assert weight.grad is None and bias.grad is None and model[3].bias.grad is None
        assert torch.equal(model[3].weight.grad, sentinel)
        assert [p.requires_grad for p in model.parameters()] == [True, False, True, True]
    finally:
        hook.remove()
        bias.requires_grad_(True)
        model[3].weight.grad = None


def test_frozen_params_restores_flags_after_an_exception():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    model[0].bias.requires_grad_(False)
    with pytest.raises(RuntimeError, match="boom"), frozen_params(model):
        assert not any(p.requires_grad for p in model.parameters())
        raise RuntimeError("boom")
    assert [p.requires_grad for p in model.parameters()] == [True, False, True, True]


@pytest.mark.parametrize("training", [True, False])
def test_attack_keeps_train_or_eval_mode(training):
    model = nn.Sequential(
        nn.Flatten(), nn.Linear(192, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4)
    ).train(training)
    x, y = torch.rand(8, *SHAPE), torch.arange(8) % 4
    pgd_attack(model, x, y, eps=0.03, alpha=0.01, steps=2, restarts=2)
    assert all(m.training == training for m in model.modules())


def test_a_train_mode_restart_attacks_the_whole_batch_and_keeps_the_solved_samples():
    # The last layer predicts class 0 for every input: sample 0 (label 0) stays unsolved
    # after the first run, the others are solved by it. A second run on sample 0 alone
    # would put a batch of one through train-mode BatchNorm, which has no batch statistics.
    head = nn.Linear(16, 4)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.copy_(torch.tensor([100.0, 0.0, 0.0, 0.0]))
    model = nn.Sequential(nn.Flatten(), nn.Linear(192, 16), nn.BatchNorm1d(16), nn.ReLU(), head).train()
    x, y = torch.rand(8, *SHAPE, generator=_seeded(3)), torch.tensor([0, 1, 2, 3, 1, 2, 3, 1])
    kwargs = dict(eps=0.03, alpha=0.01, steps=2)
    two = pgd_attack(model, x, y, restarts=2, generator=_seeded(5), **kwargs)
    one = pgd_attack(model, x, y, restarts=1, generator=_seeded(5), **kwargs)
    assert torch.equal(two[1:], one[1:])
    assert model.training


def test_same_seed_same_result_and_different_seed_differs(toy):
    model, x, y = toy
    kwargs = dict(eps=0.03, alpha=0.005, steps=3, restarts=2)
    a = pgd_attack(model, x, y, generator=_seeded(11), **kwargs)
    b = pgd_attack(model, x, y, generator=_seeded(11), **kwargs)
    c = pgd_attack(model, x, y, generator=_seeded(12), **kwargs)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


@pytest.mark.parametrize("norm", ["linf", "l2"])
def test_steps_zero_returns_the_random_start_or_x(toy, norm):
    model, x, y = toy
    eps = 0.03 if norm == "linf" else 0.5
    start = pgd_attack(model, x, y, eps=eps, alpha=0.01, steps=0, norm=norm, generator=_seeded(0))
    delta = (start - x).flatten(1)
    size = delta.abs().amax(1) if norm == "linf" else delta.norm(dim=1)
    assert (size <= eps * (1 + 1e-5)).all()
    # Uniform in a 192-d ball puts almost all mass near the surface (box clipping aside).
    spread = delta.abs().mean() if norm == "linf" else size.median()
    assert spread > (eps / 4 if norm == "linf" else 0.8 * eps)
    assert torch.equal(
        pgd_attack(model, x, y, eps=eps, alpha=0.01, steps=0, norm=norm, random_start=False), x
    )


def test_gaussian_start_has_the_given_spread_and_stays_in_the_ball():
    # yaodongyu/TRADES trades.py: x_adv = x + 0.001 * randn; pixels at 0.5 keep the box away
    model = nn.Sequential(nn.Flatten(), nn.Linear(192, NUM_CLASSES))
    x = torch.full((64, *SHAPE), 0.5)
    y = torch.zeros(64, dtype=torch.long)
    start = pgd_attack(model, x, y, eps=8 / 255, alpha=0.01, steps=0, start_std=0.001, generator=_seeded(0))
    delta = start - x
    assert abs(delta.std().item() - 0.001) < 0.00005 and abs(delta.mean().item()) < 0.00005
    # the same draws, in a ball smaller than the noise, are projected into it
    tight = pgd_attack(model, x, y, eps=0.0005, alpha=0.01, steps=0, start_std=0.001, generator=_seeded(0))
    assert (tight - x).abs().max().item() <= 0.0005 + 1e-7
    assert torch.allclose(tight - x, delta.clamp(-0.0005, 0.0005), atol=1e-7)


def _success(model, x_adv, y):
    with torch.no_grad():
        return model(x_adv).argmax(1) != y


def test_more_restarts_never_lower_success(toy):
    model, x, y = toy
    # A short attack near the decision boundary leaves the random start decisive.
    kwargs = dict(eps=0.04, alpha=0.01, steps=4)
    one = _success(model, pgd_attack(model, x, y, generator=_seeded(5), **kwargs), y)
    five = _success(model, pgd_attack(model, x, y, restarts=5, generator=_seeded(5), **kwargs), y)
    assert (five | ~one).all()  # every sample broken by one restart stays broken
    assert five.sum() > one.sum()


def test_restarts_select_per_sample_over_independent_runs(toy):
    model, x, y = toy
    kwargs = dict(eps=0.04, alpha=0.01, steps=4)
    gen = _seeded(9)
    runs = [pgd_attack(model, x, y, generator=gen, **kwargs) for _ in range(3)]
    combined = pgd_attack(model, x, y, restarts=3, generator=_seeded(9), **kwargs)
    with torch.no_grad():
        losses = torch.stack([F.cross_entropy(model(r), y, reduction="none") for r in runs])
        success = torch.stack([model(r).argmax(1) != y for r in runs])
    first_success = success.float().argmax(0)
    choice = torch.where(success.any(0), first_success, losses.argmax(0))
    expected = torch.stack(runs)[choice, torch.arange(len(y))]
    # Both rules are exercised: later runs add successes, and some samples succeed twice.
    assert success.any(0).sum() > success[0].sum()
    assert (success.sum(0) >= 2).any() and (~success.any(0)).any()
    torch.testing.assert_close(combined, expected, atol=1e-6, rtol=0)


def test_callable_loss_is_used_like_the_named_one(toy):
    model, x, y = toy

    def ce(logits, labels):
        return F.cross_entropy(logits, labels, reduction="none")

    kwargs = dict(eps=0.03, alpha=0.01, steps=3)
    named = pgd_attack(model, x, y, generator=_seeded(1), **kwargs)
    given = pgd_attack(model, x, y, generator=_seeded(1), loss=ce, **kwargs)
    assert torch.equal(named, given)
    # Descending instead of ascending the loss must make the attack useless.
    helped = pgd_attack(
        model, x, y, generator=_seeded(1), loss=lambda lg, lb: -ce(lg, lb), **kwargs
    )
    assert _accuracy(model, helped, y) >= _accuracy(model, named, y)
    with pytest.raises(ValueError, match="one value per sample"):
        pgd_attack(model, x, y, loss=lambda lg, lb: ce(lg, lb).mean(), **kwargs)


def test_works_under_bf16_autocast(toy):
    model, x, y = toy
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x_adv = pgd_attack(model, x, y, eps=0.05, alpha=0.0125, steps=10, generator=_seeded(0))
    assert x_adv.dtype == torch.float32
    assert (x_adv - x).abs().max() <= 0.05 + 1e-6
    assert _accuracy(model, x_adv, y) <= 0.4


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(norm="l1"), "valid norms: linf, l2"),
        (dict(loss="kl"), "valid losses: ce"),
        (dict(targeted=True), "needs target"),
        (dict(target=torch.zeros(4, dtype=torch.long)), "targeted=False"),
        (dict(eps=torch.full((3,), 0.1)), r"shape \(4,\)"),
        (dict(eps=-0.1), ">= 0"),
        (dict(steps=-1), "steps must be >= 0"),
        (dict(restarts=0), "restarts must be >= 1"),
        (dict(start_std=-0.1), "start_std must be >= 0"),
    ],
)
def test_bad_arguments_are_rejected(kwargs, match):
    model = nn.Sequential(nn.Flatten(), nn.Linear(192, 4))
    args = dict(eps=0.1, alpha=0.01, steps=1) | kwargs
    with pytest.raises(ValueError, match=match):
        pgd_attack(model, torch.rand(4, *SHAPE), torch.zeros(4, dtype=torch.long), **args)
