"""Matching a published row to the runs of the class-wise table, by what the runs are, not by
their names, because names differ by preset (PGD-AT is `pgd_at` in the baseline group and `at`
in the mitigation group; the PGD evaluation is `pgd20` in the paper preset, `pgd3` in ci):

- the method: a run matches when its resolved policies (study.config.resolve_method) equal
  those of the row's method;
- the checkpoint: the table's `checkpoint` column (best on validation, or last;
  study.record_names.table_checkpoints);
- the evaluation by its settings: clean, or PGD / AutoAttack at L-inf 8/255 (of several PGD
  evaluations the one whose step count is nearest the published one); where a preset has no
  AutoAttack, its PGD evaluation stands in, as a recipe difference;
- of the run groups that match, those whose recipe differs least from the published one.

A run group is one configuration's seeds within one experiment group (the plan says which groups
run a run): runs of two groups are never pooled, and a method is set against a control only
along a comparison the plan declares (study.config.comparisons: the method's `compare_with` or
base chain within its group, or a pair a group declares, across groups only where declared).

Recipe differences (dataset or its variant, architecture, epochs, a training subset, the
optimizer, the evaluation) are stated per row. Those of scale (fewer epochs or training images
than the published setting, as a CPU recipe has) also mark the row as reduced-scale.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import pandas as pd

from study.config import ConfigError, EvaluationSpec, plan_runs, resolve_evaluation, resolve_method
from study.config.comparisons import Comparison, covers
from study.config.evaluations import AutoAttackEvaluation, CleanEvaluation, PgdEvaluation
from study.config.methods import method_entry, resolved_method
from study.config.plan import RunSpec
from study.config.types import Params
from study.metrics.epoch_selection import first_eligible_epoch
from study.metrics.trust import not_counted
from study.published import PUBLISHED_EPOCHS, Published
from study.record_names import split_record_name, table_checkpoints
from study.run_directory import SETTING_COLUMNS

PUBLISHED_EPS = 8 / 255
class PublishedOptimizer(NamedTuple):
    optimizer: str
    schedule: str
    weight_decay: float


PUBLISHED_RECIPE = PublishedOptimizer(optimizer="sgd", schedule="step", weight_decay=5e-4)
# Where a preset has no evaluation of the published kind, the one that stands in (a recipe difference).
STAND_IN = {"autoattack": "pgd"}
#: the checkpoint chosen on the test set by the paper's rule (the `published` selection protocol)
PUBLISHED_CHECKPOINT = "published"
#: how each checkpoint was chosen, in the report's words
PROTOCOLS = {PUBLISHED_CHECKPOINT: "published: on the test set, the paper's rule",
             "best": "validation: on our validation split, the group's rule", "last": "last epoch"}
# One configuration trained with several seeds.
GROUP = ["dataset", "data_variant", "model", "method", *SETTING_COLUMNS]
#: one run group: a configuration's seeds in one experiment group (`group`, from the plan)
RUN_GROUP = ["group", *GROUP]


def published_threat_kind(params: Params, name: str, dataset: str) -> tuple[str | None, float]:
    """clean, pgd or autoattack (at the published L-inf 8/255) with the PGD step count; None otherwise."""
    try:
        ev = EvaluationSpec.parse(resolve_evaluation(params, name, dataset), f"evaluation {name!r}").config
    except ConfigError:
        return None, math.nan
    if isinstance(ev, CleanEvaluation):
        return "clean", math.nan
    if ev.norm != "linf" or not math.isclose(ev.eps, PUBLISHED_EPS, rel_tol=1e-6):
        return None, math.nan
    if isinstance(ev, PgdEvaluation):
        return "pgd", float(ev.steps)
    if isinstance(ev, AutoAttackEvaluation):
        return "autoattack", math.nan
    return None, math.nan


#: the plan's runs by run id, as the report reads them
Plan = Mapping[str, RunSpec]


def plan_index(params: Params) -> dict[str, RunSpec]:
    """The plan's runs by run id."""
    return {spec.run_id: spec for spec in plan_runs(params)}


