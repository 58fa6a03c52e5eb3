"""DAFA's main table and the TRIX authors' rerun meet runs of their own recipes (issue 42, part 3):
the paper preset's planned runs, given synthetic class-wise records, are compared with every row
of those two tables that the preset can produce (agrees, inconclusive or differs; never "recipe
differs"), and the rows it cannot produce are only those the plan leaves out by design.

Which rows the preset can produce is read off the plan, not written here: a row is producible
where the plan trains, on the row's dataset, a run of the row's method from scratch (and, for a
difference row, of its control) and evaluates it at the row's checkpoint with an evaluation of
the row's kind. The recipe itself (model, attack, epochs, split, control, checkpoint rule) is
what the comparison checks, so a recipe that departs from the paper ends as "recipe differs"."""

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.params import changed

from study.config import Params, comparison_baseline, load_params, plan_runs
from study.config.methods import method_entry
from study.config.plan import RunSpec
from study.config.types import RunConfig
from study.data.classes import CIFAR10_CLASS_NAMES
from study.published import BY_ID, PUBLISHED, Published
from study.record_names import record_name
from study.reproduction import compare
from study.reproduction.comparison import Row
from study.reproduction.matching import (
    PUBLISHED_CHECKPOINT,
    STAND_IN,
    equivalent_methods,
    published_threat_kind,
)
from study.run_directory import identity

ROOT = Path(__file__).resolve().parents[2]
#: the two tables of issue 42, part 3, by their papers' bibliography anchors
TABLES = ("lee2024", "medi2025trix")
_CLASSES = {"cifar10": 10, "cifar100": 100}


def _load(overrides: dict | None = None) -> Params:
    return load_params(ROOT / "params.yaml", {"preset": "paper", **(overrides or {})},
                       presets_dir=ROOT / "workflow/presets",
                       schema_path=ROOT / "workflow/schemas/params.schema.yaml")


@pytest.fixture(scope="module")
def params():
    return _load()


def _table_rows() -> list[Published]:
    return [p for p in PUBLISHED if p.paper in TABLES and not p.direction]


def _wanted(params, runs: list[RunSpec]) -> set[str]:
    """The planned methods that could stand for a row of the two tables or its control."""
    names = {p.method for p in _table_rows()} | {BY_ID[p.baseline].method for p in _table_rows() if p.baseline}
    present = {r.run.method for r in runs if isinstance(r.run, RunConfig)}
    methods = equivalent_methods(params, present, names)
    # and the controls the plan declares for them, whichever they are
    return methods | {c for m in methods if (c := comparison_baseline(params, m)) in present}


def classwise(params, runs: list[RunSpec]) -> pd.DataFrame:
    """Synthetic class-wise records (results/tables/classwise.csv columns) of every planned run of
    the tables' methods: each of its evaluations at each of its checkpoints, on the whole test set,
    class accuracies spread from 0.2 to 0.9 and shifted per seed and per method."""
    wanted, rows = _wanted(params, runs), []
    for i, spec in enumerate(r for r in runs if isinstance(r.run, RunConfig) and r.run.method in wanted):
        run = spec.run
        classes = _CLASSES[run.dataset]
        per_class = 10_000 // classes
        accs = np.linspace(0.2, 0.9, classes) + 0.01 * run.seed - 0.002 * (i % 7)
        names = CIFAR10_CLASS_NAMES if classes == 10 else tuple(f"class{c}" for c in range(classes))
        for evaluation in spec.evaluations:
            for checkpoint in spec.checkpoints:
                for c, acc in enumerate(accs):
                    correct = int(round(acc * per_class))
                    rows.append({**identity(spec.run_id, run), "eval": record_name(evaluation, checkpoint),
                                 "checkpoint": checkpoint, "class": c, "class_name": names[c], "n": per_class,
                                 "correct": correct, "acc": correct / per_class})
    frame = pd.DataFrame(rows)
    frame["train_per_class"] = frame["train_per_class"].astype(float)
    return frame


