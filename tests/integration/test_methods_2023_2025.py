"""The fairness methods of 2023-2025 (issue 34): DAFA, TRIX, FAAL and WAT as compositions of the
engine's policies. Each mechanism is pinned on the training step with hand-computed values,
eager and compiled with `aot_eager` (tests/helpers/step_probe.py), and the policies' state is checked
through a checkpoint and a resume.

The models here have no BatchNorm (a flatten and a linear layer), so a logit recomputed outside
the step is the step's own, in train or eval mode alike."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from helpers.step_probe import Probe, loss_input, paper_method, run_step, step_state

from study.config import plan_runs
from study.io import load_torch
from study.train.engine import train_run
from study.train.policies.build import build_policies
from study.train.policies.dafa import class_similarity, dafa_class_weights, soft_confusion, trix_targeted
from study.train.policies.dro import class_margins, faal_class_weights, kl_to_uniform
from study.train.policies.stats import EpochStats
from study.train.step import EpochTotals

C = 3
# A hand-made soft confusion matrix: row i, the mean softmax of class i's samples.
P = torch.tensor([[0.5, 0.3, 0.2],
                  [0.1, 0.8, 0.1],
                  [0.2, 0.2, 0.6]], dtype=torch.float64)
# Diagonals 0.5 < 0.6 < 0.8: class 0 gains from 1 and 2, class 2 gains from 1 and loses to 0.
#   w0 = 1 + P01 P11 + P02 P22          = 1 + 0.3*0.8 + 0.2*0.6 = 1.36
#   w1 = 1 - (P01 + P21) P11            = 1 - (0.3 + 0.2)*0.8   = 0.60
#   w2 = 1 + P21 P11 - P02 P22          = 1 + 0.16 - 0.12       = 1.04
W = torch.tensor([1.36, 0.60, 1.04], dtype=torch.float64)


def linear_model(features: int = 12, classes: int = C) -> Probe:
    torch.manual_seed(0)
    return Probe(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(features, classes)))


def batch(n: int = 6, features: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    x = 0.3 + 0.4 * torch.rand((n, 1, 1, features), generator=g)
    return x, torch.arange(n) % C


def stats(epoch: int, soft: torch.Tensor, n: float = 10.0) -> EpochStats:
    counts = torch.full((C,), n, dtype=torch.float64)
    return EpochStats(epoch, counts, counts.clone(), torch.zeros(C, C, dtype=torch.float64),
                      train_soft_confusion=soft * n)


# ------------------------------------------------------------------------------ DAFA

def test_dafa_weights_are_the_formula_on_a_hand_made_matrix():
    w = dafa_class_weights(P, 1.0)
    assert torch.allclose(w, W, atol=1e-12)
    assert float(w.mean()) == pytest.approx(1.0)   # each pair moves weight, none is made
    # lambda scales the moved amounts
    assert torch.allclose(dafa_class_weights(P, 1.5), 1 + 1.5 * (W - 1), atol=1e-12)
    # the matrix from per-sample probabilities: each row the mean of its class's samples
    probs = torch.cat([P, P * 0 + P]).float()
    sums, counts = soft_confusion(probs, torch.tensor([0, 1, 2, 0, 1, 2]), C)
    assert torch.allclose(class_similarity(sums, counts), P, atol=1e-6)


def test_dafa_weights_are_computed_once_after_the_warm_up_epoch(repo_root):
    method = paper_method(repo_root, "trades_dafa")   # warm-up 0.35 of 10 epochs: the 4th (round(3.5) = 4)
    policies = build_policies(_typed(method), C, 10, torch.full((C,), 10))
    assert policies.needs_soft_confusion
    other = torch.eye(C, dtype=torch.float64)
    for epoch in (1, 2, 3):
        policies.update(stats(epoch, other))
        assert torch.equal(policies.weights.weights()[0], torch.ones(C, dtype=torch.float64))
    policies.update(stats(4, P))
    assert torch.allclose(policies.weights.weights()[0], W)
    # only the natural term is weighted
    assert torch.equal(policies.weights.weights()[1], torch.ones(C, dtype=torch.float64))
    # the radius follows the weights (epsilon `dafa` reads the weights policy)
    assert torch.allclose(policies.epsilon.class_eps(), W * 8 / 255)
    policies.update(stats(5, other))   # fixed after the warm-up epoch
    assert torch.allclose(policies.weights.weights()[0], W)
    # the weights are the policy's state: a fresh policy loaded from it has them
    fresh = build_policies(_typed(method), C, 10, torch.full((C,), 10))
    fresh.load_state_dict(policies.state_dict())
    assert torch.allclose(fresh.weights.weights()[0], W) and torch.allclose(fresh.epsilon.class_eps(), W * 8 / 255)


def test_dafa_epsilon_needs_dafa_weights(repo_root):
    from study.config.requirements import method_problems

    method = paper_method(repo_root, "trades_dafa")
    method = {k: v for k, v in method.items() if k != "weights"}
    # refused where the method is checked (the plan, a run config's parse), before any policy is built
    assert method_problems(_typed(method)) == [
        "epsilon.type: 'dafa' scales the radius by DAFA's class weights; the method's weights type is 'none'; "
        "valid: 'dafa'"]


def _typed(method: dict):
    from study.config.types import Method, parse

    return parse(Method, method, "method")


def _dafa_state(repo_root, name: str, **adversary):
    model = linear_model()
    state = step_state(paper_method(repo_root, name, **adversary), model, C)
    state.policies.weights.w = W.clone()
    return state


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_dafa_step_scales_each_class_radius_and_step_and_weights_the_ce(repo_root, compiled, one_thread):
    # PGD-AT form, one step from x: |delta| = w_y alpha on every pixel (alpha < eps)
    state = _dafa_state(repo_root, "pgd_at_dafa", random_start=False, steps=1)
    x, y = batch()
    model0 = copy.deepcopy(state.model.inner)
    totals = run_step(state, x, y, compiled=compiled, class_eps=state.policies.epsilon.class_eps())
    x_adv = loss_input(state.model, x)
    step = (x_adv - x).abs().flatten(1)
    want = (W[y] * 2 / 255).float().unsqueeze(1).expand_as(step)
    assert torch.allclose(step, want, atol=1e-6)
    # the loss: w_y * CE(adversarial), per class
    ce = F.cross_entropy(model0(x_adv), y, reduction="none").double()
    want_loss = torch.zeros(C, dtype=torch.float64).index_add_(0, y, W[y] * ce)
    assert torch.allclose(totals.loss, want_loss, atol=1e-5)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_dafa_step_radius_caps_at_w_eps_and_trades_weights_only_the_ce(repo_root, compiled, one_thread):
    # TRADES form, 10 steps of w_y * 6/255 (> eps / 2): every pixel ends on the class's radius w_y eps
    state = _dafa_state(repo_root, "trades_dafa", alpha=6 / 255, start_std=0.01)
    x, y = batch()
    model0 = copy.deepcopy(state.model.inner)
    totals = run_step(state, x, y, compiled=compiled, class_eps=state.policies.epsilon.class_eps())
    x_adv = loss_input(state.model, x)
    radius = (x_adv - x).abs().flatten(1).max(dim=1).values
    assert torch.allclose(radius, (W[y] * 8 / 255).float(), atol=1e-6)
    # the loss: w_y CE(clean) + 6 KL(clean || adversarial), the KL unweighted
    clean, adv = model0(x), model0(x_adv)
    kl = F.kl_div(F.log_softmax(adv, 1), F.softmax(clean, 1), reduction="none").sum(1)
    per_sample = W[y] * F.cross_entropy(clean, y, reduction="none").double() + 6 * kl.double()
    want_loss = torch.zeros(C, dtype=torch.float64).index_add_(0, y, per_sample)
    assert torch.allclose(totals.loss, want_loss, atol=1e-5)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_the_step_sums_the_softmax_of_the_training_outputs_per_class(repo_root, compiled, one_thread):
    state = _dafa_state(repo_root, "trades_dafa")
    x, y = batch()
    model0 = copy.deepcopy(state.model.inner)
    totals = EpochTotals.zeros(C, x.device, soft=True)
    from study.train.step import EpochTables, TrainStep

    if compiled:
        torch._dynamo.reset()
    step = TrainStep(state, "default" if compiled else "off", backend="aot_eager" if compiled else None)
    target, start, noise = step.draws(x, y)
    w_nat, w_bndy = (w.float() for w in state.policies.weights.weights())
    tables = EpochTables(state.policies.epsilon.class_eps().float(), w_nat, w_bndy,
                         state.policies.loss.class_beta().float())
    state.model.train()
    step.fn(x, y, target, start, noise, tables, torch.tensor(0.5), totals)
    x_adv = loss_input(state.model, x)
    sums, _ = soft_confusion(torch.softmax(model0(x_adv), 1), y, C)
    assert torch.allclose(totals.soft.view(C, C), sums, atol=1e-6)
    assert torch.allclose(totals.stats(1).train_soft_confusion.sum(1), totals.count)


def test_dafa_weights_survive_a_checkpoint_and_resume(tmp_path, ci_params, synthetic_splits, one_thread):
    """Weights computed after epoch 1 (warm-up of a 2-epoch run) are in checkpoint.pt; a run
    stopped there and resumed trains epoch 2 with them, as an uninterrupted run does."""
    runs = {r.config["method"]: r for r in plan_runs(ci_params) if "mitigation" in r.groups}
    cfg = copy.deepcopy(runs["trades_dafa"].config)
    cfg.update(epochs=2, train_per_class=8, epoch_eval={**cfg["epoch_eval"], "per_class": 2})
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train_run(cfg, synthetic_splits, straight, device="cpu", progress=False)
    train_run(cfg, synthetic_splits, resumed, device="cpu", progress=False, stop_after=1)
    saved = load_torch(resumed / "checkpoint.pt")["policies"]["weights"]["w"]
    assert saved is not None and float(saved.mean()) == pytest.approx(1.0) and not torch.allclose(
        saved, torch.ones_like(saved))
    train_run(cfg, synthetic_splits, resumed, device="cpu", progress=False)
    a, b = pd.read_csv(straight / "epochs.csv"), pd.read_csv(resumed / "epochs.csv")
    pd.testing.assert_frame_equal(a, b)
    second = b[b["epoch"] == 2].sort_values("class")
    assert torch.allclose(torch.tensor(second["weight"].to_numpy()), saved, atol=1e-6)
    assert torch.allclose(torch.tensor(second["epsilon"].to_numpy()), saved * cfg["method_config"]["adversary"]["eps"],
                          atol=1e-6)
    assert (a[a["epoch"] == 1]["weight"] == 1).all()


# ------------------------------------------------------------------------------ TRIX

def test_trix_targets_exactly_the_samples_weighted_below_the_batch_mean():
    # clean logits log P[y]: the batch's class-mean softmax is P, its DAFA weights W
    y = torch.tensor([0, 0, 1, 2])
    logits = torch.log(P[y]).float()
    # per-sample weights [1.36, 1.36, 0.60, 1.04], mean 1.09: classes 1 and 2 are attacked towards a target
    assert trix_targeted(logits, y, C).tolist() == [False, False, True, True]
    y = torch.tensor([0, 1, 2, 0, 1, 2])   # balanced: mean 1.0, only class 1 (0.60)
    assert trix_targeted(torch.log(P[y]).float(), y, C).tolist() == [False, True, False, False, True, False]
    y = torch.zeros(4, dtype=torch.long)   # one class: every weight is the mean, none below it
    assert not trix_targeted(torch.log(P[y]).float(), y, C).any()


def test_trix_draws_a_target_other_than_the_label_for_every_sample(repo_root):
    policies = build_policies(_typed(paper_method(repo_root, "trades_trix")), 10, 10, torch.full((10,), 10))
    y = torch.arange(1000) % 10
    target = policies.targets.sample(y, torch.Generator().manual_seed(0))
    assert (target != y).all() and set(target.tolist()) == set(range(10))


def _first_attack_point(probe: Probe, x: torch.Tensor) -> torch.Tensor:
    """The first point the attack forwarded (eval mode, not the clean batch): x + the start."""
    return next(xi for training, xi, _ in probe.records if not training and not torch.equal(xi, x))


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_trix_step_descends_ce_to_the_target_for_strong_classes_and_ascends_the_kl_for_the_rest(
        repo_root, compiled, one_thread):
    state = _dafa_state(repo_root, "trades_trix", steps=1, start_std=0.01)
    x, y = batch()
    model0 = copy.deepcopy(state.model.inner)
    target = (y + 1) % C
    # the split of the model's clean batch (the split itself: the test above)
    targeted = trix_targeted(model0(x).detach(), y, C)
    assert targeted.any() and not targeted.all()
    totals = run_step(state, x, y, compiled=compiled, class_eps=state.policies.epsilon.class_eps(), target=target)
    start = _first_attack_point(state.model, x)
    point = start.clone().requires_grad_(True)
    logits, clean = model0(point), model0(x).detach()
    losses = torch.where(targeted, F.cross_entropy(logits, torch.where(targeted, target, y), reduction="none"),
                         F.kl_div(F.log_softmax(logits, 1), F.softmax(clean, 1), reduction="none").sum(1))
    (grad,) = torch.autograd.grad(losses.sum(), point)
    sign = torch.where(targeted, -1.0, 1.0).view(-1, 1, 1, 1)
    w = W[y].float().view(-1, 1, 1, 1)
    want = torch.minimum(torch.maximum(start + sign * w * 2 / 255 * grad.sign() - x, -w * 8 / 255), w * 8 / 255)
    assert torch.allclose(loss_input(state.model, x) - x, want, atol=1e-6)
    assert totals.count.sum() == 6


# ------------------------------------------------------------------------------ FAAL

def _cvxpy_weights(a: torch.Tensor, radius: float) -> torch.Tensor:
    """FAAL.py's problem as it writes it, solved by cvxpy (the reference solver)."""
    import cvxpy as cp
    import numpy as np

    c = a.shape[0]
    p = cp.Variable(c, nonneg=True)
    problem = cp.Problem(cp.Maximize(a.numpy() @ p),
                         [cp.sum(p) == 1, cp.sum(cp.kl_div(np.full(c, 1 / c), p)) <= radius])
    problem.solve(solver=cp.CLARABEL)
    return torch.tensor(p.value)


