"""The report's rows: each published value beside one run group of ours (or none: not in this
preset), and each published value that has a baseline as the method minus its control.

A row whose recipe differs from the published one is not compared as equal: its verdict is
"recipe differs". The checkpoint protocol is part of the recipe: a published "best" value was
chosen on the test set (the `published` protocol); ours chosen on a validation split is another
protocol, stated and not compared as equal. A row whose evaluation a check flagged or failed is
not counted (study.metrics.trust) and says so. A ranking or named-class claim whose runs differ
from the recipe only as a CPU-scale recipe does (matching.cpu_recipe) is still compared: its
verdict says "at reduced scale". A claim of a direction (PGD-AT widens the gap between classes; a
fairness method raises the worst class against its control) is compared by the sign of our
difference whatever the recipe, its differences stated. Every compared row reads agrees, inconclusive or differs
(study.reproduction.verdicts) and states the smallest difference it could detect."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from study.config.comparisons import Comparison, comparisons
from study.config.types import Params
from study.published import BY_ID, PUBLISHED, Published
from study.reproduction import verdicts
from study.reproduction.matching import (
    PUBLISHED_CHECKPOINT,
    Plan,
    annotate,
    candidate_difference,
    candidates,
    closest_groups,
    control_runs,
    control_substitution,
    cpu_recipe,
    distinct_runs,
    flagged,
    notes,
    pair_text,
    paired,
    pairs_of,
    plan_index,
    protocol_differences,
    protocol_of,
    redefinitions,
    scale_reductions,
    setting,
    whole_test_set,
)
from study.reproduction.power import HOPELESS, Truth, needs_text, power, scored_on, truth_of
from study.reproduction.statistics import (
    ClassAccuracy,
    Estimate,
    accuracy_estimate,
    class_estimate,
    difference_estimate,
    per_seed,
    rank_correlation,
    ranked,
    spread_difference,
    weakest_probability,
)

#: verdicts of rows that are not compared, by what keeps them out
NOT_IN_PRESET = "not in this preset"
RECIPE_DIFFERS = "recipe differs: not compared"
FLAGGED = "flagged by checks: not counted"
#: our runs exist but give the value nothing to measure (e.g. the claim's class is not in them);
#: a word, not '-': the summary counts it by name ("Not compared: 10 no value, ...")
NO_VALUE = "no value: not measurable in these runs"
#: a published difference its own source cannot tell from noise (study.published.CLAIM_Z): shown
#: beside our runs as context, not judged as a claim
CONTEXT = "context: within the source's noise, not judged"
#: a claim that rests on no published number (a method's stated aim, the study's expectation)
NO_NUMBER = "context: no published number, not judged"
#: the direction of a difference read on checkpoints chosen on the test set (the paper's protocol):
#: the choice favours each arm on the very images it is scored on, so the sign is not judged
TEST_CHOSEN = "direction not judged (checkpoints chosen on the test set, the paper's protocol)"
REDUCED = " at reduced scale"
#: how the verdict of a row that needs more seeds than it has begins (power.needs_text)
NEEDS = "needs "


def difference_text(direction: str, size: str) -> str:
    """A difference row's verdict: its direction's and its size's, each said."""
    return f"{direction} in direction; size {size}"


#: every verdict a compared difference row can read
DIFFERENCE_VERDICTS = tuple(difference_text(d, s) for d in verdicts.VERDICTS for s in verdicts.VERDICTS)
#: the claims about a class order (a direction, which a smaller recipe can show)
ORDER_STATISTICS = ("rank", "weakest")


