"""The trust rule in the figures (issue 24, point 6): a sample counts as robust only if no check
flagged its evaluation, and a flagged evaluation is marked on every figure that reads the
study's tables (1, 2, 4-6, 8, 13), never silently; with no flag nothing is marked, and a table
written before the checks (no `check_status`) draws as before."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

import study.figures.style as style
from study.figures.catalog import make_figure
from study.figures.trust import FLAGGED, HATCH, split_counted
from study.metrics.classwise import classwise_table

NAMES = [f"c{i}" for i in range(5)]
SETTING = {"optimizer": "sgd", "lr": 0.1, "schedule": "step", "weight_decay": 5e-4, "epochs": 100}


def _table(datasets=("cifar10",), methods=("standard", "pgd_at"), seeds=(0, 1)) -> pd.DataFrame:
    """A per-seed class-wise table as `study tables` writes it: every check passed."""
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(len(NAMES)), 40)
    records = []
    for ds in datasets:
        for m, method in enumerate(methods):
            for ev, base in (("clean", 0.85), ("pgd20", 0.45)):
                for seed in seeds:
                    p = np.clip(base - 0.1 * m + np.linspace(-0.2, 0.2, len(NAMES))[::1 - 2 * (m % 2)], 0, 1)
                    pred = np.where(rng.random(labels.size) < p[labels], labels, (labels + 1) % len(NAMES))
                    ids = {"run_id": f"{ds}-{method}-{seed}", "dataset": ds, "data_variant": "official",
                           "model": "resnet18", "method": method, "seed": seed, **SETTING, "eval": ev,
                           "checkpoint": "last"}
                    records.append((ids, pd.DataFrame({"label": labels, "pred": pred})))
    return classwise_table(records, NAMES).assign(check_status="pass", checks_not_passed="")


def _flag(table: pd.DataFrame, seeds=(0, 1), method="pgd_at", ev="pgd20", dataset="cifar10") -> pd.DataFrame:
    """The same table with the checks' flag on `ev` of `method` for `seeds`."""
    at = (table["method"] == method) & (table["eval"] == ev) & table["seed"].isin(seeds) & \
        (table["dataset"] == dataset)
    out = table.copy()
    out.loc[at, "check_status"] = "flag"
    out.loc[at, "checks_not_passed"] = "large_eps_breaks (flag)"
    return out


@pytest.fixture
def drawn(monkeypatch):
    """make_figure's figures, kept instead of saved."""
    figures: list[Figure] = []

    def keep(fig, stem):
        figures.append(fig)
        return []
    monkeypatch.setattr(style, "save_figure", keep)  # the draw functions import it when they draw
    return figures


def _draw(drawn, tmp_path, kind, table, **options) -> Figure:
    csv = tmp_path / f"{kind}.csv"
    table.to_csv(csv, index=False)
    make_figure(kind, csv, tmp_path / kind, **options)
    return drawn[-1]


def _texts(fig: Figure) -> str:
    """Every text of the figure a reader sees: titles, labels, legends and their titles."""
    texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    return "\n".join(texts)


def _hatched(fig: Figure) -> list:
    return [p for ax in fig.axes for p in ax.patches if p.get_hatch()]


def test_trust_split_reads_old_tables_as_unchecked():
    table = _table().drop(columns=["check_status", "checks_not_passed"])
    counted, flagged = split_counted(table)
    assert len(counted) == len(table) and flagged.empty
    with pytest.raises(ValueError, match="unknown check status"):
        split_counted(table.assign(check_status="maybe"))


def test_classwise_bars_of_a_flagged_evaluation_are_hatched_and_labelled(drawn, tmp_path):
    options = {"dataset": "cifar10", "model": "resnet18", "method": "pgd_at"}
    fig = _draw(drawn, tmp_path, "classwise", _flag(_table()), **options)
    hatched = _hatched(fig)
    assert len(hatched) == 2 * len(NAMES)  # the PGD-20 bars, top and mean-subtracted
    assert all(p.get_hatch() == HATCH for p in hatched)
    legend = fig.legends[0]
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == ["clean accuracy", f"robustness (PGD-20, L∞), {FLAGGED}"]
    assert "hatched" in legend.get_title().get_text()
    # the measured value stays, marked: the bars are the mean over the flagged seeds
    table = _table()
    rows = table[(table["method"] == "pgd_at") & (table["eval"] == "pgd20")]
    measured = rows.groupby("class")["acc"].mean().to_numpy() * 100
    assert sorted(p.get_height() for p in hatched[:len(NAMES)]) == pytest.approx(sorted(measured))


def test_classwise_leaves_out_a_flagged_seed_and_names_it(drawn, tmp_path):
    options = {"dataset": "cifar10", "model": "resnet18", "method": "pgd_at"}
    fig = _draw(drawn, tmp_path, "classwise", _flag(_table(), seeds=(1,)), **options)
    assert not _hatched(fig)
    note = fig.legends[0].get_title().get_text()
    assert f"left out, {FLAGGED}: PGD-20, L∞ (seed 1)" in note
    table = _table()
    counted = table[(table["method"] == "pgd_at") & (table["eval"] == "pgd20") & (table["seed"] == 0)]
    top = fig.axes[0]
    heights = [p.get_height() for p in top.patches]
    # the PGD-20 bars are seed 0's accuracies alone, not the mean with the flagged seed
    assert heights[len(NAMES):] == pytest.approx(counted.sort_values("class")["acc"].to_numpy() * 100)


