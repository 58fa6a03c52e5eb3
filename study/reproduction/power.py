"""How often a row of the report can agree at its published value or effect: the power of its
verdict rule (study.reproduction.verdicts) with a given number of seeds, and the seeds it needs.

A row whose power at the published truth is under `HOPELESS` with the seeds it has reads "needs >= N
seeds" in place of a bare "inconclusive": N, the fewest seeds at which its power reaches `TARGET`.
`study plan` prints, per preset, the seeds each claim family needs for that power.

The computation is the rule's own on a normal approximation: our estimate is centred on the
published value (or difference) with the spread over seeds the paper reports for it (its sd over
seeds, a spread of measured values; where it gives none, the seed sd one seed assumes,
statistics.UNSEEN_SEED_SD), and its interval is the one the report computes
(study.metrics.seeds) for values of that spread on that many test images. A named-class claim and
a class ranking have no published number to be powered at (the papers state the class, not its
lead), nor has a claim that rests on no published number; they get no power and stay as they read."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from statistics import NormalDist
from typing import NamedTuple

import numpy as np
from scipy.stats import chi2

from study.metrics.seeds import difference_interval, whole_test_set_interval
from study.published import BY_ID, PAPERS, PUBLISHED, Published, Recipe
from study.reproduction import verdicts
from study.reproduction.statistics import UNSEEN_SEED_SD

#: the power at which a row is said to need more seeds than it has: it can hardly ever agree
HOPELESS = 0.05
#: the power the seeds a row needs are counted for
TARGET = 0.80
#: the most seeds the report counts up to; a row needing more reads "needs > MAX_SEEDS seeds"
MAX_SEEDS = 50
_PHI = NormalDist().cdf


class Truth(NamedTuple):
    """What a row is powered at: its statistic (`mean` or `worst`/`class`), the published value of
    the method (a value row) or of its control (a difference), the difference (0 for a value row),
    the seed sd of each arm, and which verdict is powered (`value`, `size` or `direction`)."""

    statistic: str
    value: float
    effect: float
    sd: float
    control_sd: float
    rule: str
    band_sd: float | None
    #: the dataset's classes (a mean rests on per_class times this many images)
    classes: int = 10


def _sd(p: Published) -> float:
    statistic = "worst" if p.statistic in ("worst", "class") else "mean"
    return p.sd if p.sd else UNSEEN_SEED_SD[statistic]


def truth_of(p: Published, difference: bool) -> Truth | None:
    """The truth a published row is powered at: a value row at its value, a difference row at the
    published difference (its size verdict), a claim of a direction at the difference of the two
    published rows it was read from (its direction); None where no published number gives one."""
    if p.statistic not in ("mean", "worst", "class"):
        return None
    if p.direction:
        if p.claim_sources is None:
            return None
        ours, theirs = (BY_ID[i] for i in p.claim_sources)
        return Truth(p.statistic, theirs.number, ours.number - theirs.number, _sd(ours), _sd(theirs), "direction",
                     None, p.recipe.classes)
    if difference:
        base = BY_ID[p.baseline_id]
        sd = math.hypot(p.sd, base.sd) if p.sd is not None and base.sd is not None else None
        return Truth(p.statistic, base.number, p.number - base.number, _sd(p), _sd(base), "size", sd,
                     p.recipe.classes)
    return Truth(p.statistic, p.number, 0.0, _sd(p), _sd(p), "value", p.sd, p.recipe.classes)


def _values(centre: float, sd: float, seeds: int) -> np.ndarray:
    """`seeds` values with mean `centre` and sample sd `sd` (one seed: the centre alone)."""
    if seeds == 1:
        return np.array([centre])
    u = np.arange(seeds) - (seeds - 1) / 2
    return centre + sd * u / u.std(ddof=1)


#: the quantiles of the seeds' sample sd that a power averages over (its sampling distribution)
SD_QUANTILES = 16


def _sd_factors(df: float) -> np.ndarray:
    """The sample sd over its true value at SD_QUANTILES evenly spaced quantiles (chi, `df` degrees
    of freedom): a few seeds' interval is now narrow, now wide, and its power is the average."""
    return np.sqrt(chi2.ppf((np.arange(SD_QUANTILES) + 0.5) / SD_QUANTILES, df) / df)


