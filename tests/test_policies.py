"""Each policy's update rule against values computed by hand from the published formulas."""

import math

import pytest
import torch
import torch.nn.functional as F

from study.train.policies import (
    EMA,
    FAWA,
    BoostWeights,
    CFAEpsilon,
    CFPTargets,
    CosinePenalty,
    EpochStats,
    FixedTarget,
    FRLReweight,
    MixedLoss,
    RemarginEpsilon,
    TradesLoss,
    build_policies,
    build_weights,
)


def stats(train_acc=None, confusion=None, val_clean=None, val_robust=None, epoch=1, n=100):
    """EpochStats from accuracies (n samples per class)."""
    c = len(train_acc if train_acc is not None else val_clean)
    t = torch.tensor(train_acc if train_acc is not None else [0.5] * c, dtype=torch.float64)
    s = EpochStats(epoch, torch.full((c,), float(n), dtype=torch.float64), t * n,
                   torch.tensor(confusion, dtype=torch.float64) if confusion is not None else torch.eye(c) * n)
    if val_clean is not None:
        s.val_n = torch.full((c,), float(n), dtype=torch.float64)
        s.val_clean_correct = torch.tensor(val_clean, dtype=torch.float64) * n
        s.val_robust_correct = torch.tensor(val_robust, dtype=torch.float64) * n
    return s


def test_cfa_epsilon_is_lambda_plus_class_robust_accuracy_times_eps():
    eps = 8 / 255
    policy = CFAEpsilon(eps, 3, lam=0.5)
    assert torch.allclose(policy.class_eps(), torch.full((3,), eps, dtype=torch.float64)), "epoch 1: the base eps"
    policy.update(stats([0.2, 0.5, 0.8]))
    expected = torch.tensor([0.7, 1.0, 1.3], dtype=torch.float64) * eps
    assert torch.allclose(policy.class_eps(), expected)


def test_trades_classwise_beta_and_loss_by_hand():
    loss = TradesLoss(2, beta=6.0, lambda2=0.5)
    assert loss.class_beta().tolist() == [6.0, 6.0]
    loss.update(stats([0.2, 0.8]))
    assert torch.allclose(loss.class_beta(), torch.tensor([4.2, 7.8], dtype=torch.float64))

    clean = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
    adv = torch.tensor([[0.5, 0.5], [1.0, 0.0]])
    y = torch.tensor([0, 1])
    ones = torch.ones(2)
    got = loss.per_sample(clean, adv, y, ones, ones)
    p = torch.softmax(clean, 1)
    q = torch.softmax(adv, 1)
    kl = (p * (p.log() - q.log())).sum(1)
    ce = -torch.log_softmax(clean, 1)[[0, 1], y]
    expected = ce + torch.tensor([4.2, 7.8]) * kl
    assert torch.allclose(got, expected, atol=1e-6)
    # the boundary multiplier scales only the KL term, the natural one only the CE term
    w = torch.tensor([2.0, 1.0])
    assert torch.allclose(loss.per_sample(clean, adv, y, w, ones), expected + torch.tensor([1.0, 0.0]) * ce, atol=1e-6)


def test_mixed_loss_weights_clean_and_adversarial_ce():
    clean, adv, y = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]]), torch.tensor([0])
    got = MixedLoss(2, adv_weight=0.25).per_sample(clean, adv, y, torch.ones(2), torch.ones(2))
    expected = 0.75 * F.cross_entropy(clean, y) + 0.25 * F.cross_entropy(adv, y)
    assert torch.allclose(got, expected.view(1))


