"""Each policy's update rule against values computed by hand from the published formulas."""

import functools
import math

import pytest
import torch
import torch.nn.functional as F

from study.config.requirements import method_problems, validation_readers
from study.config.types import Method, WeightsPolicy, parse
from study.train.policies import (
    EMA,
    FAWA,
    REGISTRIES,
    WEIGHTS,
    BoostWeights,
    CFAEpsilon,
    CFPTargets,
    CosinePenalty,
    EpochStats,
    FixedTarget,
    FRLReweight,
    MixedLoss,
    PolicyContext,
    TradesLoss,
    build_policies,
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


def _ce_and_kl(clean, adv, y):
    p, q = torch.softmax(clean, 1), torch.softmax(adv, 1)
    return -torch.log_softmax(clean, 1)[torch.arange(len(y)), y], (p * (p.log() - q.log())).sum(1)


CLEAN = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
ADV = torch.tensor([[0.5, 0.5], [1.0, 0.0]])
Y = torch.tensor([0, 1])


def test_plain_trades_keeps_the_reference_form_ce_plus_beta_kl():
    # yaodongyu/TRADES trades.py:trades_loss: loss_natural + beta * loss_robust
    ce, kl = _ce_and_kl(CLEAN, ADV, Y)
    ones = torch.ones(2)
    got = TradesLoss(2, beta=6.0).per_sample(CLEAN, ADV, Y, ones, ones)
    assert torch.allclose(got, ce + 6.0 * kl, atol=1e-6)


def test_cfa_trades_objective_is_normalised_by_one_plus_the_class_beta():
    # PKU-ML/CFA train.py: class_beta = beta_y / (1 + beta_y); attack.py:cw_trades_loss:
    # (1 - class_beta) * CE + class_beta * KL, so CE / (1 + beta_y) + beta_y / (1 + beta_y) * KL
    loss = TradesLoss(2, beta=6.0, lambda2=0.5)
    ce, kl = _ce_and_kl(CLEAN, ADV, Y)
    ones = torch.ones(2)
    before = loss.per_sample(CLEAN, ADV, Y, ones, ones)
    assert torch.allclose(before, ce / 7 + 6 / 7 * kl, atol=1e-6), "base beta, still normalized"
    loss.update(stats([0.2, 0.8]))
    beta = torch.tensor([(0.5 + 0.2) * 6, (0.5 + 0.8) * 6])
    assert torch.allclose(loss.class_beta(), beta.double())
    expected = ce / (1 + beta) + beta / (1 + beta) * kl
    assert torch.allclose(loss.per_sample(CLEAN, ADV, Y, ones, ones), expected, atol=1e-6)
    # the boundary multiplier scales only the KL term, the natural one only the CE term
    w = torch.tensor([2.0, 1.0])
    assert torch.allclose(loss.per_sample(CLEAN, ADV, Y, w, ones),
                          expected + torch.tensor([1.0, 0.0]) * ce / (1 + beta), atol=1e-6)
    assert torch.allclose(loss.per_sample(CLEAN, ADV, Y, ones, w),
                          expected + torch.tensor([1.0, 0.0]) * beta / (1 + beta) * kl, atol=1e-6)


@functools.cache
def _paper_params(repo_root):
    from study.config import load_params

    return load_params(repo_root / "params.yaml", {"preset": "paper"}, presets_dir=repo_root / "workflow/presets",
                       schema_path=repo_root / "workflow/schemas/params.schema.yaml")


def _paper_method(repo_root, name):
    """A method of the paper preset, resolved as the engine gets it."""
    from study.config.methods import resolved_method

    return resolved_method(_paper_params(repo_root), name)


def _method(definition: dict) -> Method:
    """A method definition typed, as the plan types a run config's `method_config`."""
    return parse(Method, definition, "method_config")


def _first_calibrated_epoch(policy, values, epochs, t):
    """The first epoch whose value differs from the base, updating after every epoch."""
    base = values(policy).clone()
    for epoch in range(1, epochs + 1):
        if not torch.equal(values(policy), base):
            return epoch
        policy.update(stats(t, epoch=epoch))
    return None


def test_cfa_calibration_begins_at_the_reference_epoch(repo_root):
    t = [0.2, 0.5, 0.8]
    # PKU-ML/CFA train.py: `if epoch >= args.begin` with 0-based epochs and --begin 10, so the
    # 11th epoch of 200 is the first with class-wise eps (and beta)
    for name in ("pgd_at_cfa", "trades_cfa", "fat_cfa"):
        p = build_policies(_paper_method(repo_root, name), 3, 200, torch.tensor([5, 5, 5]))
        assert _first_calibrated_epoch(p.epsilon, lambda e: e.class_eps(), 200, t) == 10 + 1, name
    trades = build_policies(_paper_method(repo_root, "trades_cfa"), 3, 200, torch.tensor([5, 5, 5])).loss
    assert _first_calibrated_epoch(trades, lambda e: e.class_beta(), 200, t) == 10 + 1
    # FAIR-TAT target_train_new.py: --begin 1, the 2nd epoch
    for name in ("pgd_at_fairtat", "trades_fairtat", "fat_fairtat"):
        p = build_policies(_paper_method(repo_root, name), 3, 200, torch.tensor([5, 5, 5]))
        assert _first_calibrated_epoch(p.epsilon, lambda e: e.class_eps(), 200, t) == 1 + 1, name
    # a short run keeps a calibrated phase: 5% of 8 epochs rounds to 0, at least one epoch is warm-up
    assert CFAEpsilon(0.03, 3, 0.5, epochs=8, warmup=0.05).warmup_epochs == 1
    with pytest.raises(ValueError, match="warmup must be a share of the epochs in \\[0, 1\\), got 10"):
        CFAEpsilon(0.03, 3, 0.5, epochs=200, warmup=10)


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
    # (a class index beyond the dataset's classes is refused by the plan: tests/unit/test_plan_checks.py)


# One hand-built validation epoch of 3 classes, 100 samples each, shared by the FRL tests.
VAL_CLEAN, VAL_ROBUST = [0.9, 0.7, 0.5], [0.6, 0.5, 0.1]
# clean errors [0.1, 0.3, 0.5], whole split 0.3: gaps (tau 0.05) [-0.25, -0.05, 0.15]
GAP_NAT = torch.tensor([0.1 - 0.3 - 0.05, 0.3 - 0.3 - 0.05, 0.5 - 0.3 - 0.05], dtype=torch.float64)
# boundary errors a_c - r_c [0.3, 0.2, 0.4], whole split 0.3: gaps [-0.05, -0.15, 0.05]
GAP_BNDY = torch.tensor([0.3 - 0.3 - 0.05, 0.2 - 0.3 - 0.05, 0.4 - 0.3 - 0.05], dtype=torch.float64)
EPS = 8 / 255
#: complete training attacks (a method's adversary as a run config holds it)
ADVERSARY = {"eps": EPS, "alpha": 2 / 255, "steps": 10}
SMALL_ADVERSARY = {"eps": 0.03, "alpha": 0.01, "steps": 2}


def _frl(repo_root, name):
    return build_policies(_paper_method(repo_root, name), 3, 120, torch.tensor([100, 100, 100]))


def _remargin_eps(lam):
    return EPS * torch.clamp(torch.exp(2 * lam), 0.98, 2.5)


def test_frl_remargin_alone_keeps_the_natural_reweighting_and_reweight_remargin_applies_both(repo_root):
    # fair_robust utils_frl1.py:frl_train (frlrm.py): lmbda0 += rate1 * gamma0, lmbda1 not
    # updated, lmbda2 += rate2 * gamma1; utils_frl2.py (frlrmrw.py): all three updated
    epoch = stats(val_clean=VAL_CLEAN, val_robust=VAL_ROBUST, epoch=1)
    lam_nat = torch.clamp(0.05 * GAP_NAT, min=0)       # [0, 0, 0.0075]: sum below the bound 0.5
    lam_bndy = torch.clamp(0.1 * GAP_BNDY, min=0)      # [0, 0, 0.005]
    lam_eps = 0.1 * GAP_BNDY                           # remargin: neither clamped nor normalized
    remargin, both, reweight = (_frl(repo_root, n) for n in ("frl_remargin", "frl_reweight_remargin", "frl_reweight"))
    for p in (remargin, both, reweight):
        p.update(epoch)
    assert torch.allclose(remargin.weights.lam_nat, lam_nat)
    assert remargin.weights.lam_bndy.tolist() == [0.0, 0.0, 0.0]
    assert remargin.weights.weights()[1].tolist() == [1.0, 1.0, 1.0], "uniform boundary weights"
    assert torch.allclose(remargin.epsilon.class_eps(), _remargin_eps(lam_eps))
    assert torch.allclose(both.weights.lam_nat, lam_nat) and torch.allclose(both.weights.lam_bndy, lam_bndy)
    assert torch.allclose(both.epsilon.class_eps(), _remargin_eps(lam_eps))
    assert torch.allclose(reweight.weights.lam_bndy, lam_bndy)
    assert reweight.epsilon.class_eps().tolist() == [EPS] * 3, "reweight alone keeps eps"


def test_frl_boundary_multipliers_step_at_twice_the_natural_rate_and_halve_on_schedule(repo_root):
    # utils_frl.py:frl_train: lmbda1 += rate1 * 2 * gamma1; frlrw.py halves rate1 before the
    # update of every 40th epoch, i.e. the update after epoch 39 (for epoch 40) is halved
    weights = _frl(repo_root, "frl_reweight").weights
    assert weights.boundary_rate == 2 * weights.rate
    weights.update(stats(val_clean=VAL_CLEAN, val_robust=VAL_ROBUST, epoch=1))
    assert torch.allclose(weights.lam_bndy, torch.clamp(2 * 0.05 * GAP_BNDY, min=0))
    w_bndy = 1 + 3 * (weights.lam_bndy - weights.lam_bndy.mean())
    assert torch.allclose(weights.weights()[1], w_bndy)
    assert [weights.halving(e) for e in (1, 39, 40, 79, 80, 120)] == [1, 1, 0.5, 0.5, 0.25, 0.125]
    late = FRLReweight(3, rate=0.05, halve_every=40, tau=0.05, bound=0.5)
    late.update(stats(val_clean=VAL_CLEAN, val_robust=VAL_ROBUST, epoch=39))
    assert torch.allclose(late.lam_nat, torch.clamp(0.05 * 0.5 * GAP_NAT, min=0))
    assert torch.allclose(late.lam_bndy, torch.clamp(0.1 * 0.5 * GAP_BNDY, min=0))
    # clamp >= 0, then back onto the simplex of mass `bound`
    late.lam_nat = torch.tensor([0.3, 0.3, 0.3], dtype=torch.float64)
    late.update(stats(val_clean=[0.5] * 3, val_robust=[0.5] * 3, epoch=1))
    assert torch.allclose(late.lam_nat, torch.full((3,), 0.5 / 3, dtype=torch.float64))


def test_frl_loss_divides_the_weighted_terms_by_the_batch_weight_sums(repo_root):
    epoch = stats(val_clean=VAL_CLEAN, val_robust=VAL_ROBUST, epoch=1)
    # an unbalanced batch, so that dividing by the weight sum differs from dividing by its size
    y = torch.tensor([0, 0, 0, 2])
    gen = torch.Generator().manual_seed(0)
    clean, adv = torch.randn(4, 3, generator=gen), torch.randn(4, 3, generator=gen)
    ce = F.cross_entropy(clean, y, reduction="none")
    kl = (F.softmax(clean, 1) * (F.log_softmax(clean, 1) - F.log_softmax(adv, 1))).sum(1)
    # the reference's class weights diff = 1/C + lambda - mean(lambda) (utils_frl.py:cost_sensitive)
    diff0 = (1 / 3 + torch.clamp(0.05 * GAP_NAT, min=0) - torch.clamp(0.05 * GAP_NAT, min=0).mean()).float()[y]
    lam1 = torch.clamp(0.1 * GAP_BNDY, min=0)
    diff1 = (1 / 3 + lam1 - lam1.mean()).float()[y]

    reweight = _frl(repo_root, "frl_reweight")
    reweight.update(epoch)
    w_nat, w_bndy = (w.float() for w in reweight.weights.weights())
    got = reweight.loss.per_sample(clean, adv, y, w_nat, w_bndy).mean()
    # utils_frl.py:train_model: sum(l_nat * w0) / sum(w0) + beta * sum(l_bndy * w1) / sum(w1), beta 1
    expected = (ce * diff0).sum() / diff0.sum() + 1.0 * (kl * diff1).sum() / diff1.sum()
    assert torch.allclose(got, expected, atol=1e-6)
    assert not torch.allclose((w_nat[y] * ce + w_bndy[y] * kl).mean(), expected, atol=1e-6), "batch mean differs"

    remargin = _frl(repo_root, "frl_remargin")
    remargin.update(epoch)
    w_nat, w_bndy = (w.float() for w in remargin.weights.weights())
    got = remargin.loss.per_sample(clean, adv, y, w_nat, w_bndy).mean()
    # utils_frl1.py:train_model: sum(l_nat * w0 + beta * l_bndy * w1) / sum(w0 + w1), w1 = 1/C
    uniform = torch.full_like(diff1, 1 / 3)
    expected = (ce * diff0 + 1.0 * kl * uniform).sum() / (diff0 + uniform).sum()
    assert torch.allclose(got, expected, atol=1e-6)


def test_frl_reweight_remargin_step_follows_the_batch_largest_eps_and_cfa_keeps_its_step(repo_root):
    from study.train.adversary import Adversary

    both = _frl(repo_root, "frl_reweight_remargin")
    both.update(stats(val_clean=VAL_CLEAN, val_robust=VAL_ROBUST, epoch=1))
    class_eps = _remargin_eps(0.1 * GAP_BNDY)
    assert torch.allclose(both.epsilon.class_eps(), class_eps)
    y = torch.tensor([0, 1, 1, 0])
    eps = class_eps.float()[y]
    # utils_frl2.py:trades_adv: step_size = max(new_eps) / 4 for the whole batch
    adversary = Adversary(_paper_method(repo_root, "frl_reweight_remargin").adversary)
    assert torch.allclose(adversary.step_sizes(eps), torch.full((4,), float(eps.max()) / 4))
    # utils_frl1.py (remargin alone) and CFA / FAIR-TAT keep the configured step 2/255
    for name in ("frl_remargin", "pgd_at_cfa", "trades_cfa", "fat_cfa", "pgd_at_fairtat"):
        steps = Adversary(_paper_method(repo_root, name).adversary).step_sizes(eps)
        assert torch.allclose(steps, torch.full((4,), 2 / 255)), name


def test_training_step_attacks_with_cfa_fixed_step_under_class_eps(repo_root):
    # CFA attack.py:cw_attack_pgd: eps_k per sample, step 2/255, through the training step (the
    # compiled step's class-wise eps and step sizes: test_fat_validation.py)
    from helpers.step_probe import Probe, loss_input, paper_method, run_step, step_state

    from study.attacks.pgd import pgd_attack

    class_eps = _remargin_eps(0.1 * GAP_BNDY).float()
    y = torch.tensor([0, 1, 1, 0])
    torch.manual_seed(0)
    model = Probe(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3)))
    x = torch.rand(4, 3, 2, 2)
    ref = pgd_attack(model.inner, x, y, eps=class_eps[y], alpha=2 / 255, steps=3,
                     generator=torch.Generator().manual_seed(1))
    state = step_state(paper_method(repo_root, "pgd_at_cfa", steps=3), model, 3, seed=1)
    run_step(state, x, y, class_eps=class_eps)
    assert torch.equal(loss_input(model, x), ref)


