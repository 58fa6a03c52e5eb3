import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure

from study.figures import plot_classwise, plot_epochs, save_figure
from study.labels import eval_label, eval_name, method_name, model_name
from study.metrics.classwise import classwise_table, seed_aggregate

CIFAR10 = ["airplane", "automobile", "bird", "cat", "deer",
           "dog", "frog", "horse", "ship", "truck"]


def per_seed_table(names: list[str], seeds: int = 3, per_class: int = 50) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    num = len(names)
    labels = np.repeat(np.arange(num), per_class)
    rates = {"clean": np.linspace(0.6, 0.95, num), "pgd20": np.linspace(0.1, 0.6, num)}
    records = []
    for seed in range(seeds):
        for ev, p in rates.items():
            pred = np.where(rng.random(labels.size) < p[labels], labels, (labels + 1) % num)
            samples = pd.DataFrame({"index": np.arange(labels.size), "label": labels,
                                    "pred": pred})
            ids = {"run_id": f"r{seed}", "dataset": "cifar10", "model": "preact_resnet18",
                   "method": "pgd_at", "seed": seed, "eval": ev}
            records.append((ids, samples))
    return classwise_table(records, names)


def epoch_table(robust: bool = True, seeds: int = 1, epochs: int = 5) -> pd.DataFrame:
    rows = []
    for seed in range(seeds):
        for epoch in range(1, epochs + 1):
            for c, name in enumerate(CIFAR10):
                clean = min(1.0, 0.1 * epoch + 0.02 * c + 0.01 * seed)
                rows.append({"epoch": epoch, "class": c, "class_name": name, "n": 100,
                             "clean_acc": clean,
                             "robust_acc": clean / 2 if robust else np.nan,
                             "train_acc": 0.5, "train_loss": 1.0, "lr": 0.1, "seed": seed,
                             "weight": 1.0, "epsilon": 8 / 255})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- style

def test_display_names():
    # the key alone names what it spells out (the study's attacks are L-inf unless the key says L2)
    assert eval_name("pgd20") == "PGD-20, L∞"
    assert eval_name("clean") == "Clean"
    assert eval_name("mystery") == "Mystery"  # never the raw key
    assert eval_label("clean") == "clean accuracy"
    assert eval_label("pgd100") == "robustness (PGD-100, L∞)"
    assert eval_label("pgd100@best") == "robustness (PGD-100, L∞), best checkpoint"
    assert model_name("preact_resnet18") == "PreAct-ResNet-18"
    assert model_name("unknown_net") == "Unknown Net"
    assert method_name("pgd_at") == "PGD-AT"
    assert method_name("standard") == "Standard"


# ---------------------------------------------------------------- plot_classwise

def test_plot_classwise_layout():
    seeds = per_seed_table(CIFAR10)
    agg = seed_aggregate(seeds, by=["dataset", "model", "method", "eval"])
    fig = plot_classwise(agg, "CIFAR-10 | PreAct-ResNet-18", seeds=seeds)
    assert isinstance(fig, Figure)
    top, bottom = fig.axes
    assert [t.get_text() for t in bottom.get_xticklabels()] == CIFAR10
    assert "%" in top.get_ylabel()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "clean accuracy", "robustness (PGD-20, L∞)"]
    assert fig._suptitle.get_text() == "CIFAR-10 | PreAct-ResNet-18"

    # 10 classes x 2 evaluations; heights are the seed means in percent
    assert len(top.patches) == 20
    clean = agg[agg["eval"] == "clean"].sort_values("class")
    heights = [p.get_height() for p in top.patches[:10]]
    assert heights == pytest.approx((clean["acc"] * 100).tolist())
    centred = [p.get_height() for p in bottom.patches[:10]]
    assert centred == pytest.approx((clean["acc_centered"] * 100).tolist())
    assert sum(centred) == pytest.approx(0.0, abs=1e-9)
    assert any(line.get_ydata()[0] == 0 for line in bottom.get_lines())  # zero line

    dots = [c for c in top.collections if isinstance(c, PathCollection)]
    assert sum(len(c.get_offsets()) for c in dots) == 3 * 10 * 2  # seeds x classes x evals


def test_plot_classwise_accepts_per_seed_table_and_names_default_title():
    seeds = per_seed_table(CIFAR10)
    fig = plot_classwise(seeds)
    top, _ = fig.axes
    agg = seed_aggregate(seeds, by=["eval"])
    robust = agg[agg["eval"] == "pgd20"].sort_values("class")
    assert [p.get_height() for p in top.patches[10:]] == pytest.approx(
        (robust["acc"] * 100).tolist())
    assert "CIFAR-10" in fig._suptitle.get_text()
    assert "PreAct-ResNet-18" in fig._suptitle.get_text()