def test_classwise_from_the_seed_table_names_what_it_left_out():
    from study.figures.classwise import plot_classwise
    from study.tables.classwise import counted_seed_aggregate

    table = _table().assign(train_per_class=-1, train_data="original")
    table = table[table["method"] == "pgd_at"]
    seeds = counted_seed_aggregate(_flag(table))  # classwise_seeds.csv: PGD-20 flagged on both seeds
    fig = plot_classwise(seeds)
    assert len(fig.axes[0].patches) == len(NAMES)  # clean alone: PGD-20 has no counted seed
    assert f"left out, {FLAGGED}: PGD-20, L∞ (2 seeds, all)" in fig.legends[0].get_title().get_text()
    partly = plot_classwise(counted_seed_aggregate(_flag(table, seeds=(1,))))
    assert len(partly.axes[0].patches) == 2 * len(NAMES)
    assert f"left out, {FLAGGED}: PGD-20, L∞ (1 seed)" in partly.legends[0].get_title().get_text()


@pytest.mark.parametrize("old", [False, True])
def test_no_flag_marks_nothing(drawn, tmp_path, old):
    table = _table(datasets=("cifar10", "mnist"), methods=("standard", "pgd_at", "trades"))
    if old:  # written before the checks
        table = table.drop(columns=["check_status", "checks_not_passed"])
    cifar = table[table["dataset"] == "cifar10"]
    figures = [
        _draw(drawn, tmp_path, "classwise", table, dataset="cifar10", model="resnet18", method="pgd_at"),
        _draw(drawn, tmp_path, "discrepancy", table, by="dataset"),
        _draw(drawn, tmp_path, "rank_agreement", cifar, dataset="cifar10"),
        _draw(drawn, tmp_path, "mitigation", table, dataset="cifar10", model="resnet18", method="all"),
    ]
    for fig in figures:
        assert not _hatched(fig)
        assert "flagged" not in _texts(fig)


def test_discrepancy_leaves_a_flagged_evaluation_out_and_names_it(drawn, tmp_path):
    table = _table(datasets=("cifar10", "mnist"))
    plain = _draw(drawn, tmp_path, "discrepancy", table, by="dataset")
    fig = _draw(drawn, tmp_path, "discrepancy", _flag(table), by="dataset")
    # axes: worst/best clean, robust; max-min clean, robust: the robust bars lose CIFAR-10 / PGD-AT
    assert len(plain.axes[3].patches) == 4 and len(fig.axes[3].patches) == 3
    assert [p.get_height() for p in fig.axes[2].patches] == [p.get_height() for p in plain.axes[2].patches]
    flagged_gap = plain.axes[3].patches[2].get_height()  # PGD-AT's first category: CIFAR-10
    assert flagged_gap not in [p.get_height() for p in fig.axes[3].patches]
    note = fig.legends[0].get_title().get_text()
    assert f"left out, {FLAGGED}: CIFAR-10 · PGD-AT · PGD-20, L∞ (seeds 0, 1)" in note


def test_rank_agreement_leaves_a_flagged_evaluation_out_and_names_it(drawn, tmp_path):
    table = _table(methods=("standard", "pgd_at", "trades"))
    fig = _draw(drawn, tmp_path, "rank_agreement", _flag(table), dataset="cifar10")
    clean, robust = (ax.images[0].get_array().shape for ax in fig.axes[:2])
    assert clean == (3, 3) and robust == (2, 2)  # PGD-AT's robustness is not ranked
    assert "PGD-AT" not in "".join(t.get_text() for t in fig.axes[1].get_yticklabels())
    assert f"left out, {FLAGGED}: ResNet-18 | PGD-AT · PGD-20, L∞ (seeds 0, 1)" in fig._supxlabel.get_text()
    # one configuration left has nothing to be ranked with: its panel goes, the note stays
    alone = _draw(drawn, tmp_path, "rank_agreement", _flag(_table()), dataset="cifar10")
    assert [ax.get_title().splitlines()[0] for ax in alone.axes if ax.images] == ["clean accuracy"]
    assert f"left out, {FLAGGED}: ResNet-18 | PGD-AT · PGD-20, L∞" in alone._supxlabel.get_text()


def test_mitigation_counts_no_flagged_seed_and_names_what_it_left_out(drawn, tmp_path):
    table = _flag(_flag(_table(), seeds=(1,)), method="standard", ev="clean")
    fig = _draw(drawn, tmp_path, "mitigation", table, dataset="cifar10", model="resnet18", method="all")
    saved = pd.read_csv(tmp_path / "mitigation.csv").set_index(["method", "eval"])
    assert saved.loc[("pgd_at", "pgd20"), "n_seeds"] == 1 and saved.loc[("pgd_at", "pgd20"), "flagged_seeds"] == 1
    assert saved.loc[("standard", "clean"), "n_seeds"] == 0 and np.isnan(saved.loc[("standard", "clean"), "mean"])
    assert saved.loc[("standard", "pgd20"), "flagged_seeds"] == 0
    counted = _table().query("method == 'pgd_at' and eval == 'pgd20' and seed == 0")["acc"].mean() * 100
    measured = _table().query("method == 'pgd_at' and eval == 'pgd20'")["acc"].mean() * 100
    xs = [x for ax in fig.axes for line in ax.lines for x in line.get_xdata()]
    assert counted == pytest.approx(min(xs, key=lambda x: abs(x - counted)))
    assert not any(x == pytest.approx(measured) for x in xs)
    # the clean panel draws one method: standard's clean evaluation was flagged on every seed
    assert [ax.get_title() for ax in fig.axes] == ["PGD-20, L∞ · 2 methods", "Clean · 1 method"]
    note = fig.legends[0].get_title().get_text().replace("\n", " ")
    assert f"left out, {FLAGGED}:" in note
    assert "PGD-AT · PGD-20, L∞ (seed 1)" in note and "Standard · Clean (seeds 0, 1)" in note