def run_groups(classwise: pd.DataFrame, plan: Plan) -> pd.DataFrame:
    """The class-wise table with its rows' experiment group (`group`), a row per group of the runs
    the plan shares between groups. A table that names its rows' group keeps it (a test's); a run
    the plan does not hold is a one-line ConfigError (the table is another preset's)."""
    if "group" in classwise:
        return classwise
    unknown = sorted(set(classwise["run_id"]) - set(plan))
    if unknown:
        raise ConfigError(f"run {unknown[0]} of the class-wise table is not in this preset's plan "
                          f"({len(unknown)} such): build the tables of the preset the report is for")
    table = classwise.assign(group=classwise["run_id"].map(lambda run_id: list(plan[run_id].groups)))
    return table.explode("group", ignore_index=True)


def annotate(classwise: pd.DataFrame, params: Params, plan: Plan | None = None) -> pd.DataFrame:
    """The class-wise table with each row's experiment group, its configured evaluation, its kind
    and PGD steps. `plan`: the plan's runs by id (plan_index), where the caller has it already."""
    if "group" not in classwise:
        classwise = run_groups(classwise, plan if plan is not None else plan_index(params))
    table = classwise.assign(checkpoint=table_checkpoints(classwise))
    table["evaluation"] = table["eval"].map(lambda name: split_record_name(name)[0])
    keys = list(zip(table["evaluation"], table["dataset"].astype(str), strict=True))
    kinds = {key: published_threat_kind(params, *key) for key in set(keys)}
    table["kind"] = [kinds[key][0] for key in keys]
    table["steps"] = [kinds[key][1] for key in keys]
    if "checks_not_passed" not in table:  # tables built without checks.json
        table["checks_not_passed"] = ""
    if "train_data" not in table:
        table["train_data"] = "original"
    return table


def _policies(params: Params, method: str) -> dict | None:
    try:
        return resolve_method(params, method)
    except ConfigError:
        return None


def equivalent_methods(params: Params, present: Iterable[str], references: Iterable[str]) -> set[str]:
    """The methods of the table whose policies equal those of one of the reference methods."""
    wanted = [p for p in (_policies(params, r) for r in references) if p is not None]
    return {m for m in present if (p := _policies(params, m)) is not None and p in wanted}


def _preferred_checkpoint(rows: pd.DataFrame, order: tuple[str, ...]) -> pd.DataFrame:
    """Of each run group's rows, those at the first checkpoint of `order` the group has."""
    if rows.empty:
        return rows
    rank = rows["checkpoint"].map({c: i for i, c in enumerate(order)})
    first = rank.groupby([rows[c] for c in RUN_GROUP], dropna=False).transform("min")
    return rows[rank == first]


def checkpoint_order(p: Published) -> tuple[str, ...]:
    """The checkpoints that may stand for the published row, preferred first. A published "best"
    value is matched with a run group's `published` checkpoint (chosen on the test set as the
    paper chose) where the group has one, else with its validation-chosen `best`. A claim of a
    direction reads the study's own rule alone: `best` (chosen on the validation split) where the
    runs have one, else the last epoch; never a checkpoint chosen on the test set."""
    if p.direction:
        return ("best", "last") if p.checkpoint == "best" else (p.checkpoint,)
    return (PUBLISHED_CHECKPOINT, "best") if p.checkpoint == "best" else (p.checkpoint,)


def candidates(table: pd.DataFrame, params: Params, p: Published) -> pd.DataFrame:
    """Rows of runs of the row's method at its checkpoint (checkpoint_order), of its evaluation
    kind (or the stand-in)."""
    methods = equivalent_methods(params, table["method"].unique(), (p.method,))
    order = checkpoint_order(p)
    rows = table[table["method"].isin(methods) & table["checkpoint"].isin(order)
                 # models trained on a constructed feature dataset are another question
                 & (table["train_data"].fillna("original") == "original")]
    rows = _preferred_checkpoint(rows, order)
    exact = rows[rows["kind"] == p.recipe.kind]
    if exact.empty and p.recipe.kind in STAND_IN:
        return rows[rows["kind"] == STAND_IN[p.recipe.kind]]
    return exact