@functools.lru_cache(maxsize=16384)  # a row asks for its power with every verdict it is asked for
def power(truth: Truth, seeds: int, per_class: float, whole_test_set: bool) -> float:
    """The chance that the row's verdict (`truth.rule`) agrees at the published truth with `seeds`
    seeds scored on `per_class` test images per class (`whole_test_set`: the paper's whole set):
    the normal chance for the estimate, averaged over the sampling distribution of the seeds' sd,
    which sets the interval's width."""
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    statistic = "worst" if truth.statistic in ("worst", "class") else "mean"
    n = per_class * (truth.classes if statistic == "mean" else 1)
    unseen = UNSEEN_SEED_SD[statistic]
    if truth.rule == "value":
        se = truth.sd / math.sqrt(seeds)
        b_lo, b_hi = verdicts.band(truth.value, truth.band_sd)
        chances = []
        for factor in _sd_factors(seeds - 1) if seeds > 1 else [1.0]:
            values = _values(truth.value, truth.sd * factor, seeds)
            lo, hi = whole_test_set_interval(values, n, whole_test_set, unseen_sd=unseen)
            upper = (b_hi + verdicts.VALUE_MARGIN - (hi - truth.value) - truth.value) / se
            lower = (b_lo - verdicts.VALUE_MARGIN + (truth.value - lo) - truth.value) / se
            chances.append(max(_PHI(upper) - _PHI(lower), 0.0))
        return float(np.mean(chances))
    effect = truth.effect
    if effect == 0:
        return 0.0  # no direction to show, no size to be within a factor of
    se = math.hypot(truth.sd, truth.control_sd) / math.sqrt(seeds)
    # Welch's degrees of freedom at the true sds (Satterthwaite), for the spread of the estimated se
    qa, qb = truth.sd**2 / seeds, truth.control_sd**2 / seeds
    df = (qa + qb) ** 2 / ((qa**2 + qb**2) / (seeds - 1)) if seeds > 1 else 1.0
    chances = []
    for factor in _sd_factors(df) if seeds > 1 else [1.0]:
        method = _values(truth.value + effect, truth.sd * factor, seeds)
        control = _values(truth.value, truth.control_sd * factor, seeds)
        _, lo, hi = difference_interval(method, n, control, n, whole_test_set, unseen_sd=unseen)
        below, above = effect - lo, hi - effect  # the interval's reach on each side of the estimate
        if truth.rule == "direction":
            chances.append(_PHI((effect - below) / se) if effect > 0 else _PHI((-effect - above) / se))
            continue
        scale = verdicts.Z90 / verdicts.Z95
        small, large = sorted((effect / verdicts.SIZE_RATIO, effect * verdicts.SIZE_RATIO))
        chances.append(max(_PHI((large - above * scale - effect) / se) - _PHI((small + below * scale - effect) / se),
                           0.0))
    return float(np.mean(chances))


@functools.lru_cache(maxsize=4096)
def seeds_needed(truth: Truth, per_class: float, whole_test_set: bool, target: float = TARGET) -> int | None:
    """The fewest seeds (up to MAX_SEEDS) at which the row's power reaches `target`; None beyond.
    From two seeds on the power rises with the seeds (one seed's interval rests on an assumed seed
    sd, not on the spread of seeds, so it is tried on its own): a bisection finds the first."""
    if power(truth, 1, per_class, whole_test_set) >= target:
        return 1
    if power(truth, MAX_SEEDS, per_class, whole_test_set) < target:
        return None
    low, high = 1, MAX_SEEDS  # power(low) < target <= power(high)
    while high - low > 1:
        middle = (low + high) // 2
        if power(truth, middle, per_class, whole_test_set) >= target:
            high = middle
        else:
            low = middle
    return high