def test_frl_policies_take_a_first_step_from_the_starting_model_and_the_others_wait():
    # fair_robust frl_train updates the multipliers before training each epoch, the first
    # time from the hot-start model; CFA needs an epoch of training statistics
    method = _method({"adversary": ADVERSARY, "epsilon": {"type": "cfa"}, "weights": {"type": "frl"}})
    p = build_policies(method, 3, 120, torch.tensor([5, 5, 5]))
    assert p.needs_priming and validation_readers(method) == ["weights type 'frl' (FRL's multipliers)"]
    p.prime(stats(val_clean=VAL_CLEAN, val_robust=VAL_ROBUST, epoch=0))
    assert torch.allclose(p.weights.lam_nat, torch.clamp(0.05 * GAP_NAT, min=0))
    assert p.epsilon.t is None
    with pytest.raises(ValueError, match="epoch 0\\), got epoch 3"):
        p.prime(stats(val_clean=VAL_CLEAN, val_robust=VAL_ROBUST, epoch=3))
    assert not build_policies(_method({"adversary": ADVERSARY, "epsilon": {"type": "cfa"}}), 3, 10,
                              torch.tensor([5, 5, 5])).needs_priming


def test_static_boost_and_balanced_weights():
    balanced = WEIGHTS.build(WeightsPolicy(type="balanced"), PolicyContext(2, class_counts=torch.tensor([10, 30])))
    assert balanced.weights()[0].tolist() == [1.5, 0.5]
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
    assert pen.penalty(aligned, torch.tensor([0, 0, 0])).item() == 0.0