def test_plot_classwise_single_seed_has_no_dots():
    seeds = per_seed_table(CIFAR10, seeds=1)
    fig = plot_classwise(seeds)
    assert not [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]


def test_plot_classwise_rejects_two_models():
    seeds = per_seed_table(CIFAR10, seeds=1)
    mixed = pd.concat([seeds, seeds.assign(model="resnet18")])
    agg = seed_aggregate(mixed, by=["model", "eval"])
    with pytest.raises(ValueError, match="one model"):
        plot_classwise(agg, "mixed")


def test_plot_classwise_100_classes():
    names = [f"class_{i:02d}" for i in range(100)]
    agg = seed_aggregate(per_seed_table(names, seeds=1, per_class=5), by=["eval"])
    fig = plot_classwise(agg, "CIFAR-100")
    labels = [t.get_text() for t in fig.axes[1].get_xticklabels()]
    assert 0 < len(labels) <= 30
    assert set(labels) <= set(names) and labels[0] == "class_00"
    assert len(fig.axes[0].patches) == 200


# ---------------------------------------------------------------- plot_epochs

def test_plot_epochs_two_panels_and_worst_class():
    fig = plot_epochs(epoch_table(), "toy run")
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2
    assert [ax.get_title() for ax in fig.axes] == ["clean accuracy", "robust accuracy"]
    assert all(len(ax.get_lines()) == 10 for ax in fig.axes)
    # every line is labelled at its end (no legend to match colours against); the worst class
    # with its final value
    labels = sorted(t.get_text() for t in fig.axes[0].texts)
    assert labels == sorted([*CIFAR10[1:], "airplane (50%)"])
    assert not fig.legends
    # class 0 (airplane) is lowest at the final epoch in both panels
    assert "airplane" in fig._suptitle.get_text()
    assert "toy run" in fig._suptitle.get_text()
    widths = {line.get_label(): line.get_linewidth() for line in fig.axes[0].get_lines()}
    assert widths["airplane"] > widths["truck"]


def test_plot_epochs_drops_robust_panel_when_nan_or_absent():
    fig = plot_epochs(epoch_table(robust=False), "clean only")
    assert len(fig.axes) == 1
    assert fig.axes[0].get_title() == "clean accuracy"
    fig = plot_epochs(epoch_table().drop(columns="robust_acc"), "no column")
    assert len(fig.axes) == 1


def test_plot_epochs_averages_seeds():
    table = epoch_table(seeds=2)
    fig = plot_epochs(table, "two seeds")
    line = next(ln for ln in fig.axes[0].get_lines() if ln.get_label() == "bird")
    expected = table[table["class"] == 2].groupby("epoch")["clean_acc"].mean() * 100
    assert np.asarray(line.get_ydata()) == pytest.approx(expected.to_numpy())
    assert fig.axes[0].collections  # the worst class's interval band
    assert "2 seeds" in fig._suptitle.get_text()


def test_plot_epochs_rejects_percent_values():
    table = epoch_table()
    table["clean_acc"] *= 100
    with pytest.raises(ValueError, match="fractions"):
        plot_epochs(table, "percent")


def test_plot_epochs_100_classes_does_not_crash():
    rows = [{"epoch": e, "class": c, "class_name": f"c{c}", "clean_acc": (c + e) / 200,
             "robust_acc": np.nan} for e in range(1, 4) for c in range(100)]
    fig = plot_epochs(pd.DataFrame(rows), "CIFAR-100")
    assert len(fig.axes) == 1 and len(fig.axes[0].get_lines()) == 100
    assert not fig.legends  # a 100-entry legend is dropped


# ---------------------------------------------------------------- save_figure

def test_save_figure_writes_png_and_pdf(tmp_path):
    fig = plot_epochs(epoch_table(), "saved")
    paths = save_figure(fig, tmp_path / "nested" / "fig7.cifar10")
    assert [p.name for p in paths] == ["fig7.cifar10.png", "fig7.cifar10.pdf"]
    png, pdf = paths
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert png.stat().st_size > 1000 and pdf.stat().st_size > 1000
    assert sorted(p.name for p in (tmp_path / "nested").iterdir()) == [
        "fig7.cifar10.pdf", "fig7.cifar10.png"]  # no temporary files left behind


def test_save_classwise_figure(tmp_path):
    paths = save_figure(plot_classwise(per_seed_table(CIFAR10, seeds=1)), tmp_path / "fig1")
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