@dataclass(frozen=True)
class Row:
    """One line of the report: a published value and one run group of ours (or none: not in this
    preset). For a difference row (`published.baseline` set) ours and the published value are
    the method minus its control. `reduced_scale`: how the runs were trained at a smaller scale
    than the published recipe (fewer epochs or training images, as a CPU recipe has).
    `protocol`: how our checkpoint was chosen (study.reproduction.matching.protocol_of)."""

    published: Published
    setting: str = ""
    estimate: Estimate | None = None
    classes: tuple[ClassAccuracy, ...] = ()
    differences: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    flagged: str = ""
    seeds: int = 0
    difference_of: str = ""  # difference rows: "<method> minus <baseline>"
    reduced_scale: tuple[str, ...] = ()
    #: the differences that a CPU-scale recipe makes (matching.cpu_recipe), scale reductions included
    cpu_recipe: tuple[str, ...] = ()
    protocol: str = ""
    #: the declared comparison a difference or claim row comes from (matching.pair_text)
    pair: str = ""
    #: the test images per class the runs were scored on (their mean), for the row's power
    test_images: float = 0.0
    #: whether the checkpoints were chosen on the test set (the `published` protocol)
    test_chosen: bool = False

    @property
    def published_value(self) -> float | None:
        p = self.published
        if p.direction:
            return None
        if not self.difference_of:
            return p.value
        return p.number - BY_ID[p.baseline_id].number

    @property
    def published_sd(self) -> float | None:
        p = self.published
        if p.direction:
            return None
        if not self.difference_of:
            return p.sd
        base = BY_ID[p.baseline_id]
        return math.hypot(p.sd, base.sd) if p.sd is not None and base.sd is not None else None

    @property
    def compared(self) -> bool:
        """Whether the row gets verdicts (at full or at reduced scale)."""
        return self.verdict_word in verdicts.VERDICTS

    @property
    def verdict_word(self) -> str:
        """The one verdict the summary counts (a difference row: its size; a claim of a direction:
        its direction), or why the row is not compared."""
        estimate = self.estimate
        if estimate is None:
            return NO_VALUE if self.setting else NOT_IN_PRESET
        if self.flagged:
            return FLAGGED
        if self.published.context:
            return CONTEXT
        if self.published.basis != "published":
            return NO_NUMBER
        if self.published.direction:
            if any(d.endswith(f" data, not {self.published.recipe.dataset}") for d in self.differences):
                return RECIPE_DIFFERS
            # a direction is what a smaller recipe can show: the differences are stated, not disqualifying
            return self._powered(self.direction)
        if self.differences and not self._order_at_reduced_scale:
            return RECIPE_DIFFERS
        return self._powered(self._compare(estimate))

    def _powered(self, word: str) -> str:
        """`word`, or where it is inconclusive and the row could hardly ever agree at the published
        truth with its seeds (study.reproduction.power), the seeds it needs."""
        power = self.power
        if word != verdicts.INCONCLUSIVE or power is None or power >= HOPELESS:
            return word
        truth = self._truth
        assert truth is not None  # a power was computed from it
        return needs_text(truth, self.test_images, self.published.recipe.test_per_class)

    @property
    def _truth(self) -> Truth | None:
        return truth_of(self.published, bool(self.difference_of) and not self.published.direction)

    @property
    def power(self) -> float | None:
        """The chance the row's verdict agrees at the published value or effect with its seeds;
        None where no published number gives it one."""
        truth = self._truth
        if truth is None or self.seeds < 1 or self.test_images <= 0:
            return None
        return power(truth, self.seeds, *scored_on(self.test_images, self.published.recipe.test_per_class))

    @property
    def needs_seeds(self) -> bool:
        """Whether the row reads "needs >= N seeds" (counted apart from the compared rows)."""
        return self.verdict_word.startswith(NEEDS)

    @property
    def _order_at_reduced_scale(self) -> bool:
        # a class order is a direction, which a smaller recipe can show; a value's size it cannot
        return bool(self.differences and self.published.statistic in ORDER_STATISTICS and self.reduced_scale
                    and set(self.differences) <= set(self.cpu_recipe))

    @property
    def verdict(self) -> str:
        """The row's verdict as shown: a difference row's direction and size each (DIFFERENCE_VERDICTS)."""
        word = self.verdict_word
        if word not in verdicts.VERDICTS and not (self.needs_seeds and self.difference_of):
            return word
        if self.difference_of and not self.published.direction:
            if self.test_chosen:
                return f"size {word}; {TEST_CHOSEN}"
            return difference_text(self.direction, word)
        reduced = self.reduced_scale if self.published.direction else self._order_at_reduced_scale
        # what a row needs is said whatever its scale (the runs column marks a reduced one)
        return word + (REDUCED if reduced and not self.needs_seeds else "")

    @property
    def direction(self) -> str:
        """Whether our runs show the published direction (a difference row, or a claim of a
        direction): a verdict word; '' for a row without a direction or without an estimate."""
        e, p = self.estimate, self.published
        if e is None or not (p.direction or self.difference_of):
            return ""
        published = 0.0 if p.direction else self.published_number
        sign = p.direction or (1 if published > 0 else -1 if published < 0 else 0)
        # a published difference of exactly 0 claims no direction to show
        return verdicts.direction_verdict(e.lo, e.hi, sign) if sign else verdicts.INCONCLUSIVE

    @property
    def published_number(self) -> float:
        """The published value (or difference) of a row that is no direction claim."""
        value = self.published_value
        if value is None:
            raise ValueError(f"published row {self.published.id} is a direction claim: it holds no value")
        return value

    def _compare(self, e: Estimate) -> str:
        statistic = self.published.statistic
        if statistic == "rank":
            return verdicts.ranking_verdict(e.p_value, e.lo, e.hi, e.detectable)
        if statistic == "weakest":
            return verdicts.weakest_verdict(e.value)
        if self.difference_of:
            return verdicts.size_verdict(e.value, e.lo, e.hi, self.published_number, self.published_sd)
        return verdicts.value_verdict(e.lo, e.hi, self.published_number, self.published_sd)

    @property
    def detectable(self) -> float | None:
        """The smallest difference (or rho, for a ranking) the row's runs could have detected."""
        e = self.estimate
        if e is None:
            return None
        if self.published.statistic in ORDER_STATISTICS:
            return e.detectable
        return verdicts.detectable(e.lo, e.hi)