def test_faal_weights_of_two_classes_are_the_hand_solved_ball_boundary():
    # C = 2: the constraint binds at p (1 - p) = exp(-2 r) / 4, the larger share on the larger margin
    p = faal_class_weights(torch.tensor([0.3, -0.2]), 0.5)
    want = (1 + (1 - torch.exp(torch.tensor(-1.0, dtype=torch.float64))).sqrt()) / 2   # 0.897530...
    assert torch.allclose(p, torch.stack([want, 1 - want]), atol=1e-9)
    assert float(p[0]) == pytest.approx(0.8975302, abs=1e-6)


@pytest.mark.parametrize("radius", [0.5, 1.0, 0.05])
def test_faal_closed_form_matches_cvxpy_on_fixed_batches(radius):
    g = torch.Generator().manual_seed(3)
    for _ in range(4):
        logits = 3 * torch.randn(128, 10, generator=g)
        y = torch.randint(0, 10, (128,), generator=g)
        y[y == 7] = 2   # class 7 absent from the batch: a_7 = 0
        a = class_margins(logits, y, 10)
        assert a[7] == 0
        p = faal_class_weights(a, radius)
        assert float(p.sum()) == pytest.approx(1.0) and float(kl_to_uniform(p)) == pytest.approx(radius, abs=1e-9)
        ref = _cvxpy_weights(a, radius)
        assert torch.allclose(p, ref, atol=1e-4), (p, ref)
        assert float(a @ p) >= float(a @ ref) - 1e-6


