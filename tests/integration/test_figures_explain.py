"""Figures 4-6 and 8-10: layout and content from small tables and real per-sample records."""

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from study.evaluate.records import records_frame, write_records
from study.figures.catalog import make_figure
from study.figures.discrepancy import plot_discrepancy
from study.figures.explain import plot_confusion, plot_logit_similarity, plot_rank_agreement
from study.figures.heatmap import class_order
from study.metrics.classwise import classwise_table
from study.metrics.discrepancy_intervals import discrepancy_summary
from study.metrics.rank import rank_agreement

NAMES = [f"c{i}" for i in range(10)]


def _classwise(datasets=("cifar10", "mnist"), seeds=2):
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 30)
    records = []
    for ds in datasets:
        for method, base in (("standard", 0.8), ("pgd_at", 0.5)):
            for ev, drop in (("clean", 0.0), ("pgd20" if ds == "cifar10" else "pgd40", 0.3)):
                for seed in range(seeds):
                    p = np.clip(base - drop + np.linspace(-0.2, 0.2, 10), 0, 1)
                    pred = np.where(rng.random(labels.size) < p[labels], labels, (labels + 1) % 10)
                    ids = {"run_id": f"{ds}-{method}-{seed}", "dataset": ds, "model": "resnet18", "method": method,
                           "seed": seed, "optimizer": "sgd", "lr": 0.1, "schedule": "step", "weight_decay": 5e-4,
                           "epochs": 2, "eval": ev}
                    records.append((ids, pd.DataFrame({"label": labels, "pred": pred})))
    return classwise_table(records, NAMES)


def test_discrepancy_figure_shows_every_dataset_and_method():
    table = _classwise().assign(role=lambda t: np.where(t["eval"] == "clean", "clean", "robust"))
    summary = discrepancy_summary(table, by=["dataset", "method", "role", "eval"], n_boot=100)
    fig = plot_discrepancy(summary, "dataset", labels={"mnist": "MNIST"}, title="t")
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 4  # (worst/best, gap/std) x (clean, robust)
    bottom_left = fig.axes[2]  # axes are row-major: top clean, top robust, bottom clean, bottom robust
    assert [t.get_text() for t in bottom_left.get_xticklabels()] == ["cifar10", "MNIST"]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["Standard", "PGD-AT"]
    # The gap bar of cifar10 / standard / clean is the summary's value in percent.
    gap = summary.query("dataset == 'cifar10' and method == 'standard' and role == 'clean' and stat == 'gap'")
    heights = [p.get_height() for p in bottom_left.patches]
    assert gap["value"].iloc[0] * 100 == pytest.approx(heights[0])


def test_rank_agreement_heatmap_puts_spearman_below_and_kendall_above():
    wide = pd.DataFrame({"a": [0.1, 0.2, 0.3, 0.4], "b": [0.1, 0.3, 0.2, 0.4], "c": [0.4, 0.3, 0.2, 0.1]})
    rho, tau = rank_agreement(wide, "spearman"), rank_agreement(wide, "kendall")
    fig = plot_rank_agreement({"clean accuracy": (rho, tau)})
    data = fig.axes[0].images[0].get_array()
    assert data[1, 0] == pytest.approx(0.8) and data[0, 1] == pytest.approx(4 / 6)
    assert np.ma.is_masked(data[0, 0])
    assert "0.80" in [t.get_text() for t in fig.axes[0].texts]


def test_class_order_groups_superclasses_and_keeps_class_order_inside():
    groups = ["b", "a", "b", "a"]
    order, spans = class_order(groups, 4)
    assert order.tolist() == [0, 2, 1, 3]
    assert spans == [("b", 0, 2), ("a", 2, 4)]
    with pytest.raises(ValueError, match="3 class groups for 4 classes"):
        class_order(groups[:3], 4)