def _preferred_evaluation(rows: pd.DataFrame, steps: int | None) -> pd.DataFrame:
    """The rows of one evaluation: of several PGD evaluations the one nearest the published steps."""
    target = steps if steps is not None else 20
    order = rows.assign(_distance=(rows["steps"] - target).abs()).sort_values(
        ["_distance", "steps", "eval"], ascending=[True, False, True], na_position="last")
    return rows[rows["eval"] == order["eval"].iloc[0]]


def scale_reductions(p: Published, first: pd.Series) -> tuple[str, ...]:
    """How a run group (its first row) was trained at a smaller scale than the published recipe:
    fewer epochs than the claim's (than the published recipe's PUBLISHED_EPOCHS where the claim
    states none), a subset of the training images. Empty for a run at the published scale."""
    r, out, epochs = p.recipe, [], int(first["epochs"])
    if r.epochs is not None and epochs < r.epochs:
        out.append(f"{epochs} epochs, not {r.epochs}")
    elif r.epochs is None and epochs < PUBLISHED_EPOCHS:
        out.append(f"{epochs} epochs, fewer than the published recipe's {PUBLISHED_EPOCHS} (the claim states none)")
    if pd.notna(first["train_per_class"]):
        out.append(f"{int(first['train_per_class'])} training images per class, not all")
    return tuple(out)


def _variant_difference(p: Published, first: pd.Series) -> tuple[str, ...]:
    """Another copy of the published dataset (the JPEG one where the official archive is not held)."""
    r = p.recipe
    if first["dataset"] == r.dataset and first["data_variant"] != r.variant:
        return (f"{r.dataset} {first['data_variant']} variant, not {r.variant}",)
    return ()


def _optimizer_difference(first: pd.Series) -> tuple[str, ...]:
    if (first["optimizer"], first["schedule"]) != (PUBLISHED_RECIPE.optimizer, PUBLISHED_RECIPE.schedule) \
            or not math.isclose(float(first["weight_decay"]), PUBLISHED_RECIPE.weight_decay):
        return (f"{first['optimizer']}, {first['schedule']} schedule, weight decay {float(first['weight_decay']):g}"
                ", not SGD, step, 5e-4",)
    return ()


def cpu_recipe(p: Published, first: pd.Series) -> tuple[str, ...]:
    """The differences a CPU-scale recipe of the same study makes: a smaller scale, a
    schedule that converges in few epochs, another copy of the same data. They change how far a
    model gets, not which classes it finds hard: a published ranking is still compared with it."""
    return (*_variant_difference(p, first), *scale_reductions(p, first), *_optimizer_difference(first))


def recipe_differences(p: Published, first: pd.Series) -> tuple[str, ...]:
    """How a run group (its first row) departs from the recipe the published value was measured under."""
    r, out = p.recipe, []
    if first["dataset"] != r.dataset:
        out.append(f"{first['dataset']} data, not {r.dataset}")
    out += _variant_difference(p, first)
    if r.model is not None and first["model"] != r.model:
        out.append(f"{first['model']}, not {r.model}")
    if r.epochs is not None and int(first["epochs"]) > r.epochs:
        out.append(f"{int(first['epochs'])} epochs, not {r.epochs}")
    out += scale_reductions(p, first)
    out += _optimizer_difference(first)
    if first["kind"] != r.kind:
        out.append(f"{first['eval']} ({first['kind']}) in place of {r.kind}")
    elif r.pgd_steps is not None and first["steps"] != r.pgd_steps:
        out.append(f"PGD-{first['steps']:g}, not PGD-{r.pgd_steps}")
    return tuple(out)


def notes(p: Published, seeds: int) -> tuple[str, ...]:
    """Notes on what the row rests on: parts of the published recipe that were inferred, fewer seeds."""
    out = [f"inferred: {part}" for part in p.recipe.inferred]
    if seeds < p.recipe.seeds:
        out.append(f"{seeds} seed{'s' if seeds != 1 else ''}, the paper {p.recipe.seeds}")
    return tuple(out)


