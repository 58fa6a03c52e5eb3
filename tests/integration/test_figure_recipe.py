"""A figure drawn from trained runs says under its title when they were trained below the published
recipe (style.reduced_recipe: fewer than 120 epochs, or a subset of the training images per class),
decided from the `epochs` and `train_per_class` of the runs in the table it is given, whatever preset
made them: figures 3, 4-6, 7, 8, 11, 12, 14 and 13's policy epochs, each on a hand-built table at the
demo's recipe (the note) and at the published one (200 epochs, all images: no note)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from matplotlib.figure import Figure

from study.figures.epochs import plot_epochs
from study.figures.features import feature_rows, plot_feature_classwise
from study.figures.fig04_06_discrepancy import discrepancy_figure
from study.figures.fig08_rank_agreement import rank_agreement_figure
from study.figures.mitigation import plot_policy_epochs
from study.figures.robustness import plot_cfp, plot_corruptions, plot_frl_errors
from study.metrics.intervals import wilson_interval

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
# per class: clean accuracy well above chance, robust below it, so no chance-level caveat interferes
CLEAN = [0.44, 0.63, 0.24, 0.16, 0.47, 0.47, 0.42, 0.52, 0.69, 0.53]
ROBUST = [0.34, 0.38, 0.12, 0.07, 0.25, 0.26, 0.22, 0.28, 0.44, 0.37]
# the demo's recipe: 2 epochs on 3,000 training images per class; the published: 200 on all of them
DEMO = {"epochs": 2, "train_per_class": 3000.0}
PUBLISHED = {"epochs": 200, "train_per_class": math.nan}
SUBTITLE_END = "shows direction, not size"


def _title(fig: Figure) -> str:
    return fig._suptitle.get_text()


def _says_reduced(fig: Figure, *parts: str) -> bool:
    """Whether the note is the title's last lines (wrapped) and names what was reduced."""
    heading, _, note = _title(fig).partition("\nreduced recipe: ")
    note = note.replace("\n", " ")
    return bool(heading) and note.endswith(SUBTITLE_END) and all(part in note for part in parts)


def _says_nothing(fig: Figure) -> bool:
    return "reduced recipe" not in _title(fig)


def _run(recipe: dict, *, run_id: str = "r0", method: str = "pgd_at", model: str = "small_cnn_s2",
         dataset: str = "cifar10", seed: int = 0, **extra) -> dict:
    return {"run_id": run_id, "dataset": dataset, "data_variant": "official", "model": model, "method": method,
            "seed": seed, "optimizer": "sgd", "lr": 0.1, "schedule": "step", "weight_decay": 5e-4,
            "train_data": "original", **recipe, **extra}


def _classwise(runs: list[dict], evals=("clean", "pgd20"), n: int = 100) -> pd.DataFrame:
    """The class-wise table's rows of `runs` (from _run): per evaluation and class, counts out of `n`."""
    rows = []
    for run in runs:
        for ev in evals:
            accs = CLEAN if ev == "clean" else ROBUST
            for c, (name, acc) in enumerate(zip(CLASSES, accs, strict=True)):
                k = round(acc * n) + run["seed"]  # seeds a little apart: an interval over seeds exists
                lo, hi = wilson_interval(k, n)
                rows.append({**run, "eval": ev, "checkpoint": "last", "check_status": "pass", "class": c,
                             "class_name": name, "n": n, "correct": k, "acc": k / n, "ci_lo": lo, "ci_hi": hi})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- figure 7: epochs


def _epochs(recipe: dict, methods=("pgd_at",), seeds=(0,)) -> pd.DataFrame:
    """The epochs table of one run per (method, seed) over `recipe`'s epochs (at least 3 drawn)."""
    last = max(3, min(int(recipe["epochs"]), 5))
    rows = []
    for method in methods:
        for seed in seeds:
            run = _run(recipe, run_id=f"{method}-s{seed}", method=method, seed=seed)
            for epoch in range(1, last + 1):
                for c, name in enumerate(CLASSES):
                    # class weights that differ between classes and move over the epochs: a policy state
                    rows.append({**run, "epoch": epoch, "class": c, "class_name": name, "n": 20,
                                 "clean_acc": CLEAN[c], "robust_acc": ROBUST[c],
                                 "weight": 1.0 + 0.1 * c * epoch, "epsilon": 8 / 255})
    return pd.DataFrame(rows)


def test_epochs_figure_names_a_reduced_recipe_from_the_runs_epochs_and_images():
    fig = plot_epochs(_epochs(DEMO), title="CIFAR-10 | Small CNN-S2 | PGD-AT")
    assert _says_reduced(fig, "2 epochs", "3,000 training images per class")
    # the worst classes are still named on the line above the note
    assert "worst class at epoch" in _title(fig).split("\nreduced recipe")[0]
    assert _says_nothing(plot_epochs(_epochs(PUBLISHED), title="CIFAR-10 | Small CNN-S2 | PGD-AT"))