def test_faal_weights_are_uniform_where_every_class_margin_is_equal_or_the_ball_is_a_point():
    assert torch.allclose(faal_class_weights(torch.full((10,), 0.4), 0.5), torch.full((10,), 0.1, dtype=torch.float64))
    assert torch.allclose(faal_class_weights(torch.arange(10.0), 0.0), torch.full((10,), 0.1, dtype=torch.float64),
                          atol=1e-12)


def test_faal_margins_are_the_top_other_minus_the_true_probability():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.6, 0.3, 0.1]]))
    # sample 0 (class 0): 0.3 - 0.5; sample 1 (class 1): 0.1 - 0.8; sample 2 (class 0): 0.3 - 0.6;
    # class 2 has no sample
    a = class_margins(logits, torch.tensor([0, 1, 0]), C)
    assert torch.allclose(a, torch.tensor([-0.2 - 0.3, -0.7, 0.0], dtype=torch.float64), atol=1e-6)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_faal_step_weights_each_sample_by_c_times_its_class_dro_weight(repo_root, compiled, one_thread):
    model = linear_model()
    state = step_state(paper_method(repo_root, "faal_at", random_start=False), model, C)
    x, y = batch()
    model0 = copy.deepcopy(model.inner)
    totals = run_step(state, x, y, compiled=compiled)
    adv = model0(loss_input(model, x)).detach()
    p = _cvxpy_weights(class_margins(adv, y, C), 0.5)
    ce = F.cross_entropy(adv, y, reduction="none").double()
    want = torch.zeros(C, dtype=torch.float64).index_add_(0, y, C * p[y] * ce)
    assert torch.allclose(totals.loss, want, atol=1e-4)
    assert not torch.allclose(p, torch.full((C,), 1 / C, dtype=torch.float64), atol=1e-2)   # weights that matter