def scored_on(per_class: float, test_per_class: int) -> tuple[float, bool]:
    """(test images per class, whether they are the paper's whole test set) of runs scored on
    `per_class` images per class where the paper scored `test_per_class`: more counts as the whole."""
    return min(per_class, test_per_class), per_class >= test_per_class


def needs_text(truth: Truth, per_class: float, test_per_class: int) -> str:
    """The verdict of a row that cannot agree with the seeds it has: the seeds it needs on its test
    images, or where no number of seeds is enough on a subset, on the paper's whole test set."""
    images, whole = scored_on(per_class, test_per_class)
    seeds = seeds_needed(truth, images, whole)
    if seeds is not None:
        return f"needs ≥ {seeds} seeds"
    if not whole:
        seeds = seeds_needed(truth, test_per_class, True)
        if seeds is not None:
            return f"needs the whole test set and ≥ {seeds} seeds"
    return f"needs > {MAX_SEEDS} seeds"


class Family(NamedTuple):
    """Rows of one paper, one kind (value, difference, claim) and one statistic, and the seeds each
    needs for `TARGET` power at `per_class` test images per class."""

    paper: str
    kind: str
    statistic: str
    needed: tuple[int | None, ...]
    #: the same on the paper's whole test set (where the preset scores a subset of it)
    needed_whole: tuple[int | None, ...] = ()

    @staticmethod
    def _text(needed: tuple[int | None, ...]) -> str:
        known = sorted(s for s in needed if s is not None)
        beyond = len(needed) - len(known)
        if not known:
            return f"> {MAX_SEEDS} seeds for every row"
        spread = f"{known[len(known) // 2]} (median), {known[0]}-{known[-1]}"
        return spread + (f"; {beyond} beyond {MAX_SEEDS}" if beyond else "")

    @property
    def text(self) -> str:
        text = self._text(self.needed)
        return text + (f" (on the whole test set: {self._text(self.needed_whole)})" if self.needed_whole else "")


def families(per_class: float | None, rows: Iterable[Published] = PUBLISHED) -> list[Family]:
    """The seeds every published value, difference and claim with a published number needs, by
    family, its test images per class `per_class` (None: each row's whole test set)."""
    grouped: dict[tuple[str, str, str], list[int | None]] = {}
    whole_grouped: dict[tuple[str, str, str], list[int | None]] = {}
    for p in rows:
        if p.direction:
            kinds = [("claim", False)]
        else:
            kinds = [("value", False), *([("difference", True)] if p.baseline else [])]
        for kind, difference in kinds:
            truth = truth_of(p, difference)
            if truth is None or p.context:
                continue
            key = (p.paper, kind, {"worst": "worst class", "class": "one class"}.get(truth.statistic, truth.statistic))
            images, whole = scored_on(p.recipe.test_per_class if per_class is None else per_class,
                                      p.recipe.test_per_class)
            grouped.setdefault(key, []).append(seeds_needed(truth, images, whole))
            if not whole:
                whole_grouped.setdefault(key, []).append(seeds_needed(truth, p.recipe.test_per_class, True))
    return [Family(PAPERS.get(paper, paper), kind, statistic, tuple(needed),
                   tuple(whole_grouped.get((paper, kind, statistic), ())))
            for (paper, kind, statistic), needed in grouped.items()]


def families_text(preset: str, seeds: int, per_class: int | None) -> str:
    """`study plan`'s lines: the seeds each claim family needs for TARGET power at its published
    effect, beside the preset's own seeds; `per_class`: the preset's test images per class (None:
    the whole test set)."""
    # the whole test set named by CIFAR-10's, the dataset of nearly every published row
    images = Recipe().test_per_class if per_class is None else per_class
    lines = [f"seeds for {TARGET:.0%} power at the published value or effect ({images:g} test images per class; "
             f"preset {preset} runs {seeds}):"]
    for f in families(per_class):
        lines.append(f"  {f.paper}, {f.kind} rows, {f.statistic} ({len(f.needed)}): {f.text}")
    return "\n".join(lines)