def test_epochs_figure_reads_the_run_config_not_the_epochs_drawn():
    """An epochs table of a 200-epoch run is published-scale even where it holds only some epochs;
    its 5 epochs drawn of a 10-epoch run are reduced for the run's 10 epochs."""
    assert _says_nothing(plot_epochs(_epochs(PUBLISHED).query("epoch <= 3")))
    assert _says_reduced(plot_epochs(_epochs({"epochs": 10, "train_per_class": math.nan})), "10 epochs")


def test_policy_epochs_figure_names_a_reduced_recipe():
    methods = ["frl_reweight", "at"]
    fig = plot_policy_epochs(_epochs(DEMO, methods=methods), methods, title="CIFAR-10 | Small CNN-S2")
    assert _says_reduced(fig, "2 epochs", "3,000 training images per class")
    published = plot_policy_epochs(_epochs(PUBLISHED, methods=methods), methods, title="CIFAR-10 | Small CNN-S2")
    assert _says_nothing(published)


def test_policy_epochs_figure_reads_only_the_runs_of_its_methods():
    table = pd.concat([_epochs(PUBLISHED, methods=["frl_reweight"]), _epochs(DEMO, methods=["standard"])])
    assert _says_nothing(plot_policy_epochs(table, ["frl_reweight"], title="CIFAR-10 | Small CNN-S2"))
    # and its caveat counts the epochs of those runs, not of another method's longer run in the table
    longer = _epochs({"epochs": 5, "train_per_class": math.nan}, methods=["standard"])
    fig = plot_policy_epochs(pd.concat([_epochs(DEMO, methods=["frl_reweight"]), longer]), ["frl_reweight"])
    assert "(3 epochs)" in fig.axes[0].get_title()


# ---------------------------------------------------------------- figures 3, 11, 14: robustness tables


def _frl(runs: list[dict]) -> pd.DataFrame:
    rows = []
    for run in runs:
        for c, name in enumerate(CLASSES):
            rows.append({**run, "eval": "pgd20", "checkpoint": "last", "class": c, "class_name": name, "n": 100,
                         "standard_error": 1 - CLEAN[c], "boundary_error": CLEAN[c] - ROBUST[c],
                         "robust_error": 1 - ROBUST[c]})
    return pd.DataFrame(rows)


def test_frl_errors_figure_names_a_reduced_recipe_of_any_method_drawn():
    both = [_run(DEMO, run_id="a", method="standard"), _run(DEMO, run_id="b", method="pgd_at")]
    assert _says_reduced(plot_frl_errors(_frl(both), "CIFAR-10 | Small CNN-S2"), "2 epochs", "3,000 training images")
    published = [_run(PUBLISHED, run_id="a", method="standard"), _run(PUBLISHED, run_id="b", method="pgd_at")]
    assert _says_nothing(plot_frl_errors(_frl(published), "CIFAR-10 | Small CNN-S2"))
    # FRL's published fine-tuning of 120 epochs beside a 200-epoch PGD-AT: both published recipes
    frl = [_run({"epochs": 120, "train_per_class": math.nan}, run_id="a", method="frl_reweight"), published[1]]
    assert _says_nothing(plot_frl_errors(_frl(frl), "CIFAR-10 | Small CNN-S2"))
    # one method below it is enough: the figure compares them
    mixed = [_run({"epochs": 60, "train_per_class": math.nan}, run_id="a", method="frl_reweight"), published[1]]
    assert _says_reduced(plot_frl_errors(_frl(mixed), "CIFAR-10 | Small CNN-S2"), "60-200 epochs")


def _cfp(runs: list[dict]) -> pd.DataFrame:
    rows = []
    for run in runs:
        for ev in ("clean", "pgd20"):
            for c, name in enumerate(CLASSES):
                share = (c + 1) / 55
                rows.append({**run, "eval": ev, "checkpoint": "last", "class": c, "class_name": name, "cfp": share,
                             "misclassified": 400})
    return pd.DataFrame(rows)


def test_cfp_figure_names_a_reduced_recipe():
    """The figure draws the mean over seeds, which keeps no run columns: the note is read before."""
    demo = [_run(DEMO, run_id="s0"), _run(DEMO, run_id="s1", seed=1)]
    assert _says_reduced(plot_cfp(_cfp(demo), "CIFAR-10 | Small CNN-S2 | PGD-AT"), "2 epochs", "3,000 training images")
    assert _says_nothing(plot_cfp(_cfp([_run(PUBLISHED)]), "CIFAR-10 | Small CNN-S2 | PGD-AT"))


def _corruptions(recipe: dict) -> pd.DataFrame:
    rows = []
    for corruption in ("gaussian_noise", "contrast"):
        for severity in (1, 5):
            for c, name in enumerate(CLASSES):
                k = round(CLEAN[c] * 20)
                rows.append({**_run(recipe), "corruption_variant": "regenerated", "corruption": corruption,
                             "severity": severity, "class": c, "class_name": name, "n": 20, "correct": k,
                             "acc": k / 20})
    return pd.DataFrame(rows)