def _planned(params, runs: list[RunSpec], method: str, p: Published) -> bool:
    """Whether the plan trains `method` (by policies) from scratch on the row's dataset and
    evaluates it at the row's checkpoint with an evaluation of the row's kind (or its stand-in)."""
    kinds = {p.recipe.kind, STAND_IN.get(p.recipe.kind)}
    checkpoints = {PUBLISHED_CHECKPOINT, "best"} if p.checkpoint == "best" else {p.checkpoint}
    for spec in runs:
        run = spec.run
        if not isinstance(run, RunConfig) or run.dataset != p.recipe.dataset:
            continue
        if not equivalent_methods(params, [run.method], (method,)) or method_entry(params, run.method).init_from:
            continue
        if checkpoints & set(spec.checkpoints) and any(
                published_threat_kind(params, e, run.dataset)[0] in kinds for e in spec.evaluations):
            return True
    return False


def producible(params, runs: list[RunSpec]) -> tuple[list[Published], list[Published]]:
    """(value rows, difference rows) of the two tables that the plan can produce."""
    values = [p for p in _table_rows() if _planned(params, runs, p.method, p)]
    deltas = [p for p in values if p.baseline and _planned(params, runs, BY_ID[p.baseline].method, p)]
    return values, deltas


def _compared(rows: list[Row], wanted: list[Published]) -> dict[str, list[Row]]:
    ids = {p.id for p in wanted}
    out: dict[str, list[Row]] = {}
    for r in rows:
        if r.published.id in ids:
            out.setdefault(r.published.id, []).append(r)
    return out


def _not_compared(params) -> list[str]:
    """Every producible row of the two tables that is not compared, with why ('' when all are)."""
    runs = plan_runs(params)
    values, deltas = producible(params, runs)
    value_rows, delta_rows = compare(classwise(params, runs), params)
    bad = []
    for wanted, rows in ((values, value_rows), (deltas, delta_rows)):
        found = _compared(rows, wanted)
        for p in wanted:
            for r in found.get(p.id, [Row(p)]):
                if not (r.compared or r.needs_seeds):
                    bad.append(f"{p.id}: {r.verdict} ({'; '.join(r.differences)})")
    return bad


def test_every_producible_row_of_dafa_and_trix_is_compared(params):
    runs = plan_runs(params)
    values, deltas = producible(params, runs)
    value_rows, delta_rows = compare(classwise(params, runs), params)
    found_values, found_deltas = _compared(value_rows, values), _compared(delta_rows, deltas)
    for wanted, found in ((values, found_values), (deltas, found_deltas)):
        for p in wanted:
            rows = found.get(p.id, [])
            assert rows, f"{p.id}: no row"
            for r in rows:
                # judged: a verdict, or the seeds it needs to reach one (power.HOPELESS)
                assert r.compared or r.needs_seeds, f"{p.id}: {r.verdict} ({'; '.join(r.differences)})"
                # the runs of the paper's recipe: its model and length, as the row's setting says
                assert f"{p.recipe.model}," in r.setting and f"{p.recipe.epochs} epochs" in r.setting, r.setting
    by_paper = {paper: sum(1 for p in values + deltas if p.paper == paper) for paper in TABLES}
    # the plan produces rows of both tables, values and differences
    assert all(by_paper.values()) and deltas, by_paper
    print(f"compared in the paper preset: {by_paper} ({len(values)} values, {len(deltas)} differences)")


def test_the_rows_left_out_are_only_those_the_preset_cannot_train(params):
    """STL-10 is not a dataset of the study; TRIX's FRL row is a fine-tune (FRL starts from a
    trained model: not a recipe of the rerun's). Every other row of the two tables is producible."""
    runs = plan_runs(params)
    values, _ = producible(params, runs)
    left = {p.id for p in _table_rows()} - {p.id for p in values}
    assert left == {p.id for p in _table_rows()
                    if p.recipe.dataset == "stl10" or method_entry(params, p.method).init_from}