# ------------------------------------------------------------------------------ WAT

def test_wat_hedge_weights_from_the_summed_validation_costs(repo_root):
    import math

    from study.config.requirements import validation_readers

    method = _typed(paper_method(repo_root, "trades_wat"))
    policies = build_policies(method, C, 10, torch.full((C,), 10))
    assert validation_readers(method) == ["weights type 'wat' (WAT's Hedge weights)"]
    # before the first update every entry is 1: each class trains on 1 + 1 = 2 x the TRADES loss
    assert torch.equal(policies.weights.weights()[0], torch.full((C,), 2.0, dtype=torch.float64))
    first = torch.tensor([1.0, 2.0, 0.5, 1.0], dtype=torch.float64)   # C classes, then the whole split
    policies.update(EpochStats(1, *(torch.ones(C),) * 2, torch.zeros(C, C), val_cost=first))
    e = [math.exp(0.1 * c) for c in (1.0, 2.0, 0.5, 1.0)]
    w = [3 * v / sum(e) for v in e]                                  # 0.739570, 0.817356, 0.703504, 0.739570
    want = torch.tensor([w[0] + w[3], w[1] + w[3], w[2] + w[3]], dtype=torch.float64)
    assert torch.allclose(policies.weights.weights()[0], want) and torch.allclose(policies.weights.weights()[1], want)
    assert float(want[1]) == pytest.approx(1.556925, abs=1e-6)
    policies.update(EpochStats(2, *(torch.ones(C),) * 2, torch.zeros(C, C),
                               val_cost=torch.tensor([0.0, 0.0, 2.0, 0.0], dtype=torch.float64)))
    e = [math.exp(0.1 * c) for c in (1.0, 2.0, 2.5, 1.0)]            # summed over the epochs
    w = [3 * v / sum(e) for v in e]
    want = torch.tensor([w[0] + w[3], w[1] + w[3], w[2] + w[3]], dtype=torch.float64)
    assert torch.allclose(policies.weights.weights()[0], want)
    fresh = build_policies(_typed(paper_method(repo_root, "trades_wat")), C, 10, torch.full((C,), 10))
    fresh.load_state_dict(policies.state_dict())
    assert torch.allclose(fresh.weights.weights()[0], want)