def test_cfp_from_training_confusion_and_fairtat_target_distribution():
    confusion = [[5, 1, 0], [2, 3, 1], [0, 0, 4]]
    s = stats([0.5, 0.5, 0.5], confusion)
    # predicted as class 0 by others: 2; as 1: 1; as 2: 1; of 4 misclassified
    assert s.train_cfp.tolist() == [0.5, 0.25, 0.25]

    targets = CFPTargets(3, temperature=2.0)
    gen = torch.Generator().manual_seed(0)
    y = torch.tensor([0, 1, 2] * 200)
    first = targets.sample(y, gen)
    assert (first != y).all(), "first epoch: uniform over the other classes"
    targets.update(s)
    probs = targets.probabilities(torch.tensor([0, 1]))
    e1, e05 = math.exp(1.0), math.exp(0.5)
    assert torch.allclose(probs[0], torch.tensor([0.0, 0.5, 0.5]))
    assert torch.allclose(probs[1], torch.tensor([e1 / (e1 + e05), 0.0, e05 / (e1 + e05)]))
    drawn = targets.sample(y, gen)
    assert (drawn != y).all()
    share = (drawn[y == 1] == 0).double().mean().item()
    assert abs(share - e1 / (e1 + e05)) < 0.1


def test_fixed_target_follows_the_weakest_class():
    policy = FixedTarget(3, "weakest")
    policy.update(stats([0.5, 0.1, 0.9]))
    y = torch.tensor([0, 1, 2, 1])
    t = policy.sample(y, torch.Generator().manual_seed(0))
    assert t[0] == 1 and t[2] == 1 and t[1] != 1 and t[3] != 1
    with pytest.raises(ValueError, match="weakest"):
        FixedTarget(3, 7)


def test_frl_remargin_multiplier_from_boundary_gaps():
    policy = RemarginEpsilon(1.0, 2, rate=0.1, tau=0.05)
    # boundary errors a_c - r_c = [0.3, 0.4], mean 0.35 -> gaps [-0.1, 0.0]
    policy.update(stats(val_clean=[0.9, 0.5], val_robust=[0.6, 0.1]))
    assert torch.allclose(policy.lam, torch.tensor([-0.01, 0.0], dtype=torch.float64))
    assert torch.allclose(policy.class_eps(), torch.tensor([math.exp(-0.02), 1.0], dtype=torch.float64))
    for _ in range(100):  # far past the clamp on both sides
        policy.update(stats(val_clean=[0.9, 0.9], val_robust=[0.9, 0.0]))
    assert policy.class_eps().tolist() == [0.98, 2.5]


def test_frl_reweight_update_clamp_bound_and_rate_halving():
    policy = FRLReweight(2, rate=0.05, halve_every=40, tau=0.05, bound=0.5)
    # clean errors [0.1, 0.5] (mean 0.3): gaps [-0.25, 0.15]; boundary [0.3, 0.4]: gaps [-0.1, 0.0]
    policy.update(stats(val_clean=[0.9, 0.5], val_robust=[0.6, 0.1]))
    assert torch.allclose(policy.lam_nat, torch.tensor([0.0, 0.0075], dtype=torch.float64))
    assert policy.lam_bndy.tolist() == [0.0, 0.0]
    w_nat, w_bndy = policy.weights()
    assert torch.allclose(w_nat, torch.tensor([1 - 0.0075, 1 + 0.0075], dtype=torch.float64))
    assert w_bndy.tolist() == [1.0, 1.0]
    assert policy.rate_at(40) == 0.05 and policy.rate_at(41) == 0.025 and policy.rate_at(81) == 0.0125
    policy.lam_nat = torch.tensor([0.4, 0.4], dtype=torch.float64)
    policy.update(stats(val_clean=[0.5, 0.5], val_robust=[0.5, 0.5], epoch=1))
    # gaps [-0.05, -0.05]: 0.4 - 0.0025 each, sum 0.795 > 0.5 -> rescaled to sum 0.5
    assert torch.allclose(policy.lam_nat, torch.tensor([0.25, 0.25], dtype=torch.float64))


def test_static_boost_and_balanced_weights():
    assert build_weights({"type": "balanced"}, 2, torch.tensor([10, 30])).weights()[0].tolist() == [1.5, 0.5]
    boost = BoostWeights(4, 2, factor=2.0)
    assert torch.allclose(boost.weights()[0], torch.tensor([0.8, 0.8, 1.6, 0.8], dtype=torch.float64))
    weakest = BoostWeights(3, "weakest", factor=3.0)
    assert weakest.weights()[0].tolist() == [1.0, 1.0, 1.0]
    weakest.update(stats(val_clean=[0.9, 0.9, 0.9], val_robust=[0.5, 0.6, 0.2]))
    assert torch.allclose(weakest.weights()[0], torch.tensor([0.6, 0.6, 1.8], dtype=torch.float64))