def _images(rows: pd.DataFrame) -> float:
    """The test images per class the runs were scored on (their mean over the measured classes)."""
    measured = rows.loc[rows["n"] > 0, "n"]
    return float(measured.mean()) if len(measured) else 0.0


def test_fraction(p: Published, rows: pd.DataFrame) -> float:
    """The share of the paper's test images per class that the runs were scored on (at most 1)."""
    images = _images(rows)
    return min(images / p.recipe.test_per_class, 1.0) if images else 1.0


def _value_row(params: Params, p: Published, rows: pd.DataFrame, differences: tuple[str, ...],
               plan: Plan) -> Row:
    seeds = per_seed(rows)
    whole = whole_test_set(p, rows)
    classes: tuple[ClassAccuracy, ...] = ()
    estimate: Estimate | None
    if p.statistic == "mean":
        estimate = accuracy_estimate(seeds["mean"], seeds["n"], whole, "mean")
    elif p.statistic == "worst":
        estimate = accuracy_estimate(seeds["worst"], seeds["worst_n"], whole, "worst")
    elif p.statistic == "class":
        estimate = class_estimate(rows, p.named_class, whole)
        if estimate is None:
            differences = (*differences, f"no class {p.class_name} in these runs")
    else:
        by_class = ranked(rows)
        classes = tuple(ClassAccuracy(str(r.class_name), float(r.acc), float(r.ci_lo), float(r.ci_hi))
                        for r in by_class.itertuples())
        if p.statistic == "weakest":
            estimate = weakest_probability(rows, p.named_class, test_fraction=test_fraction(p, rows))
            if estimate is None:
                differences = (*differences, f"no class {p.class_name} in these runs")
        else:
            estimate = rank_correlation(rows, dict(p.order), test_fraction=test_fraction(p, rows))
            if estimate is None:
                differences = (*differences, "none of the published classes in these runs")
    n_seeds = int(rows["seed"].nunique())
    first = rows.iloc[0]
    method = str(first["method"])
    redefined = redefinitions(params, p, method)
    stated = (*differences, *redefined.all, *protocol_differences(p, rows, plan))
    return Row(p, setting(rows), estimate, classes, stated, notes(p, n_seeds), flagged(rows), n_seeds,
               reduced_scale=scale_reductions(p, first),
               cpu_recipe=(*cpu_recipe(p, first), *redefined.attack),
               protocol=protocol_of(rows, plan), test_images=_images(rows))


