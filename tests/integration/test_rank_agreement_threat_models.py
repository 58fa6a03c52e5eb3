"""Figure 8 ranks one threat model per matrix (issue 41): a configuration alone under its threat
model is named, not ranked and not dropped silently; runs whose training settings differ only in
epochs or training images per class are two configurations, as the plan counts them; and the plan
draws a dataset's figure only where two configurations share a threat model, so a preset's figure
job never meets a dataset with nothing to rank."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from study.config.params import load_params
from study.config.plan import plan_runs
from study.figures import panels
from study.figures.fig08_rank_agreement import rank_agreement_figure
from study.metrics.classwise import classwise_table

NAMES = [f"c{i}" for i in range(5)]
SETTING = {"optimizer": "sgd", "lr": 0.1, "schedule": "step", "weight_decay": 5e-4, "epochs": 100,
           "train_per_class": 500}


def _table(configs: list[tuple[str, dict, tuple[str, ...]]]) -> pd.DataFrame:
    """A class-wise table as `study tables` writes it: per (method, setting changes, evaluations)."""
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(len(NAMES)), 40)
    records = []
    for m, (method, changes, evaluations) in enumerate(configs):
        for ev in evaluations:
            p = np.clip((0.85 if ev == "clean" else 0.45) + np.linspace(-0.2, 0.2, len(NAMES))[::1 - 2 * (m % 2)], 0, 1)
            pred = np.where(rng.random(labels.size) < p[labels], labels, (labels + 1) % len(NAMES))
            ids = {"run_id": f"run{m}", "dataset": "cifar10", "data_variant": "official", "model": "resnet18",
                   "method": method, "seed": 0, **SETTING, **changes, "eval": ev, "checkpoint": "last"}
            records.append((ids, pd.DataFrame({"label": labels, "pred": pred})))
    return classwise_table(records, NAMES).assign(check_status="pass", checks_not_passed="")


def _matrices(fig) -> dict[str, list[str]]:
    """Each drawn matrix's title and the configurations it ranks (its rows)."""
    return {ax.get_title().splitlines()[0]: [t.get_text() for t in ax.get_yticklabels()]
            for ax in fig.axes if ax.images}


def test_a_configuration_alone_under_its_threat_model_is_named_not_ranked():
    table = _table([("standard", {}, ("clean", "pgd20")), ("pgd_at", {}, ("clean", "pgd20")),
                    ("trades", {}, ("clean", "pgd_l2_05"))])
    fig = rank_agreement_figure(table, "cifar10", ["pgd20", "pgd_l2_05"], None)
    drawn = _matrices(fig)
    assert list(drawn) == ["clean accuracy", "robustness (PGD-20, L∞)"]
    assert len(fig.axes[0].images[0].get_array()) == 3 and len(fig.axes[1].images[0].get_array()) == 2
    assert "not ranked, the only configuration under its threat model: ResNet-18 | TRADES · PGD, L2 0.5" in \
        fig._supxlabel.get_text()


def test_settings_that_differ_in_epochs_or_images_per_class_are_two_configurations():
    for changes, word in (({"epochs": 2}, "2 epochs"), ({"train_per_class": 50}, "50/class")):
        table = _table([("standard", {}, ("clean",)), ("standard", changes, ("clean",))])
        fig = rank_agreement_figure(table, "cifar10", [], None)
        (ranked,) = _matrices(fig).values()
        assert len(fig.axes[0].images[0].get_array()) == 2, changes
        assert any(word in name for name in "\n".join(t.get_text() for t in fig.texts + fig.axes[0].texts
                                                      ).splitlines() + ranked), (word, ranked)


def test_two_configurations_sharing_no_threat_model_have_no_figure_planned():
    plan = plan_runs(load_params(overrides={"preset": "ci"}))
    two = [r for r in plan if r.run_id.startswith(("synthetic-small_cnn-standard-sgd", "synthetic-small_cnn-pgd_at"))]
    assert len(two) == 2
    apart = [dataclasses.replace(two[0], evaluations=["pgd3"]), dataclasses.replace(two[1], evaluations=["pgd_l2_05"])]
    assert panels.rank_agreement(apart) == {}
    shared = [dataclasses.replace(two[0], evaluations=["pgd3"]), dataclasses.replace(two[1], evaluations=["pgd3"])]
    assert list(panels.rank_agreement(shared)) == [("synthetic",)]


def _planned_table(runs) -> pd.DataFrame:
    """The class-wise table the planned runs would give: every evaluation each is planned with."""
    from study.run_directory import identity

    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(len(NAMES)), 20)
    records = [({**identity(r.run_id, r.run), "eval": ev, "checkpoint": "last"},
                pd.DataFrame({"label": labels, "pred": np.where(rng.random(labels.size) < 0.6, labels, 0)}))
               for r in runs for ev in r.evaluations]
    return classwise_table(records, NAMES).assign(check_status="pass", checks_not_passed="")


def test_every_presets_planned_figure_8_has_a_matrix_to_draw():
    """Each panel the presets plan, drawn from a table of its runs' planned evaluations: none
    raises 'rank agreement needs two configurations', every one ranks two or more."""
    for preset in ("ci", "demo", "paper"):
        plan = plan_runs(load_params(overrides={"preset": preset}))
        by_id = {r.run_id: r for r in plan}
        planned = panels.rank_agreement(plan)
        assert planned, preset
        for key, (ids, options) in planned.items():
            fig = rank_agreement_figure(_planned_table([by_id[i] for i in ids]), options["dataset"],
                                        options["evaluations"], None)
            assert max(len(ax.images[0].get_array()) for ax in fig.axes if ax.images) >= 2, (preset, key)
