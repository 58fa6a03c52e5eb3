"""The report's verdicts are calibrated: simulated studies, with fixed seeds, run through the
report's own statistics (study.reproduction.statistics) and verdicts (Row.verdict), not a copy.

A simulated arm: CFA's Table 1 row as the truth (mean and worst class; cat the worst class, the
other nine spread evenly above it); each seed moves every class by a shared shift and each class
by its own, then draws each class's test images (binomial), so that the measured mean and worst
class vary over seeds by the published sds (which are spreads of measured values, test-image
noise included). Each seed draws its test outcomes afresh: the seeds disagree image by image, as
models trained with other seeds do.

Rates (printed with `pytest -s`): at no true effect a difference row with a published nonzero
effect agrees at most 5% of the time; random class orders agree at most 5%; a class that is not
the weakest agrees as the weakest at most 5%; at the published effect, with 5 seeds and CIFAR-10's
1,000 test images per class, the rows of CFA's claim (each +CFA method minus its control, best
checkpoint, AutoAttack, mean and worst class) agree at least 80% of the time."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
from scipy.stats import rankdata, spearmanr

from study.data.classes import CIFAR10_CLASS_NAMES
from study.published import BY_ID, PUBLISHED
from study.reproduction.comparison import Row
from study.reproduction.statistics import (
    accuracy_estimate,
    bootstrap_classes,
    crossfit_worst,
    difference_estimate,
    rank_correlation,
    rho_interval,
    weakest_estimate,
)
from study.reproduction.verdicts import AGREES

CAT = CIFAR10_CLASS_NAMES.index("cat")
AIRPLANE, BIRD, DOG = (CIFAR10_CLASS_NAMES.index(c) for c in ("airplane", "bird", "dog"))
#: the difference rows CFA's claim rests on: each +CFA method minus its control, best checkpoint, AutoAttack
# CFA Table 1's differences (the later papers' rows have smaller seeds-to-effect ratios, and
# the TRIX authors' table is a rerun: the power claim is CFA's)
CLAIM_ROWS = tuple(p.id for p in PUBLISHED if p.baseline is not None and p.checkpoint == "best"
                   and p.recipe.kind == "autoattack" and p.paper == "wei2023")
#: the seed sd of the issue's one-seed case (issue 42): each class moves by 2 points from seed to
#: seed before its test images are drawn, so the worst class's measured sd is 2.4 points at 1,000 images
SEED_SD = 0.02


def _profile(mean: float, worst: float, cluster: bool = False) -> np.ndarray:
    """Ten class accuracies: cat at `worst`, the others evenly spread from 8 points above it, at
    `mean`; `cluster`: bird and dog 1 and 2 points above cat instead (three classes within 2 points)."""
    out = np.empty(10)
    out[CAT] = worst
    near = [BIRD, DOG] if cluster else []
    out[near] = worst + np.array([0.01, 0.02])[:len(near)]
    rest = [c for c in range(10) if c != CAT and c not in near]
    steps = np.linspace(0.0, 1.0, len(rest))
    spread = (10 * mean - out[[CAT, *near]].sum() - len(rest) * (worst + 0.08)) / steps.sum()
    out[rest] = worst + 0.08 + spread * steps
    return out


def _table(rng: np.random.Generator, truth: np.ndarray, seeds: int, n: int, shared_sd: float,
           class_sd: float) -> pd.DataFrame:
    """Class-wise records (the table's columns that the statistics read) of one simulated arm."""
    rows = []
    for seed in range(seeds):
        acc = np.clip(truth + rng.normal(0.0, shared_sd) + rng.normal(0.0, class_sd, truth.size), 0.0, 1.0)
        correct = rng.binomial(n, acc)
        rows += [{"seed": seed, "class": c, "class_name": CIFAR10_CLASS_NAMES[c], "n": n, "acc": correct[c] / n}
                 for c in range(truth.size)]
    return pd.DataFrame(rows)


def _measured(rng: np.random.Generator, truth: np.ndarray, studies: int, seeds: int, n: int, shared_sd: float,
              class_sd: float) -> np.ndarray:
    """The measured class accuracies (studies x seeds x classes) of `studies` simulated arms, as
    `_table` draws one: each seed moves every class by a shared shift and each by its own, then
    draws each class's test images afresh (the seeds disagree image by image)."""
    shape = (studies, seeds, truth.size)
    acc = truth + rng.normal(0.0, shared_sd, (studies, seeds, 1)) + rng.normal(0.0, class_sd, shape)
    return rng.binomial(n, np.clip(acc, 0.0, 1.0)) / n


def _arm(rng: np.random.Generator, mean_row: str, worst_row: str, studies: int, seeds: int, n: int,
         shift: tuple[float, float] = (0.0, 0.0), seed_sd: float | None = None, cluster: bool = False,
         lift: float = 0.0) -> np.ndarray:
    """Arms whose truth is a published row pair (its mean and worst class, moved by `shift`) and
    whose measured values vary over seeds as the published sds say. A published sd is the spread of
    measured values on the fixed test set, test-image noise included, so the shared and per-class
    shifts make up what the binomial draw of the test images leaves: mean sd^2 = shared^2 + class^2
    / 10 + its binomial variance, worst sd^2 = shared^2 + class^2 + its binomial variance.
    `seed_sd`: instead, each class moves by this sd over seeds (no shared shift). `lift`: the
    clustered runners-up (bird and dog) raised by this much, the worst class (cat) left where it is."""
    mean, worst = BY_ID[mean_row], BY_ID[worst_row]
    truth = _profile(mean.value + shift[0], worst.value + shift[1], cluster)
    truth[[BIRD, DOG]] += lift
    if seed_sd is not None:
        return _measured(rng, truth, studies, seeds, n, 0.0, seed_sd)
    binomial_mean = float(np.mean(truth * (1 - truth) / n)) / truth.size
    binomial_worst = float(truth[CAT] * (1 - truth[CAT]) / n)
    mean_var, worst_var = max(mean.sd**2 - binomial_mean, 0.0), max(worst.sd**2 - binomial_worst, 0.0)
    class_var = max(worst_var - mean_var, 0.0) * 10 / 9
    shared = math.sqrt(max(mean_var - class_var / 10, 0.0))
    return _measured(rng, truth, studies, seeds, n, shared, math.sqrt(class_var))


def plain_minimum(acc: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The worst class as the minimum over classes of each seed: biased low where classes crowd at
    the bottom (the estimator the report used before `crossfit_worst`; the tests show it fails)."""
    return acc.min(axis=1), n[:, 0]


def _per_seed(measured: np.ndarray, n: int, statistic: str,
              worst_of: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] = crossfit_worst,
              ) -> tuple[np.ndarray, int]:
    """(values, test samples) per seed of each study, as statistics.per_seed gives them: the mean
    over the classes on all their test images, or the worst class (`worst_of`, the report's
    cross-fitted estimate unless a test says otherwise)."""
    if statistic == "worst":
        counts = np.full(measured.shape[1:], float(n))
        return np.stack([worst_of(study, counts)[0] for study in measured]), n
    return measured.mean(axis=2), n * measured.shape[2]


def _pair_ids(published_id: str) -> tuple[str, str]:
    stem = published_id.rsplit("_", 1)[0]
    return f"{stem}_mean", f"{stem}_worst"


def difference_agreement(published_id: str, effect: float, seeds: int, n: int, studies: int, seed: int = 0,
                         seed_sd: float | None = None, cluster: bool = False, lift: float = 0.0,
                         worst_of: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] = crossfit_worst,
                         ) -> tuple[float, float]:
    """(in direction, in size): the shares of simulated studies whose difference row agrees in its
    direction and in its size; the control as its published row, the method at the control plus
    `effect` times the published difference, its clustered runners-up raised by `lift`."""
    p = BY_ID[published_id]
    control, method = _pair_ids(p.baseline), _pair_ids(p.id)
    shift = tuple(effect * (BY_ID[m].value - BY_ID[c].value) for m, c in zip(method, control, strict=True))
    statistic = "worst" if p.statistic == "worst" else "mean"
    rng = np.random.default_rng(seed)
    # the method: the control's truth, shifted
    ours, size_n = _per_seed(_arm(rng, *control, studies, seeds, n, shift, seed_sd, cluster, lift), n, statistic,
                             worst_of)
    theirs, _ = _per_seed(_arm(rng, *control, studies, seeds, n, seed_sd=seed_sd, cluster=cluster), n, statistic,
                          worst_of)
    whole = n >= p.recipe.test_per_class
    direction = size = 0
    for a, b in zip(ours, theirs, strict=True):
        estimate = difference_estimate(a, size_n, b, size_n, whole, statistic)
        row = Row(p, setting="simulated", estimate=estimate, seeds=seeds, difference_of="method minus control")
        direction += row.direction == AGREES
        size += row.verdict_word == AGREES
    return direction / studies, size / studies


def value_agreement(published_id: str, offset: float, seeds: int, n: int, studies: int, seed: int = 0,
                    seed_sd: float | None = None) -> float:
    """The share of simulated studies whose value row agrees, the truth `offset` from the published value."""
    p = BY_ID[published_id]
    shift = (offset, 0.0) if p.statistic == "mean" else (0.0, offset)
    rng = np.random.default_rng(seed)
    values, size_n = _per_seed(_arm(rng, *_pair_ids(p.id), studies, seeds, n, shift, seed_sd), n, p.statistic)
    whole = n >= p.recipe.test_per_class
    return float(np.mean([Row(p, setting="simulated", seeds=seeds,
                              estimate=accuracy_estimate(v, size_n, whole, p.statistic)).verdict == AGREES
                          for v in values]))


def weakest_agreement(truth: np.ndarray, seeds: int, n: int, class_sd: float, studies: int, seed: int = 7) -> float:
    """The share of simulated studies in which "cat is the weakest" agrees: each class moves by
    `class_sd` over seeds around `truth`; the report's seed-aware bootstrap of each study's classes."""
    p = BY_ID["xu_standard_cat_weakest_clean"]
    rng = np.random.default_rng(seed)
    agree = 0
    for acc in _measured(rng, truth, studies, seeds, n, 0.0, class_sd):
        _, draws = bootstrap_classes(acc, np.full(acc.shape, float(n)))
        estimate = weakest_estimate(draws, CAT, seeds)
        agree += Row(p, setting="simulated", estimate=estimate, seeds=seeds).verdict == AGREES
    return agree / studies


@pytest.mark.parametrize("published_id", ["cfa_at_cfa_best_autoattack_worst", "cfa_at_cfa_best_autoattack_mean"])
@pytest.mark.parametrize(("seeds", "n", "seed_sd", "cluster"),
                         [(3, 1000, None, False), (1, 100, None, False), (1, 1000, None, False),
                          (1, 1000, SEED_SD, False), (3, 1000, None, True), (3, 1000, SEED_SD, True)])
def test_no_true_effect_rarely_agrees_with_a_published_effect(published_id, seeds, n, seed_sd, cluster):
    """In direction or in size. One seed cannot show its seed sd: at 2 points per class (the issue's
    case) its interval must carry the one assumed; `cluster`: the arms' bottom three classes lie
    within 2 points, so that the worst class is now one, now another of them."""
    direction, size = difference_agreement(published_id, 0.0, seeds, n, studies=1000, seed_sd=seed_sd,
                                           cluster=cluster)
    print(f"false agreement, {published_id}, {seeds} seeds, {n} per class, seed sd {seed_sd}, "
          f"clustered {cluster}: in direction {direction:.3f}, in size {size:.3f}")
    assert direction <= 0.05 and size <= 0.05


@pytest.mark.parametrize("effect", [0.5, 2.0])
def test_half_or_twice_the_published_effect_rarely_agrees_in_size(effect):
    """At 5 seeds and 1,000 test images per class: agreement in size is agreement within a factor 2."""
    for published_id in CLAIM_ROWS:
        direction, size = difference_agreement(published_id, effect, 5, 1000, studies=400, seed=2)
        print(f"{effect} times the published effect, {published_id}, 5 seeds, 1000 per class: "
              f"in direction {direction:.3f}, in size {size:.3f}")
        assert size <= 0.20, published_id


def test_the_published_effect_with_five_seeds_on_the_whole_test_set_agrees():
    """In direction at least 80% of the time; in size at least half of the time (a factor 2 is what
    5 seeds resolve of CFA's worst-class gains)."""
    assert len(CLAIM_ROWS) == 6  # AT, TRADES, FAT + CFA; mean and worst class
    for published_id in CLAIM_ROWS:
        direction, size = difference_agreement(published_id, 1.0, 5, 1000, studies=400, seed=1)
        print(f"power, {published_id}, 5 seeds, 1000 per class: in direction {direction:.3f}, in size {size:.3f}")
        assert direction >= 0.80 and size >= 0.50, published_id


@pytest.mark.parametrize("published_id", ["cfa_at_best_autoattack_worst", "cfa_at_best_autoattack_mean"])
@pytest.mark.parametrize(("seeds", "seed_sd"), [(1, SEED_SD), (1, None), (3, None), (5, None)])
@pytest.mark.parametrize("side", [1, -1])
def test_a_value_two_points_outside_the_published_band_rarely_agrees(published_id, seeds, seed_sd, side):
    """The value rule's margin is 2 points beyond the band (mean +- 1.96 sd): a truth there is what
    a row must tell from the published value. Written out here, not read from verdicts.VALUE_MARGIN,
    so that a wider margin in the code fails this test."""
    p = BY_ID[published_id]
    rate = value_agreement(published_id, side * (1.96 * p.sd + 0.02), seeds, 1000, studies=600, seed_sd=seed_sd)
    print(f"false agreement, {published_id} {'+' if side > 0 else '-'}(band + 2 points), {seeds} seeds, "
          f"seed sd {seed_sd}: {rate:.3f}")
    assert rate <= 0.05


@pytest.mark.parametrize(("seeds", "studies"), [(1, 800), (3, 300)])
def test_random_class_orders_rarely_agree_with_the_published_ranking(seeds, studies):
    p = BY_ID["xu_pgd_at_rank_pgd"]
    rng = np.random.default_rng(seeds)
    agree = 0
    for _ in range(studies):
        truth = rng.permutation(np.linspace(0.2, 0.6, 10))  # an order unrelated to the published one
        estimate = rank_correlation(_table(rng, truth, seeds, 100, 0.0, 0.01), dict(p.order))
        agree += Row(p, setting="simulated", estimate=estimate, seeds=seeds).verdict == AGREES
    print(f"false agreement, random class orders, {seeds} seeds, 100 per class: {agree / studies:.3f}")
    assert agree / studies <= 0.05


@pytest.mark.parametrize(("gap", "seeds", "n"), [(0.01, 3, 1000), (0.02, 1, 100), (0.0, 1, 100)])
def test_a_class_that_is_not_the_weakest_rarely_agrees_as_the_weakest(gap, seeds, n):
    """Cat `gap` above the weakest class (airplane); at gap 0 the two tie and cat is not *the* weakest."""
    truth = np.linspace(0.5, 0.9, 10)
    truth[CAT] = truth[AIRPLANE] + gap
    rate = weakest_agreement(truth, seeds, n, 0.01, studies=400)
    print(f"false agreement, cat {gap:.2f} above the weakest, {seeds} seeds, {n} per class: {rate:.3f}")
    assert rate <= 0.05


@pytest.mark.parametrize(("gap", "seeds", "bird", "studies"),
                         [(0.0, 1, None, 4000), (0.01, 1, None, 600), (0.0, 3, 0.02, 600), (0.01, 3, 0.02, 600)])
def test_one_seed_or_a_clustered_bottom_rarely_agrees_as_the_weakest(gap, seeds, bird, studies):
    """Each class moves by 2 points over seeds (the issue's case), which one seed cannot show: cat
    tied with airplane, or 1 point above it, the other classes from 10 points up; `bird`: bird that
    far above airplane, so that the bottom three classes lie within 2 points. The tie at one seed is
    the hardest case: the seed sd the bootstrap assumes (2.04 points besides the test noise) is the
    simulated one (2 points), so its rate sits at the rule's 5% (4,000 studies: a binomial sd of 0.35
    points at a rate of 5%)."""
    truth = np.linspace(0.6, 0.9, 10)
    truth[AIRPLANE], truth[CAT] = 0.5, 0.5 + gap
    if bird is not None:
        truth[BIRD] = 0.5 + bird
    rate = weakest_agreement(truth, seeds, 1000, SEED_SD, studies)
    print(f"false agreement, cat {gap:.2f} above the weakest, bird {bird}, {seeds} seeds, 1000 per class, "
          f"seed sd {SEED_SD}: {rate:.4f}")
    # not above 5% by more than the simulation's own noise (a one-sided 5% test of the rate)
    assert rate <= 0.05 + 1.645 * math.sqrt(0.05 * 0.95 / studies)


#: the asymmetric cluster: the control's bottom three classes within 2 points (cat, then bird and
#: dog 1 and 2 points above it); the method lifts the two runners-up by CFA's published worst-class
#: gain of AT + CFA over AT and leaves cat, the true worst class, where it was
ASYMMETRIC = "cfa_at_cfa_best_autoattack_worst"
LIFT = BY_ID["cfa_at_cfa_best_autoattack_worst"].number - BY_ID["cfa_at_best_autoattack_worst"].number


@pytest.mark.parametrize("n", [500, 1000])
@pytest.mark.parametrize("seeds", [1, 3, 5, 10])
def test_lifting_only_the_runners_up_rarely_agrees_that_the_worst_class_rose(seeds, n):
    """The worst class is unchanged, so "worst class raised" must not agree: the minimum of noisy
    class means is biased low, more in the crowded control than in the method, and more seeds do
    not remove that; the cross-fitted worst class is not."""
    direction, size = difference_agreement(ASYMMETRIC, 0.0, seeds, n, studies=600, seed=11, cluster=True,
                                           lift=LIFT)
    print(f"false agreement, runners-up lifted by {100 * LIFT:.1f} pts, {seeds} seeds, {n} per class: "
          f"in direction {direction:.3f}, in size {size:.3f}")
    assert direction <= 0.05 and size <= 0.05


def test_the_plain_minimum_fails_the_asymmetric_cluster():
    """The same study with the worst class as each seed's minimum: the test above would fail."""
    direction, _ = difference_agreement(ASYMMETRIC, 0.0, 10, 1000, studies=600, seed=11, cluster=True, lift=LIFT,
                                        worst_of=plain_minimum)
    print(f"false agreement of the plain minimum, 10 seeds, 1000 per class: in direction {direction:.3f}")
    assert direction > 0.05


@pytest.mark.parametrize(("seeds", "closeness"), [(1, 1.0), (1, 0.3), (5, 0.3), (5, 0.2)])
def test_the_ranking_interval_covers_the_true_rho(seeds, closeness):
    """Rho's interval holds the rho of the true class accuracies with the published order 93-97% of
    the time. The truth: a PGD-AT-like profile in the published order but not its ties (rho 0.96),
    its classes' spacing times `closeness` (0.3: neighbours within 1-3 points, so that noise
    scrambles the order and the observed rho falls below the truth); each class moves by its
    measured seed sd (the 2.4 points that one seed assumes, test noise included) over seeds. (At 5
    seeds and half the profile's spacing or more the order is measured without error nearly every
    time, and the interval covers it more often: test_a_clear_order_is_covered.)"""
    coverage = _rho_coverage(seeds, closeness, studies=1500)
    assert 0.93 <= coverage <= 0.97


@pytest.mark.parametrize("closeness", [1.0, 0.5])
def test_a_clear_order_is_covered(closeness):
    """At 5 seeds and the profile's spacing (or half of it) the order is measured without error
    nearly every time: the interval is then (nearly) the observed rho, which is the true one."""
    assert _rho_coverage(5, closeness, studies=300) >= 0.93


def _rho_coverage(seeds: int, closeness: float, studies: int) -> float:
    """The share of simulated studies whose rho interval (the report's bootstrap and interval, the
    permutation test left out: it does not move the interval) holds the true rho."""
    p = BY_ID["xu_pgd_at_rank_pgd"]
    order = dict(p.order)
    profile = np.array([0.50, 0.67, 0.25, 0.17, 0.22, 0.30, 0.45, 0.55, 0.60, 0.62])  # CIFAR-10's class order
    truth = profile.mean() + closeness * (profile - profile.mean())
    published = rankdata([order[c] for c in CIFAR10_CLASS_NAMES])
    true_rho = spearmanr(truth, published).statistic
    n = 1000
    class_sd = np.sqrt(0.024**2 - truth * (1 - truth) / n)
    rng = np.random.default_rng(5)
    covered = 0
    for study in range(studies):
        acc = rng.binomial(n, np.clip(truth + rng.normal(0.0, 1.0, (seeds, truth.size)) * class_sd, 0, 1)) / n
        observed, draws = bootstrap_classes(acc, np.full(acc.shape, float(n)), seed=study)
        _, lo, hi = rho_interval(observed, draws, published)
        covered += lo - 1e-9 <= true_rho <= hi + 1e-9  # a rank statistic: exact ties
    print(f"coverage of the true rho {true_rho:.3f}, closeness {closeness}, {seeds} seeds: {covered / studies:.3f}")
    return covered / studies


@pytest.mark.parametrize("seeds", [1, 5])
def test_the_probability_of_the_weakest_class_is_centred(seeds):
    """Cat 4 points below the next class, each class moving by its measured seed sd (2.4 points) over
    seeds: P(cat weakest) averages within 0.12 (1 seed) or 0.06 (5 seeds; the t widening of a few
    seeds' spread costs the rest) of the share of studies in which cat measures lowest, and not above
    it; at 5 seeds the claim agrees in at least 60% of studies. The draws that counted the test noise
    twice read it 0.10 low at 5 seeds and agreed in 38%."""
    truth = np.linspace(0.6, 0.9, 10)
    truth[CAT] = 0.56
    n, studies = 1000, 400
    class_sd = np.sqrt(np.maximum(0.024**2 - truth * (1 - truth) / n, 0.0))
    rng = np.random.default_rng(3)
    lowest, probability = 0, []
    for study in range(studies):
        acc = rng.binomial(n, np.clip(truth + rng.normal(0.0, 1.0, (seeds, truth.size)) * class_sd, 0, 1)) / n
        lowest += int(acc.mean(axis=0).argmin() == CAT)
        _, draws = bootstrap_classes(acc, np.full(acc.shape, float(n)), seed=study)
        probability.append(weakest_estimate(draws, CAT, seeds).value)
    share, mean = lowest / studies, float(np.mean(probability))
    power = float(np.mean(np.array(probability) >= 0.95))
    print(f"cat 4 points below, {seeds} seeds: measured lowest in {share:.3f}, mean P(cat weakest) {mean:.3f}, "
          f"agrees {power:.3f}")
    assert share - (0.12 if seeds == 1 else 0.06) <= mean <= share + 0.01
    if seeds == 5:
        assert power >= 0.6