def _model(value):
    m = torch.nn.Linear(1, 1)
    with torch.no_grad():
        m.weight.fill_(value)
        m.bias.fill_(value)
    return m


def test_ema_starts_at_its_epoch_and_averages_with_decay():
    ema = EMA(epochs=200, decay=0.85, start=0.25)
    assert ema.start_epoch == 50
    assert not ema.update(_model(1.0), stats([0.5, 0.5], epoch=49)) and ema.average is None
    assert ema.update(_model(1.0), stats([0.5, 0.5], epoch=50))
    ema.update(_model(3.0), stats([0.5, 0.5], epoch=51))
    assert ema.average["weight"].item() == pytest.approx(0.85 * 1.0 + 0.15 * 3.0)
    assert EMA(epochs=2, start=0.25).start_epoch == 1, "short presets average from epoch 1"


def test_fawa_averages_only_checkpoints_with_a_fair_worst_class():
    fawa = FAWA(epochs=4, decay=0.85, start=0.25, threshold=0.2)
    assert fawa.update(_model(1.0), stats(val_clean=[0.9, 0.9], val_robust=[0.5, 0.3], epoch=1))
    assert not fawa.update(_model(5.0), stats(val_clean=[0.9, 0.9], val_robust=[0.5, 0.1], epoch=2))
    assert fawa.average["weight"].item() == 1.0, "a worst class below 0.2 is not averaged in"
    assert fawa.update(_model(2.0), stats(val_clean=[0.9, 0.9], val_robust=[0.2, 0.3], epoch=3))
    assert fawa.average["weight"].item() == pytest.approx(0.85 + 0.3)


def test_cosine_penalty_is_mean_pairwise_cosine_of_class_mean_logits():
    pen = CosinePenalty(3, coef=0.5)
    y = torch.tensor([0, 0, 1])
    orthogonal = torch.tensor([[1.0, 0.0, 0.0], [3.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    assert pen.penalty(orthogonal, y).item() == pytest.approx(0.0)
    aligned = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [2.0, 2.0, 0.0]])
    assert pen.penalty(aligned, y).item() == pytest.approx(0.5)
    assert pen.penalty(aligned, torch.tensor([0, 0, 0])) is None


def test_policy_state_round_trips_and_bad_types_are_named():
    p = build_policies({"adversary": {"eps": 0.03}, "targets": {"type": "cfp"}, "epsilon": {"type": "cfa"},
                        "loss": {"type": "trades", "lambda2": 0.5}, "weights": {"type": "frl"},
                        "averaging": {"type": "fawa"}}, 2, 10, torch.tensor([5, 5]))
    p.update(stats(train_acc=[0.2, 0.4], confusion=[[3, 2], [1, 4]], val_clean=[0.8, 0.4], val_robust=[0.5, 0.1]))
    q = build_policies({"adversary": {"eps": 0.03}, "targets": {"type": "cfp"}, "epsilon": {"type": "cfa"},
                        "loss": {"type": "trades", "lambda2": 0.5}, "weights": {"type": "frl"},
                        "averaging": {"type": "fawa"}}, 2, 10, torch.tensor([5, 5]))
    q.load_state_dict(p.state_dict())
    assert torch.equal(q.epsilon.class_eps(), p.epsilon.class_eps())
    assert torch.equal(q.targets.cfp, p.targets.cfp) and torch.equal(q.weights.lam_nat, p.weights.lam_nat)
    with pytest.raises(ValueError, match="unknown epsilon type 'wide'.*fixed, cfa, remargin"):
        build_policies({"adversary": {"eps": 0.03}, "epsilon": {"type": "wide"}}, 2, 10, torch.tensor([5, 5]))
    with pytest.raises(ValueError, match="need an adversary"):
        build_policies({"adversary": None, "loss": {"type": "trades"}}, 2, 10, torch.tensor([5, 5]))