#: the test images per class on which CFA's code scores its index each epoch (the whole CIFAR-10 test set)
CFA_TEST_PER_CLASS = 1000
_PICK_INFERRED = ("; of the checkpoints CFA's code keeps (within 0.02 of the best index so far) the one of the "
                  "highest index (inferred: Table 1 does not say which of them it reports)")


def index_sd(per_class: int, mean: float = 0.5, worst: float = 0.25, classes: int = 10) -> float:
    """The sampling sd of CFA's index (mean plus worst-class robust accuracy) scored on `per_class`
    test images per class, at a robust mean and a worst class near Table 1's."""
    return math.sqrt(mean * (1 - mean) / (classes * per_class) + worst * (1 - worst) / per_class)


def run_spec(rows: pd.DataFrame, plan: Plan | None) -> RunSpec | None:
    """The plan's spec of the run group's first run; None where the plan does not hold it (a table
    a test builds)."""
    return (plan or {}).get(str(rows["run_id"].iloc[0]))


def protocol_of(rows: pd.DataFrame, plan: Plan | None = None) -> str:
    """How the rows' checkpoint was chosen (PROTOCOLS); for the published protocol, on how many test
    images per class against CFA's whole test set (the runs' train.epoch_eval.per_class, where the
    plan holds the runs), and the pick among the kept checkpoints, stated as the inference it is."""
    checkpoint = str(rows["checkpoint"].iloc[0])
    text = PROTOCOLS.get(checkpoint, checkpoint)
    if checkpoint != PUBLISHED_CHECKPOINT:
        return text
    spec = run_spec(rows, plan)
    per_class = spec.trained.epoch_eval.per_class if spec is not None and spec.trained is not None else None
    if per_class is None or int(per_class) >= CFA_TEST_PER_CLASS:
        return text + _PICK_INFERRED
    share = int(per_class) / CFA_TEST_PER_CLASS
    return (f"{text}, on {int(per_class)} test images per class where CFA's code scores all {CFA_TEST_PER_CLASS}: "
            f"the index's sampling sd is about {100 * index_sd(int(per_class)):.1f} pts against "
            f"{100 * index_sd(CFA_TEST_PER_CLASS):.1f} (at a robust mean of 50% and a worst class of 25%), so the "
            f"pick is noisier than CFA's and, chosen on {share:.0%} of the images its value is scored on, less "
            f"biased upwards" + _PICK_INFERRED)


def protocol_differences(p: Published, rows: pd.DataFrame, plan: Plan | None = None) -> tuple[str, ...]:
    """A published best value chosen on the test set beside ours chosen on a validation split: a
    value chosen on the test set is biased upwards, so the two are not compared as equal. Ours
    chosen on the test set by another paper's index (CFA's where TRIX reports the best worst class)
    is another rule, stated too (where the plan holds the runs)."""
    checkpoint = str(rows["checkpoint"].iloc[0])
    if p.checkpoint == "best" and checkpoint != PUBLISHED_CHECKPOINT:
        paper = p.recipe.selection or "on the test set"
        return (f"best checkpoint chosen on our validation split; the paper's {paper}",)
    spec = run_spec(rows, plan)
    if p.checkpoint == "best" and spec is not None and p.recipe.selection_index is not None:
        published = spec.trained.published_selection if spec.trained is not None else None
        ours = published.index if published is not None else None
        if ours != p.recipe.selection_index:
            return (f"published checkpoint chosen by the index {ours}, not the paper's {p.recipe.selection_index}",)
    return ()


def whole_test_set(p: Published, rows: pd.DataFrame) -> bool:
    """Whether every class of the runs was scored on as many test images as the paper scored."""
    return bool((rows["n"] >= p.recipe.test_per_class).all())


def _attack_text(steps: int, alpha: float) -> str:
    return f"{steps} step{'s' if steps != 1 else ''} of {alpha * 255:.3g}/255"


