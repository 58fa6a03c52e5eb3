"""The power behind "needs >= N seeds" (study.reproduction.power): it is the verdict rule's own
rate of agreeing at the published truth, it rises with seeds, N is the first seed count reaching
80%, and a row that cannot agree with its seeds says so and is counted apart."""

from __future__ import annotations

import numpy as np
import pytest

from study.published import BY_ID
from study.reproduction.comparison import Row
from study.reproduction.power import TARGET, families, power, seeds_needed, truth_of
from study.reproduction.render import NEEDS_SEEDS, verdict_summary
from study.reproduction.statistics import accuracy_estimate, difference_estimate
from study.reproduction.verdicts import AGREES


@pytest.mark.parametrize(("published_id", "difference"), [("cfa_at_best_autoattack_worst", False),
                                                          ("cfa_at_cfa_best_autoattack_worst", True),
                                                          ("cfa_trades_cfa_best_autoattack_mean", True)])
def test_seeds_needed_is_the_first_seed_count_whose_power_reaches_80_percent(published_id, difference):
    truth = truth_of(BY_ID[published_id], difference)
    curve = [power(truth, k, 1000, True) for k in range(1, 21)]
    assert all(b >= a - 1e-9 for a, b in zip(curve[1:], curve[2:], strict=False))  # rises from 2 seeds on
    needed = seeds_needed(truth, 1000, True)
    assert needed is not None and curve[needed - 1] >= TARGET and all(p < TARGET for p in curve[:needed - 1])


@pytest.mark.parametrize("seeds", [2, 3, 5])
def test_the_power_is_the_rules_rate_of_agreeing_at_the_published_truth(seeds):
    """Per-seed values drawn about the published truth with its published sd, through the report's
    interval and verdict: the share that agrees is the computed power (within simulation noise)."""
    rng = np.random.default_rng(seeds)
    checks = [("cfa_at_best_autoattack_worst", False), ("cfa_at_cfa_best_autoattack_worst", True)]
    for published_id, difference in checks:
        p = BY_ID[published_id]
        truth = truth_of(p, difference)
        agree, studies = 0, 1500
        for _ in range(studies):
            if difference:
                ours = truth.value + truth.effect + rng.normal(0, truth.sd, seeds)
                theirs = truth.value + rng.normal(0, truth.control_sd, seeds)
                estimate = difference_estimate(ours, 1000, theirs, 1000, True, "worst")
                row = Row(p, setting="simulated", estimate=estimate, seeds=seeds, difference_of="m minus c")
            else:
                estimate = accuracy_estimate(truth.value + rng.normal(0, truth.sd, seeds), 1000, True, "worst")
                row = Row(p, setting="simulated", estimate=estimate, seeds=seeds)
            agree += row.verdict_word == AGREES
        computed = power(truth, seeds, 1000, True)
        print(f"{published_id}, {seeds} seeds: agrees {agree / studies:.3f}, computed power {computed:.3f}")
        assert agree / studies == pytest.approx(computed, abs=0.06)


def test_one_seed_at_the_published_worst_class_needs_more_seeds_and_is_counted_apart():
    """The worst class of CFA's AT at exactly its published value, one seed on the whole test set:
    the interval (one seed assumes a seed sd of 2.4 points) is wider than the band and its margin,
    so the row could never agree; it says how many seeds it needs."""
    p = BY_ID["cfa_at_best_autoattack_worst"]
    estimate = accuracy_estimate(np.array([p.number]), 1000, True, "worst")
    row = Row(p, setting="simulated", estimate=estimate, seeds=1, test_images=1000)
    needed = seeds_needed(truth_of(p, False), 1000, True)
    assert row.power is not None and row.power < 0.05
    assert row.verdict == f"needs ≥ {needed} seeds" and not row.compared and row.needs_seeds
    at_needed = Row(p, setting="simulated", estimate=accuracy_estimate(
        p.number + p.sd * np.linspace(-1, 1, needed), 1000, True, "worst"), seeds=needed, test_images=1000)
    assert at_needed.power >= TARGET and at_needed.verdict == AGREES
    text = verdict_summary([row])
    assert "0 compared" in text and "0 inconclusive" in text and f"1 {NEEDS_SEEDS}" in text


def test_every_family_with_a_published_number_is_priced():
    """Each paper's value, difference and claim rows with a number, by statistic; a subset adds the
    whole test set's count."""
    on_whole = families(1000)
    rows = sum(len(f.needed) for f in on_whole)
    numbered = sum(1 for p in BY_ID.values() if not p.context and truth_of(p, False) is not None) + sum(
        1 for p in BY_ID.values() if p.baseline and not p.direction)
    assert rows == numbered and all(not f.needed_whole for f in on_whole)
    # at 100 images per class every CIFAR-10 row is on a subset (CIFAR-100's are on their whole set)
    on_subset = sum(1 for p in BY_ID.values() if not p.context and truth_of(p, False) is not None
                    and p.recipe.test_per_class > 100) + sum(
        1 for p in BY_ID.values() if p.baseline and not p.direction and p.recipe.test_per_class > 100)
    assert sum(len(f.needed_whole) for f in families(100)) == on_subset > 0