def test_policy_state_round_trips_and_bad_types_are_named():
    p = build_policies(_method({"adversary": SMALL_ADVERSARY, "targets": {"type": "cfp"}, "epsilon": {"type": "cfa"},
                        "loss": {"type": "trades", "lambda2": 0.5}, "weights": {"type": "frl"},
                        "averaging": {"type": "fawa"}}), 2, 10, torch.tensor([5, 5]))
    p.update(stats(train_acc=[0.2, 0.4], confusion=[[3, 2], [1, 4]], val_clean=[0.8, 0.4], val_robust=[0.5, 0.1]))
    q = build_policies(_method({"adversary": SMALL_ADVERSARY, "targets": {"type": "cfp"}, "epsilon": {"type": "cfa"},
                        "loss": {"type": "trades", "lambda2": 0.5}, "weights": {"type": "frl"},
                        "averaging": {"type": "fawa"}}), 2, 10, torch.tensor([5, 5]))
    q.load_state_dict(p.state_dict())
    assert torch.equal(q.epsilon.class_eps(), p.epsilon.class_eps())
    assert torch.equal(q.targets.cfp, p.targets.cfp) and torch.equal(q.weights.lam_nat, p.weights.lam_nat)
    with pytest.raises(ValueError, match="epsilon.type: 'wide' is not valid; expected one of fixed, cfa, remargin"):
        _method({"adversary": SMALL_ADVERSARY, "epsilon": {"type": "wide"}})
    # an attack's policy without an attack: refused where the method is checked, before any policy is built
    assert method_problems(_method({"adversary": None, "loss": {"type": "trades"}})) == [
        "policies ['loss'] need an adversary; the method has adversary: null"]