class Redefinitions(NamedTuple):
    """How a preset redefines the published method: `attack`, another training attack (e.g. PGD-AT
    as one step from a random start, FGSM-RS), which a CPU-scale recipe makes and a class
    order is still compared under; `start`, a fine-tune of another run in place of training from
    scratch."""

    attack: tuple[str, ...] = ()
    start: tuple[str, ...] = ()

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.attack, *self.start)


def redefinitions(params: Params, p: Published, method: str) -> Redefinitions:
    """How the preset redefines the published method (Redefinitions), read off its definition."""
    try:
        entry, adversary = method_entry(params, method), resolved_method(params, method).adversary
    except ConfigError:
        return Redefinitions()
    attack: tuple[str, ...] = ()
    if p.recipe.train_attack is not None and adversary is not None:
        steps, alpha = p.recipe.train_attack
        ours_alpha = float(adversary.alpha)
        if adversary.steps != steps or not math.isclose(ours_alpha, alpha, rel_tol=1e-6):
            fgsm_rs = adversary.steps == 1 and adversary.random_start and adversary.start_std is None
            start = " from a uniform random start (FGSM-RS)" if fgsm_rs else ""
            attack = (f"training attack {_attack_text(adversary.steps, ours_alpha)}{start}, "
                      f"not {_attack_text(steps, alpha)}",)
    fine_tunes = () if entry.init_from is None else (f"fine-tunes the {entry.init_from} run, not trained from scratch",)
    return Redefinitions(attack, fine_tunes)


def control_substitution(params: Params, published: str, control: str) -> tuple[str, ...]:
    """A row whose control is not the published one (by policies): the control of a difference's
    baseline row, or of a claim."""
    if control in equivalent_methods(params, [control], (published,)):
        return ()
    return (f"control {control}, not {published} (the preset substitutes it)",)


def flagged(rows: pd.DataFrame) -> str:
    """The checks that flagged or failed the rows' evaluation ('' when the rule counts it)."""
    bad = rows[not_counted(rows)]
    return "; ".join(sorted(set(bad["checks_not_passed"].astype(str)))) or ("flagged" if len(bad) else "")


def closest_groups(p: Published, rows: pd.DataFrame) -> list[tuple[pd.DataFrame, tuple[str, ...]]]:
    """The run groups (preferred evaluation each) closest to the published recipe: on its dataset
    where any are, and of those the ones with the fewest recipe differences."""
    if rows.empty:
        return []
    groups = [_preferred_evaluation(g, p.recipe.pgd_steps)
              for _, g in rows.groupby(RUN_GROUP, sort=False, dropna=False)]
    scored = [((g.iloc[0]["dataset"] != p.recipe.dataset, len(d)), g, d)
              for g in groups for d in [recipe_differences(p, g.iloc[0])]]
    best = min(score for score, _, _ in scored)
    return [(g, d) for score, g, d in scored if score == best]


def distinct_runs(groups: list[tuple[pd.DataFrame, tuple[str, ...]]]) -> list[tuple[pd.DataFrame, tuple[str, ...]]]:
    """The run groups of a value row, each set of runs once: a run several experiment groups
    share (the baseline's PGD-AT in the models and optimization groups) is one run group, named
    by every group that runs it."""
    seen: dict[frozenset, int] = {}
    out: list[tuple[pd.DataFrame, tuple[str, ...]]] = []
    for rows, differences in groups:
        key = frozenset(zip(rows["run_id"], rows["eval"], strict=True))
        if key in seen:
            first, diffs = out[seen[key]]
            names = ", ".join(dict.fromkeys([*str(first["group"].iloc[0]).split(", "), str(rows["group"].iloc[0])]))
            out[seen[key]] = (first.assign(group=names), diffs)
        else:
            seen[key] = len(out)
            out.append((rows, differences))
    return out


