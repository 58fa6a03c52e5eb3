"""Figure 4's categories name the robust evaluation each dataset is drawn with, and nothing when the
checks left every robust evaluation out (the ci preset's PGD-3 is flagged): no empty '()' under the
dataset's name."""

from __future__ import annotations

import numpy as np
import pandas as pd

from study.figures.fig04_06_discrepancy import discrepancy_figure
from study.metrics.classwise import classwise_table

NAMES = [f"c{i}" for i in range(5)]
SETTING = {"optimizer": "sgd", "lr": 0.1, "schedule": "step", "weight_decay": 5e-4, "epochs": 100}


def _table(flag_robust: bool) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(len(NAMES)), 40)
    records = []
    for m, method in enumerate(("standard", "pgd_at")):
        for ev, base in (("clean", 0.85), ("pgd20", 0.45)):
            pred = np.where(rng.random(labels.size) < base - 0.1 * m, labels, (labels + 1) % len(NAMES))
            ids = {"run_id": f"run-{method}", "dataset": "cifar10", "data_variant": "official", "model": "resnet18",
                   "method": method, "seed": 0, **SETTING, "eval": ev, "checkpoint": "last"}
            records.append((ids, pd.DataFrame({"label": labels, "pred": pred})))
    table = classwise_table(records, NAMES).assign(check_status="pass", checks_not_passed="")
    if flag_robust:
        table.loc[table["eval"] == "pgd20", ["check_status", "checks_not_passed"]] = ["flag", "large_eps_breaks (flag)"]
    return table


def _categories(fig) -> set[str]:
    return {t.get_text() for ax in fig.axes for t in ax.get_xticklabels() if t.get_text()}


def test_dataset_categories_name_their_robust_evaluation_or_nothing():
    assert _categories(discrepancy_figure(_table(False), "dataset", ["pgd20"], None)) == {"CIFAR-10\n(PGD-20, L∞)"}
    assert _categories(discrepancy_figure(_table(True), "dataset", ["pgd20"], None)) == {"CIFAR-10"}