def test_corruptions_figure_names_a_reduced_recipe_under_its_corruption_line():
    fig = plot_corruptions(_corruptions(DEMO), "CIFAR-10 | Small CNN-S2 | PGD-AT")
    assert _says_reduced(fig, "2 epochs", "3,000 training images per class")
    assert "CIFAR-10-C (regenerated), severities 1, 5" in _title(fig).split("\nreduced recipe")[0]
    assert _says_nothing(plot_corruptions(_corruptions(PUBLISHED), "CIFAR-10 | Small CNN-S2 | PGD-AT"))


def test_a_table_without_the_run_columns_gets_no_note():
    """Nothing to decide from: the figure claims neither a reduced nor a published recipe."""
    table = _corruptions(DEMO).drop(columns=["epochs", "train_per_class"])
    assert _says_nothing(plot_corruptions(table, "CIFAR-10 | Small CNN-S2 | PGD-AT"))


# ---------------------------------------------------------------- figures 4-6 and 8: several runs


@pytest.mark.parametrize("by", ["dataset", "model", "setting"])
def test_discrepancy_figures_name_a_reduced_recipe_of_the_runs_summarised(by):
    def runs(recipe, other=None):
        other = other or recipe
        second = {"dataset": {"dataset": "mnist"}, "model": {"model": "lenet"}, "setting": {"lr": 0.01}}[by]
        return [_run(recipe, run_id="a", method="standard"), _run(recipe, run_id="b", method="pgd_at"),
                {**_run(other, run_id="c", method="standard"), **second},
                {**_run(other, run_id="d", method="pgd_at"), **second}]

    assert _says_reduced(discrepancy_figure(_classwise(runs(DEMO)), by, ["pgd20"], None), "2 epochs",
                         "3,000 training images")
    assert _says_nothing(discrepancy_figure(_classwise(runs(PUBLISHED)), by, ["pgd20"], None))
    # the runs of one category at the published recipe do not hide those of the other
    reduced = runs(PUBLISHED, {"epochs": 30, "train_per_class": math.nan})
    assert _says_reduced(discrepancy_figure(_classwise(reduced), by, ["pgd20"], None), "30-200 epochs")


def test_a_run_the_checks_left_out_is_not_described():
    """Figure 5 of a published run and a flagged short one: the short one is drawn nowhere."""
    table = _classwise([_run(PUBLISHED, run_id="a", method="standard"),
                        {**_run(DEMO, run_id="b", method="standard"), "model": "lenet"}])
    table.loc[table["run_id"] == "b", "check_status"] = "fail"
    assert _says_nothing(discrepancy_figure(table, "model", ["pgd20"], None))


def test_rank_agreement_figure_names_a_reduced_recipe():
    def runs(recipe):
        return [_run(recipe, run_id="a", method="standard"), _run(recipe, run_id="b", method="pgd_at"),
                _run(recipe, run_id="c", method="standard", model="lenet")]

    fig = rank_agreement_figure(_classwise(runs(DEMO)), "cifar10", ["pgd20"], None)
    assert _says_reduced(fig, "2 epochs", "3,000 training images per class")
    assert _title(fig).startswith("CIFAR-10: do the same classes lead and lag?")
    assert _says_nothing(rank_agreement_figure(_classwise(runs(PUBLISHED)), "cifar10", ["pgd20"], None))


# ---------------------------------------------------------------- figure 12: constructed datasets


def _features(source: dict, constructed: dict) -> pd.DataFrame:
    """Figure 12's rows: a standard and a robust source run and two runs on constructed sets."""
    runs = [_run(source, run_id="std", method="standard"), _run(source, run_id="rob", method="pgd_at_l2"),
            {**_run(constructed, run_id="dr", method="standard"), "train_data": "d_r"},
            {**_run(constructed, run_id="dnr", method="standard"), "train_data": "d_nr"}]
    return feature_rows(_classwise(runs, evals=("clean",)), "cifar10", "small_cnn_s2",
                        {"standard": "std", "robust": "rob"})


def test_features_figure_names_a_reduced_recipe_of_its_sources_or_its_constructed_runs():
    fig = plot_feature_classwise(_features(DEMO, {"epochs": 4, "train_per_class": math.nan}), "CIFAR-10")
    assert _says_reduced(fig, "2-4 epochs", "3,000 training images per class")
    assert _says_nothing(plot_feature_classwise(_features(PUBLISHED, PUBLISHED), "CIFAR-10"))
    # published sources do not vouch for short runs on the constructed sets
    assert _says_reduced(plot_feature_classwise(_features(PUBLISHED, {"epochs": 4, "train_per_class": math.nan}),
                                         "CIFAR-10"), "4-200 epochs")


def test_an_explicit_recipe_replaces_the_one_read_from_the_table():
    """recipe=None draws no note whatever the runs; a given one is drawn as given."""
    assert _says_nothing(plot_epochs(_epochs(DEMO), recipe=None))
    assert _title(plot_corruptions(_corruptions(PUBLISHED), "x", recipe="reduced recipe: " + SUBTITLE_END)) \
        .endswith("\nreduced recipe: " + SUBTITLE_END)
