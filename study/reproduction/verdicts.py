"""The report's three verdicts, each calibrated, and the smallest difference a row could detect.

Every compared row reads *agrees*, *inconclusive* or *differs*:

- a value (a mean, a worst class, one class's accuracy): differs when our 95% interval excludes
  the published band (mean +- 1.96 sd over the paper's seeds); agrees when it meets the band and
  lies within `VALUE_MARGIN` of it, so that our runs could tell the published value from one that
  much outside its band (an equivalence test); otherwise inconclusive;
- a difference between a method and its control gets two verdicts, each with its own rule:
  its *direction* (`direction_verdict` with the published sign: agrees when our interval excludes
  0 on the published side, differs when it excludes 0 on the other; at no true effect each
  happens 2.5% of the time) and its *size* (`size_verdict`: differs when our interval excludes
  the published band; agrees when it meets the band and our one-sided 95% bounds (the 90%
  interval) lie within a factor `SIZE_RATIO` of the published difference, an equivalence test
  (two one-sided 5% tests) on the ratio; otherwise inconclusive). A true difference half the
  published one, or twice it, agrees in size at most 5% of the time;
- a class ranking: agrees when Spearman's rho with the published order is above what random
  class orders give in 95% of cases (a permutation test, p <= 0.05) and so is its whole seed-aware
  bootstrap interval (the order survives drawing the seeds and test images again, as a difference
  row's interval must exclude 0); differs when rho's interval lies at or below 0 (our order is
  unrelated to the published one or reversed); otherwise inconclusive;
- a claim of a direction (a method minus its control is above, or below, 0): agrees when our
  interval excludes 0 on the claimed side, differs when it excludes 0 on the other side, otherwise
  inconclusive; at no true effect each of the two happens 2.5% of the time;
- a claim about one named class ("cat is the weakest"): the probability, over a seed-aware
  bootstrap, that the named class is the weakest; agrees at >= 0.95, differs at <= 0.05.

`detectable`: the smallest true difference that a two-sided 5% test on the row's interval finds
with 80% power, (1.96 + 0.84) standard errors, the standard error read off the interval's width.
tests/unit/test_reproduction_calibration.py measures the false-agreement and power rates through
these functions."""

from __future__ import annotations

import math

AGREES, INCONCLUSIVE, DIFFERS = "agrees", "inconclusive", "differs"
VERDICTS = (AGREES, INCONCLUSIVE, DIFFERS)
Z95 = 1.96
Z_POWER80 = 0.8416
#: how close to the published band a value's interval must lie to agree: 2 points of accuracy
VALUE_MARGIN = 0.02
Z90 = 1.6449
#: how close to the published difference ours must be shown to be to agree in size: within a factor 2
SIZE_RATIO = 2.0
RANK_ALPHA = 0.05
WEAKEST_AGREES, WEAKEST_DIFFERS = 0.95, 0.05


def band(value: float, sd: float | None) -> tuple[float, float]:
    """The published value's band: mean +- 1.96 sd over the paper's seeds (the value where no sd)."""
    spread = Z95 * (sd or 0.0)
    return value - spread, value + spread


def detectable(lo: float, hi: float) -> float:
    """The smallest true difference a two-sided 5% test finds with 80% power, for an estimate with
    this 95% interval."""
    return (Z95 + Z_POWER80) * (hi - lo) / (2 * Z95)


def value_verdict(lo: float, hi: float, value: float, sd: float | None, margin: float = VALUE_MARGIN) -> str:
    """A value row's verdict: our interval [lo, hi] against the published value and its sd."""
    b_lo, b_hi = band(value, sd)
    if hi < b_lo or lo > b_hi:
        return DIFFERS
    if lo >= b_lo - margin and hi <= b_hi + margin:
        return AGREES
    return INCONCLUSIVE


def size_verdict(ours: float, lo: float, hi: float, value: float, sd: float | None) -> str:
    """A difference row's size verdict: our estimate `ours` of method minus control with its 95%
    interval [lo, hi] against the published difference `value` and its sd."""
    b_lo, b_hi = band(value, sd)
    if hi < b_lo or lo > b_hi:
        return DIFFERS
    if value == 0:
        return INCONCLUSIVE  # no size to be within a factor of
    # each side of the 95% interval taken to the one-sided 95% bound (z 1.645 for 1.96); on a t
    # interval this errs wide, as t's quantiles fall less from 97.5% to 95% than z's
    lo90, hi90 = ours - (ours - lo) * Z90 / Z95, ours + (hi - ours) * Z90 / Z95
    small, large = sorted((value / SIZE_RATIO, value * SIZE_RATIO))
    return AGREES if small <= lo90 and hi90 <= large else INCONCLUSIVE


def direction_verdict(lo: float, hi: float, direction: int) -> str:
    """A claimed direction's verdict: our interval [lo, hi] of method minus control against the sign
    claimed (+1: the method above its control, -1: below)."""
    if direction not in (1, -1):
        raise ValueError(f"a direction is +1 or -1, not {direction!r}")
    if (lo > 0 if direction > 0 else hi < 0):
        return AGREES
    if (hi < 0 if direction > 0 else lo > 0):
        return DIFFERS
    return INCONCLUSIVE


def ranking_verdict(p_value: float, lo: float, hi: float, critical: float) -> str:
    """A ranking's verdict: the permutation p-value of rho, rho's seed-aware interval [lo, hi], and
    `critical`, the rho that random class orders exceed 5% of the time."""
    if p_value <= RANK_ALPHA and lo > critical:
        return AGREES
    if hi <= 0:
        return DIFFERS
    return INCONCLUSIVE


def weakest_verdict(probability: float) -> str:
    """A named-class claim's verdict: the probability that the named class is the weakest."""
    if math.isnan(probability):
        return INCONCLUSIVE
    if probability >= WEAKEST_AGREES:
        return AGREES
    if probability <= WEAKEST_DIFFERS:
        return DIFFERS
    return INCONCLUSIVE