def test_confusion_with_100_classes_is_grouped_and_readable():
    n = 100
    groups = [f"super{c % 20}" for c in range(n)]
    matrix = np.eye(n)
    matrix[5, 25] = 0.5  # class 5 confused with class 25: the same superclass (5 % 20)
    fig = plot_confusion({"clean": matrix}, [f"class{c}" for c in range(n)], groups)
    ax = fig.axes[0]
    shown = ax.images[0].get_array()
    # grouped order puts classes 5, 25, 45, ... of super5 next to each other; shares drawn in percent
    assert shown[5 * 5, 5 * 5 + 1] == 50.0
    assert len(ax.get_yticklabels()) == n and len(ax.get_xticks()) == 0
    assert {t.get_text() for t in ax.texts} == {f"super{g}" for g in range(20)}
    assert fig.get_size_inches()[0] <= 13


def test_logit_similarity_rejects_a_wrong_shape():
    with pytest.raises(ValueError, match="expected \\(3, 3\\)"):
        plot_logit_similarity({"clean": np.eye(2)}, ["a", "b", "c"])


def _run_config(dataset, variant, model, seed):
    """A complete run config of a standard run, as a record's meta holds it."""
    return {"dataset": dataset, "data_variant": variant, "model": model, "method": "standard",
            "method_config": {"adversary": None}, "optimizer": {"name": "sgd", "lr": 0.1, "weight_decay": 5e-4},
            "schedule": {"name": "step"}, "epochs": 2, "batch_size": 128, "epoch_eval": {"per_class": 10},
            "seed": seed}


def _write_record(path, ev, seed, num=10):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(num), 8)
    logits = rng.normal(size=(labels.size, num)) + 3 * np.eye(num)[labels]
    frame = records_frame(np.arange(labels.size), labels, logits.argmax(1), logits)
    cfg = _run_config("synthetic", "default", "small_cnn", seed)
    write_records(frame, path, {"run_id": f"r{seed}", "run_config": cfg, "evaluation": {"name": ev},
                                "class_names": NAMES})


def test_make_figure_draws_confusion_and_similarity_from_records(tmp_path):
    records = []
    for seed in (0, 1):
        for ev in ("clean", "pgd3"):
            path = tmp_path / f"{ev}-{seed}.parquet"
            _write_record(path, ev, seed)
            records.append(path)
    for kind in ("confusion", "logit_similarity"):
        written = make_figure(kind, None, tmp_path / kind, records=records)
        assert [p.suffix for p in written] == [".png", ".pdf"]
        assert all(p.stat().st_size > 1000 for p in written)


def test_make_figure_discrepancy_and_rank_from_the_table(tmp_path):
    table = _classwise()
    csv = tmp_path / "classwise.csv"
    table.to_csv(csv, index=False)
    cifar = sorted(table.loc[table["dataset"] == "cifar10", "run_id"].unique())
    assert make_figure("discrepancy", csv, tmp_path / "d", by="dataset", evaluations=["clean", "pgd20", "pgd40"])
    assert make_figure("discrepancy", csv, tmp_path / "s", by="setting", runs=cifar)
    written = make_figure("rank_agreement", csv, tmp_path / "r", dataset="cifar10", runs=cifar)
    assert written[0].stat().st_size > 1000
    with pytest.raises(ValueError, match="valid: dataset, model, setting"):
        make_figure("discrepancy", csv, tmp_path / "x", by="colour")
    with pytest.raises(ValueError, match="not in"):
        make_figure("discrepancy", csv, tmp_path / "x", by="dataset", runs=["nope"])


def test_cifar100_confusion_is_grouped_by_superclass(tmp_path):
    from study.data.registry import get_dataset_info
    from study.figures.fig09_10_class_matrices import class_groups

    info = get_dataset_info("cifar100")
    groups = class_groups("cifar100")
    assert len(groups) == 100 and len(set(groups)) == 20
    assert class_groups("cifar10") is None
    labels = np.repeat(np.arange(100), 2)
    logits = np.eye(100)[labels] * 5
    frame = records_frame(np.arange(labels.size), labels, labels, logits)
    cfg = _run_config("cifar100", "official", "resnet18", 0)
    path = tmp_path / "clean.parquet"
    write_records(frame, path, {"run_id": "r", "run_config": cfg, "evaluation": {"name": "clean"},
                                "class_names": list(info.class_names)})
    written = make_figure("confusion", None, tmp_path / "c100", records=[path])
    assert written[0].stat().st_size > 10_000