def setting(rows: pd.DataFrame, versus: pd.DataFrame | None = None) -> str:
    """The compared runs in words: model, method (vs the baseline's), evaluation, length, data."""
    first = rows.iloc[0]
    method = str(first["method"]) if versus is None else f"{first['method']} minus {versus['method'].iloc[0]}"
    parts = [str(first["dataset"]), str(first["model"]), method, str(first["eval"]), f"{int(first['epochs'])} epochs"]
    if "group" in rows and str(first["group"]):
        parts.insert(0, f"group {first['group']}")
    if pd.notna(first["train_per_class"]):
        parts.append(f"{int(first['train_per_class'])} train images/class")
    if first["data_variant"] not in ("official", "default"):
        parts.append(f"{first['data_variant']} variant")
    return ", ".join(parts)


def pairs_of(pairs: list[Comparison], rows: pd.DataFrame) -> list[Comparison]:
    """The declared pairs whose method is the run group's, in its experiment group."""
    first = rows.iloc[0]
    return [c for c in pairs if c.group == first["group"] and c.method == first["method"]]


def paired(rows: pd.DataFrame, pairs: list[Comparison]) -> pd.DataFrame:
    """The rows of run groups whose method some declared pair compares in their experiment group."""
    keys = {(c.group, c.method) for c in pairs}
    return rows[[(g, m) in keys for g, m in zip(rows["group"], rows["method"], strict=True)]]


def control_runs(table: pd.DataFrame, pair: Comparison, rows: pd.DataFrame) -> pd.DataFrame | None:
    """The control's run group of a declared pair: its method in its group, trained on the same
    data (the training images per class too, unless the pair declares them) and scored by the same
    evaluation at the same checkpoint; of several settings (a grid), the one that agrees with the
    method's in the most columns."""
    first = rows.iloc[0]
    same = (table["method"] == pair.baseline) & (table["group"] == pair.control_group)
    same &= table["eval"] == first["eval"]
    for column in ("dataset", "data_variant", "model", "train_data"):
        same &= table[column] == first[column]
    if not any(covers(d, "train.train_per_class") for d in pair.declared):
        same &= (table["train_per_class"] == first["train_per_class"]) | (
            table["train_per_class"].isna() & pd.isna(first["train_per_class"]))
    groups = [g for _, g in table[same].groupby(RUN_GROUP, sort=True, dropna=False)]
    if not groups:
        return None
    return max(groups, key=lambda g: sum(g[c].iloc[0] == first[c] for c in SETTING_COLUMNS if pd.notna(first[c])))


def pair_text(pair: Comparison) -> str:
    """How a row names the declared pair it comes from, and, across groups, what its arms differ in."""
    text = f"declared pair {pair.name}"
    if pair.cross_group:
        text += f" (across groups: the arms differ in {', '.join(sorted(pair.actual))})"
    return text


def candidate_epochs(rows: pd.DataFrame, plan: Plan) -> int | None:
    """How many epochs the run group's checkpoint was chosen among: the last is one; `best` every
    epoch from train.selection's first eligible; `published` the same under train.published_selection.
    None where the plan does not hold the runs (a table a test builds)."""
    first = rows.iloc[0]
    checkpoint = str(first["checkpoint"])
    if checkpoint == "last":
        return 1
    spec = run_spec(rows, plan)
    if spec is None:
        return None
    config = spec.config
    key = "published_selection" if checkpoint == PUBLISHED_CHECKPOINT else "selection"
    from_epoch = float((config.get(key) or {}).get("from_epoch", 0.0))
    epochs = int(config["epochs"])
    return epochs - first_eligible_epoch(epochs, from_epoch) + 1


def candidate_difference(rows: pd.DataFrame, base: pd.DataFrame, plan: Plan) -> tuple[str, ...]:
    """Where a claim's two arms chose their checkpoint among different numbers of epochs, in words."""
    ours, theirs = candidate_epochs(rows, plan), candidate_epochs(base, plan)
    if ours is None or theirs is None or ours == theirs:
        return ()
    checkpoint = str(rows["checkpoint"].iloc[0])
    return (f"{checkpoint} checkpoint chosen among {ours} epoch{'s' if ours != 1 else ''} for "
            f"{rows['method'].iloc[0]}, {theirs} for {base['method'].iloc[0]}",)