def test_each_policy_kind_is_one_table_that_names_bad_types_and_matches_the_schema(repo_root):
    import yaml

    schema = yaml.safe_load((repo_root / "workflow/schemas/params.schema.yaml").read_text())
    method_schema = schema["properties"]["methods"]["additionalProperties"]["properties"]
    ctx = PolicyContext(3, epochs=10, eps=0.03, class_counts=torch.tensor([5, 5, 5]))
    for kind, registry in REGISTRIES.items():
        # params.yaml is validated against the schema: its enum must offer exactly the table's types
        assert method_schema[kind]["properties"]["type"]["enum"] == list(registry.names), kind
        for name, cls in registry.types.items():
            # `static` needs its class costs; the other types take their defaults
            costs = {"values": [1, 2, 3]} if name == "static" else {}
            settings = registry.config.model_validate({"type": name, **costs})
            assert type(registry.build(settings, ctx)) is cls
        assert type(registry.build(None, ctx)) is registry.types[registry.default]
        with pytest.raises(ValueError, match=f"unknown {kind} type 'bogus'; valid: {', '.join(registry.names)}"):
            # a type the settings' type allows but the table lacks (the schema check above keeps them equal)
            registry.build(registry.config.model_construct(type="bogus"), ctx)


def test_dafa_warmup_epoch_is_the_reference_epoch_at_any_length(repo_root):
    """DAFA's --dafa_warmup 70 is an epoch count: the weights come after the 70th epoch of DAFA's 110
    and of TRIX's 150 (the recipes' `warmup_epoch`), as the share 70/110 did for 110 alone."""
    from study.train.policies.stats import warmup_epochs
    from study.train.policies.weights import DAFAWeights

    for name, epochs in (("trades_dafa_published", 110), ("trades_trix_published", 150)):
        p = build_policies(_paper_method(repo_root, name), 3, epochs, torch.tensor([5, 5, 5]))
        assert p.weights.warmup_epochs == 70, name
    assert warmup_epochs(70 / 110, 110) == 70 and warmup_epochs(70 / 110, 150) != 70
    assert DAFAWeights(3, epochs=150, warmup_epoch=70).warmup_epochs == 70
    # (a warm-up epoch the run does not reach is refused by the plan: tests/unit/test_plan_checks.py)