def test_wat_validation_costs_are_the_class_means_of_the_trades_loss(repo_root):
    from study.config.types import Adversary
    from study.train.records import trades_validation_cost

    model = linear_model().inner.eval()
    g = torch.Generator().manual_seed(5)
    images = torch.randint(0, 256, (9, 1, 1, 12), generator=g, dtype=torch.uint8)
    labels = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, 2])
    x = images.float() / 255
    ce = F.cross_entropy(model(x), labels, reduction="none").detach().double()
    # eps 0: the adversarial input is the clean one, the KL 0, the cost the class mean of CE
    still = Adversary(eps=0.0, alpha=0.0, steps=3, start_std=0.001)
    cost = trades_validation_cost(model, images, labels, still, 6.0, C, torch.device("cpu"), 0, batch_size=4)
    want = torch.stack([ce[:4].mean(), ce[4:6].mean(), ce[6:].mean(), ce.mean()])
    assert torch.allclose(cost, want, atol=1e-6)
    # under the attack the KL term adds to it, for every class
    attacked = Adversary(eps=8 / 255, alpha=2 / 255, steps=5, start_std=0.001)
    cost = trades_validation_cost(model, images, labels, attacked, 6.0, C, torch.device("cpu"), 0, batch_size=4)
    assert (cost > want + 1e-4).all()


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_wat_step_weights_both_trades_terms_by_the_class_and_the_extra_entry(repo_root, compiled, one_thread):
    model = linear_model()
    state = step_state(paper_method(repo_root, "trades_wat", start_std=0.01), model, C)
    state.policies.weights.cost = torch.tensor([1.0, 2.0, 0.5, 1.0], dtype=torch.float64)
    w = state.policies.weights.weights()[0]   # [1.479140, 1.556925, 1.443074]
    x, y = batch()
    model0 = copy.deepcopy(model.inner)
    totals = run_step(state, x, y, compiled=compiled)
    clean, adv = model0(x), model0(loss_input(model, x))
    kl = F.kl_div(F.log_softmax(adv, 1), F.softmax(clean, 1), reduction="none").sum(1)
    per_sample = w[y] * (F.cross_entropy(clean, y, reduction="none").double() + 6 * kl.double())
    assert torch.allclose(totals.loss, torch.zeros(C, dtype=torch.float64).index_add_(0, y, per_sample), atol=1e-5)


def test_wat_run_trains_its_first_epoch_on_twice_trades_then_on_the_validation_hedge(
        tmp_path, ci_params, synthetic_splits, one_thread):
    runs = {r.config["method"]: r for r in plan_runs(ci_params) if "mitigation" in r.groups}
    cfg = copy.deepcopy(runs["trades_wat"].config)
    cfg.update(epochs=2, train_per_class=8, epoch_eval={**cfg["epoch_eval"], "per_class": 2})
    train_run(cfg, synthetic_splits, tmp_path / "wat", device="cpu", progress=False)
    epochs = pd.read_csv(tmp_path / "wat" / "epochs.csv")
    assert (epochs[epochs["epoch"] == 1]["weight"] == 2.0).all()
    second = epochs[epochs["epoch"] == 2]["weight"]
    assert second.nunique() > 1 and not (second == 2.0).all()
    cost = load_torch(tmp_path / "wat" / "checkpoint.pt")["policies"]["weights"]["cost"]
    assert cost.shape == (11,) and (cost > 0).all()