def trix_rule_problems(params) -> list[str]:
    """The runs of TRIX's rows (ResNet-18, trained from scratch: the rows the preset produces) whose
    `published` checkpoint is not chosen as TRIX chose its "best": by the best worst-class robust
    accuracy alone (not CFA's mean plus worst within a band). TRIX's FRL row, which the preset does
    not produce, meets the mitigation group's FRL runs: CFA's rule, in a row not compared (its recipe
    differs)."""
    trix = equivalent_methods(params, {r.run.method for r in plan_runs(params) if isinstance(r.run, RunConfig)},
                              {p.method for p in _table_rows() if p.paper == "medi2025trix"})
    models = {p.recipe.model for p in _table_rows() if p.paper == "medi2025trix"}
    out, seen = [], 0
    for spec in plan_runs(params):
        run = spec.run
        if isinstance(run, RunConfig) and run.method in trix and PUBLISHED_CHECKPOINT in spec.checkpoints \
                and run.model in models and not method_entry(params, run.method).init_from:
            seen += 1
            rule = run.published_selection
            if rule is None or (rule.index, rule.band) != ("worst", 0):
                out.append(f"{spec.run_id}: {rule}")
    return out if seen else ["no run of TRIX's rows keeps a published checkpoint"]


def split_problems(params) -> list[str]:
    """The runs of the two tables' rows (on the row's dataset and model) that hold images out where
    the paper holds none: DAFA's and TRIX's code train on all 50,000; WAT's own code holds out its
    validation split (300 per class), which its weights are computed on, so its method keeps one."""
    runs = plan_runs(params)
    out = []
    for p in _table_rows():
        for spec in runs:
            run = spec.run
            if not isinstance(run, RunConfig) or (run.dataset, run.model) != (p.recipe.dataset, p.recipe.model) \
                    or not equivalent_methods(params, [run.method], (p.method,)):
                continue
            own = (method_entry(params, run.method).train or {}).get("validation")
            if run.validation is not None and own is None:
                out.append(f"{p.id}: {spec.run_id} holds out {run.validation}")
    return out


def test_the_trix_runs_keep_the_checkpoint_of_the_best_worst_class(params):
    assert not trix_rule_problems(params)


def test_the_recipe_runs_hold_out_only_what_their_paper_holds_out(params):
    assert not split_problems(params)


def _mutated(name: str) -> Params:
    """The paper preset with one departure from the papers' recipes."""
    paper = _load()
    raw = copy.deepcopy(dict(paper.set_fields()))
    groups = [g for g in raw["experiments"] if g["group"].startswith("published_")]
    assert groups
    for g in groups:
        if name == "model":          # the protocol's PreAct-ResNet-18
            g["models"] = ["preact_resnet18"]
        elif name == "epochs":       # DAFA's 110 and TRIX's 150 epochs cut to 100
            g["train"] = {**g["train"], "epochs": 100}
        elif name == "split":        # the mitigation group's 2% held out
            g["train"] = {**g["train"], "validation": {"fraction": 0.02}}
        elif name == "rule" and "published_selection" in g["train"]:   # CFA's rule in place of TRIX's
            g["train"] = {**g["train"], "published_selection": {"index": "mean_plus_worst", "band": 0.02,
                                                                "from_epoch": 0.5}}
    if name == "attack step":        # the protocol's 10 steps of 2/255 at 8/255
        raw["methods"]["trades_published"]["adversary"] = {"eps": "8/255", "alpha": "2/255"}
    elif name == "control":          # DAFA against the protocol's TRADES (2/255, other groups)
        raw["methods"]["trades_dafa_published"]["compare_with"] = "trades"
    return changed(paper, experiments=raw["experiments"], methods=raw["methods"])


@pytest.fixture(scope="module")
def base_not_compared(params):
    return _not_compared(params)


@pytest.mark.parametrize("name", ["model", "attack step", "epochs", "control"])
def test_a_recipe_that_departs_from_the_paper_leaves_rows_not_compared(name, base_not_compared):
    assert not base_not_compared
    assert _not_compared(_mutated(name)), f"{name}: every row still compared"


@pytest.mark.parametrize(("name", "check"), [("split", split_problems), ("rule", trix_rule_problems)])
def test_a_split_or_a_checkpoint_rule_other_than_the_papers_is_found(name, check, params):
    """What the class-wise table does not record (the split, the rule that chose `published`) is
    read off the plan."""
    assert not check(params)
    assert check(_mutated(name)), f"{name}: not found"