def _pair_row(table: pd.DataFrame, params: Params, p: Published, rows: pd.DataFrame,
              differences: tuple[str, ...], pair: Comparison, plan: Plan) -> Row | None:
    """The method minus its control along one declared pair, on the same data and evaluation at
    the same checkpoint: beside a published difference (a difference row) or a claimed direction;
    None where the runs have no such control."""
    method = str(rows["method"].iloc[0])
    base = control_runs(table, pair, rows)
    if base is None:
        return None
    if p.statistic == "spread":
        estimate = spread_difference(rows, base, test_fraction=min(test_fraction(p, rows), test_fraction(p, base)))
    else:
        column, n = ("worst", "worst_n") if p.statistic == "worst" else ("mean", "n")
        ours, theirs = per_seed(rows), per_seed(base)
        whole = whole_test_set(p, rows) and whole_test_set(p, base)
        estimate = difference_estimate(ours[column], ours[n], theirs[column], theirs[n], whole, column)
    base_name = str(base["method"].iloc[0])
    published_control = p.control_method if p.direction else BY_ID[p.baseline_id].method
    # a claim reads the study's own checkpoint, so no published protocol stands beside it
    protocol = () if p.direction else protocol_differences(p, rows, plan)
    stated = (*differences, *redefinitions(params, p, method).all,
              *control_substitution(params, published_control, base_name), *protocol,
              *candidate_difference(rows, base, plan))
    flags = "; ".join(f for f in (flagged(rows), flagged(base)) if f)
    return Row(p, setting(rows, base), estimate, (), tuple(dict.fromkeys(stated)), notes(p, estimate.seeds),
               flags, estimate.seeds, difference_of=f"{method} minus {base_name}",
               reduced_scale=scale_reductions(p, rows.iloc[0]), cpu_recipe=cpu_recipe(p, rows.iloc[0]),
               protocol=protocol_of(rows, plan), pair=pair_text(pair), test_images=min(_images(rows), _images(base)),
               test_chosen=str(rows["checkpoint"].iloc[0]) == PUBLISHED_CHECKPOINT)


def _paired_rows(table: pd.DataFrame, params: Params, p: Published, pairs: list[Comparison],
                 plan: Plan) -> list[Row]:
    """A row per declared pair of the closest run groups that some pair compares."""
    made = []
    for rows, differences in closest_groups(p, paired(candidates(table, params, p), pairs)):
        made += [_pair_row(table, params, p, rows, differences, pair, plan) for pair in pairs_of(pairs, rows)]
    return [r for r in made if r is not None]


def compare(classwise: pd.DataFrame, params: Params) -> tuple[list[Row], list[Row]]:
    """(value rows, difference rows): every published value with each closest run group of ours,
    or one row without a run group (not in this preset); and every published value that has a
    baseline, as the method minus its control along a pair the plan declares."""
    # a table that names its groups is a test's, whose runs no plan holds
    plan = plan_index(params) if "group" not in classwise else {}
    table = annotate(classwise, params, plan)
    pairs = comparisons(params)
    values: list[Row] = []
    deltas: list[Row] = []
    for p in PUBLISHED:
        if p.direction:
            values += _paired_rows(table, params, p, pairs, plan) or [Row(p)]
            continue
        groups = distinct_runs(closest_groups(p, candidates(table, params, p)))
        values += [_value_row(params, p, g, d, plan) for g, d in groups] or [Row(p)]
        if p.baseline is not None:
            deltas += _paired_rows(table, params, p, pairs, plan) or [Row(p, difference_of="-")]
    return values, deltas
