"""Figures a reviewer accepts unchanged (issue 15, point 6): every figure kind rendered from small
synthetic tables built here with the study's own metric code, then checked for its pixel size,
labels (no configuration key), units (percent), legends (never on the data), threat models (L2 and
L-inf never on one axis), honest titles and caveats on runs too short to mean anything."""

from __future__ import annotations

import re
import struct
import weakref
from collections.abc import Callable
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from study import labels
from study.evaluate.records import records_frame
from study.figures.classwise import plot_classwise
from study.figures.discrepancy import plot_discrepancy
from study.figures.epochs import plot_epochs, spread_labels
from study.figures.explain import plot_confusion, plot_logit_similarity, plot_rank_agreement, rank_panels
from study.figures.features import plot_feature_classwise, plot_feature_examples
from study.figures.mitigation import mitigation_table, plot_mitigation, plot_policy_epochs
from study.figures.robustness import plot_cfp, plot_corruptions, plot_frl_errors
from study.figures.style import (
    MAX_PIXELS,
    MIN_IMAGES_SEEN,
    counted_title,
    images_seen,
    run_caveat,
    save_figure,
    table_caveat,
)
from study.metrics.classwise import classwise_table
from study.metrics.confusion import confusion_matrix, logit_cosine_similarity
from study.metrics.discrepancy_intervals import discrepancy_summary
from study.metrics.robustness import class_false_positive, frl_errors

ROOT = Path(__file__).resolve().parents[2]
CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
# Per-class probability of a correct prediction: a model that has learned, unequal across classes.
LEARNED = {"clean": np.linspace(0.55, 0.95, 10), "pgd20": np.linspace(0.2, 0.6, 10),
           "autoattack": np.linspace(0.15, 0.55, 10), "pgd_l2_05": np.linspace(0.3, 0.7, 10)}
PER_CLASS = 40


# ---------------------------------------------------------------- inputs, built with the study's code

def _samples(p: np.ndarray, seed: int, per_class: int = PER_CLASS) -> pd.DataFrame:
    """Per-sample records whose class c is right with probability p[c]; wrong ones go to c + 1."""
    rng = np.random.default_rng(seed)
    num = len(p)
    labels = np.repeat(np.arange(num), per_class)
    pred = np.where(rng.random(labels.size) < p[labels], labels, (labels + 1) % num)
    logits = rng.normal(size=(labels.size, num)) + 4 * np.eye(num)[pred]
    return records_frame(np.arange(labels.size), labels, pred, logits)


def _classwise(methods=("standard", "pgd_at"), evals=tuple(LEARNED), seeds=(0, 1), epochs=200,
               datasets=("cifar10",), models=("preact_resnet18",), rates=LEARNED) -> pd.DataFrame:
    records = []
    for ds in datasets:
        for model in models:
            for k, method in enumerate(methods):
                for seed in seeds:
                    for ev in evals:
                        ids = {"run_id": f"{ds}-{model}-{method}-{seed}", "dataset": ds, "data_variant": "official",
                               "model": model, "method": method, "seed": seed, "epochs": epochs, "eval": ev}
                        base = rates[ev.split("@")[0]]
                        records.append((ids, _samples(np.clip(base - 0.03 * k, 0, 1), seed * 31 + k)))
    return classwise_table(records, CLASSES)


def _epoch_table(epochs: int = 6, seeds: int = 2, final=None) -> pd.DataFrame:
    rows = []
    for seed in range(seeds):
        for epoch in range(1, epochs + 1):
            for c, name in enumerate(CLASSES):
                end = final[c] if final is not None else 0.4 + 0.05 * c
                clean = end * epoch / epochs
                rows.append({"epoch": epoch, "class": c, "class_name": name, "n": 100, "seed": seed,
                             "clean_acc": clean, "robust_acc": clean / 2})
    return pd.DataFrame(rows)


def _cfp_table(evals=("clean", "pgd20", "pgd_l2_05"), seeds=(0, 1), epochs=200) -> pd.DataFrame:
    parts = []
    for seed in seeds:
        for ev in evals:
            frame = _samples(LEARNED[ev], seed)
            wrong = int((frame["pred"] != frame["label"]).sum())
            parts.append(pd.DataFrame({"run_id": f"r{seed}", "seed": seed, "method": "pgd_at", "eval": ev,
                                       "epochs": epochs, "class": range(10), "class_name": CLASSES,
                                       "cfp": class_false_positive(frame, 10), "misclassified": wrong}))
    return pd.concat(parts, ignore_index=True)


def _frl_table(methods=("standard", "pgd_at", "trades"), epochs=200) -> pd.DataFrame:
    parts = []
    for k, method in enumerate(methods):
        for seed in (0, 1):
            clean = _samples(LEARNED["clean"], seed * 7 + k)
            attacked = _samples(LEARNED["pgd20"], seed * 7 + k)
            errors = frl_errors(clean, attacked, CLASSES)
            parts.append(errors.assign(run_id=f"{method}-{seed}", seed=seed, method=method, eval="pgd20",
                                       epochs=epochs))
    return pd.concat(parts, ignore_index=True)


def _corruption_rows(epochs=200) -> pd.DataFrame:
    records = []
    for seed in (0, 1):
        for j, corruption in enumerate(("gaussian_noise", "jpeg_compression", "contrast", "fog", "snow")):
            for severity in (3, 5):
                ids = {"run_id": f"r{seed}", "seed": seed, "epochs": epochs, "corruption_variant": "regenerated",
                       "corruption": corruption, "severity": severity}
                p = np.clip(LEARNED["clean"] - 0.05 * j - 0.02 * severity, 0, 1)
                records.append((ids, _samples(p, seed * 100 + j * 10 + severity)))
    return classwise_table(records, CLASSES)


def _mitigation_classwise(methods=("at", "trades", "pgd_at_cfa_fawa", "frl_reweight", "cw_equal"),
                          rates=LEARNED, epochs=200) -> pd.DataFrame:
    return _classwise(methods=methods, evals=("clean", "pgd20", "pgd20@best"), seeds=(0, 1), epochs=epochs,
                      models=("preact_resnet18",), rates=rates)


def _policy_epochs(epochs=6) -> pd.DataFrame:
    rows = [{"method": m, "seed": 0, "epoch": e, "class": c, "class_name": name,
             "epsilon": 8 / 255 * (1 + (0.05 * c * (e - 1) if m.endswith("cfa") else 0)), "weight": 1.0,
             "weight_boundary": 1.0, "beta": 0.0}
            for m in ("at", "pgd_at_cfa", "trades_cfa") for e in range(1, epochs + 1)
            for c, name in enumerate(CLASSES)]
    return pd.DataFrame(rows)


def _with_roles(table: pd.DataFrame) -> pd.DataFrame:
    return table.assign(role=np.where(table["eval"] == "clean", "clean", "robust"))


def _confusion_panels() -> dict[str, np.ndarray]:
    out = {}
    for ev in ("clean", "pgd20", "autoattack", "pgd_l2_05"):
        counts = confusion_matrix(_samples(LEARNED[ev], 3), 10)
        out[ev] = counts / counts.sum(axis=1, keepdims=True)
    return out


def _feature_rows() -> pd.DataFrame:
    parts = [_classwise(methods=("standard",), evals=("clean", "pgd_l2_05"), seeds=(0,)).assign(training=t)
             for t in ("source_standard", "source_robust", "d_r", "d_nr")]
    return pd.concat(parts, ignore_index=True)


def _examples() -> Figure:
    rng = np.random.default_rng(0)
    sets = {name: (rng.integers(0, 255, size=(8, 3, 8, 8), dtype=np.uint8), list(range(8)))
            for name in ("original", "D_R", "D_NR", "D_rand", "D_det")}
    return plot_feature_examples(sets, CLASSES, "CIFAR-10")


# Every figure kind of the study (docs/study.md#figures), each from inputs that carry raw configuration keys.
FIGURES: dict[str, Callable[[], Figure]] = {
    "fig01_02_classwise": lambda: plot_classwise(_classwise(methods=("pgd_at",))),
    "fig03_frl_errors": lambda: plot_frl_errors(_frl_table(), "CIFAR-10 | PreAct-ResNet-18"),
    "fig04_06_discrepancy": lambda: plot_discrepancy(
        discrepancy_summary(_with_roles(_classwise(datasets=("cifar10", "mnist"), seeds=(0,))),
                            by=["dataset", "method", "role", "eval"], n_boot=50), "dataset",
        labels={"cifar10": "CIFAR-10", "mnist": "MNIST"}, num_classes=10),
    "fig07_epochs": lambda: plot_epochs(_epoch_table(), "CIFAR-10 | PreAct-ResNet-18 | PGD-AT"),
    "fig08_rank_agreement": lambda: plot_rank_agreement(rank_panels(
        _classwise(models=("resnet18", "preact_resnet18", "small_cnn"), seeds=(0,)).pipe(
            lambda t: t.assign(config=t["model"].map(labels.model_name) + " | " + t["method"].map(labels.method_name))),
        evaluations=["pgd20", "pgd_l2_05"])),
    "fig09_confusion": lambda: plot_confusion(_confusion_panels(), CLASSES, title="CIFAR-10 | ResNet-18 | PGD-AT"),
    "fig10_logit_similarity": lambda: plot_logit_similarity(
        {ev: logit_cosine_similarity(_samples(LEARNED[ev], 5), 10) for ev in ("clean", "pgd20", "pgd_l2_05")},
        CLASSES, title="CIFAR-10 | ResNet-18 | PGD-AT"),
    "fig11_cfp": lambda: plot_cfp(_cfp_table(), "CIFAR-10 | PreAct-ResNet-18 | PGD-AT"),
    "fig12_features": lambda: plot_feature_classwise(_feature_rows(), "CIFAR-10 | ResNet-18 on constructed data"),
    "fig12_examples": _examples,
    "fig13_mitigation": lambda: plot_mitigation(mitigation_table(_mitigation_classwise()), "CIFAR-10 · 34 methods"),
    "fig13_policy_epochs": lambda: plot_policy_epochs(_policy_epochs(), ["at", "pgd_at_cfa", "trades_cfa"]),
    "fig14_corruptions": lambda: plot_corruptions(_corruption_rows(), "CIFAR-10 | PreAct-ResNet-18 | PGD-AT"),
}
# Figures that draw an accuracy or a rate: at least one axis of each must be in percent.
PERCENT_FIGURES = set(FIGURES) - {"fig08_rank_agreement", "fig10_logit_similarity", "fig12_examples",
                                  "fig13_policy_epochs"}


@pytest.fixture(scope="module")
def rendered() -> dict[str, Figure]:
    with mpl.rc_context({"figure.max_open_warning": 0}):
        return {name: make() for name, make in FIGURES.items()}


# ---------------------------------------------------------------- checks, each one able to fail

def config_keys() -> set[str]:
    """Keys of methods and evaluations in params.yaml and every preset (the ones a figure may see)."""
    keys: set[str] = set()
    for path in [ROOT / "params.yaml", *sorted((ROOT / "workflow" / "presets").glob("*.yaml"))]:
        params = yaml.safe_load(path.read_text()) or {}
        keys |= set(params.get("methods") or {}) | set(params.get("evaluations") or {})
        for per in (params.get("per_dataset") or {}).values():
            keys |= set((per or {}).get("evaluations") or {})
        for group in params.get("experiments") or []:
            keys |= set(group.get("models") or []) | set(group.get("datasets") or [group.get("dataset")]) - {None}
    return keys


#: Figures already drawn, with their renderer: the checks only read a figure, and each of them
#: drawing it again (half a second or more each) would repeat the same layout.
_DRAWN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def draw(fig: Figure):
    """Lay the figure out and draw it as the PNG would be (tick labels and layout exist only then)."""
    if fig not in _DRAWN:
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        _DRAWN[fig] = canvas.get_renderer()
    return _DRAWN[fig]


def texts(fig: Figure) -> list[str]:
    """Every piece of text drawn: titles, axis and tick labels, legend entries, annotations, line by line."""
    draw(fig)
    found = []
    for artist in fig.findobj(Text):
        if artist.get_visible() and artist.get_text().strip():
            found += [line.strip() for line in artist.get_text().splitlines() if line.strip()]
    return found


def raw_keys_shown(fig: Figure, keys: set[str]) -> list[str]:
    return [t for t in texts(fig) if t in keys or t.lower() in keys and "_" in t]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def percent_problems(fig: Figure) -> tuple[int, list[str]]:
    """(number of percent axes, problems): an axis labelled in % must span within 0-100 with an upper
    limit above 1 (not a 0-1 share); an axis naming an accuracy, error, rate or score must be in %."""
    checked, problems = 0, []
    for ax in fig.axes:
        for axis, label, lim in (("y", ax.get_ylabel(), ax.get_ylim()), ("x", ax.get_xlabel(), ax.get_xlim())):
            if not label:
                continue
            if re.search(r"\(%|%\)|\(%,", label):
                checked += 1
                lo, hi = sorted(lim)
                if lo < -1e-9 or hi > 100 + 1e-9 or hi <= 1:
                    problems.append(f"{axis} axis {label!r} spans {lo:g}..{hi:g}")
            elif re.search(r"accuracy|error|rate|score|share", label) and "percentage points" not in label:
                problems.append(f"{axis} axis {label!r} is not in percent")
    return checked, problems


def _data_boxes(ax, renderer) -> list:
    """Display-space boxes of what an axes plots: bars, markers and line vertices, interval segments."""
    boxes = []
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and patch.get_width() and patch.get_height():
            boxes.append(patch.get_window_extent(renderer))
    points = []
    for line in ax.get_lines():
        xy = np.column_stack([np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)])
        if line.get_transform() == ax.transData and len(xy):
            points.append(ax.transData.transform(xy))
    for coll in ax.collections:
        if isinstance(coll, PathCollection) and len(coll.get_offsets()):
            points.append(coll.get_offset_transform().transform(coll.get_offsets()))
        elif isinstance(coll, LineCollection):
            points += [coll.get_transform().transform(seg) for seg in coll.get_segments() if len(seg)]
    return boxes + points


def _covers(box, item) -> bool:
    if hasattr(item, "overlaps"):
        return bool(box.overlaps(item))
    pts = item[np.isfinite(item).all(axis=1)]
    inside = (pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)
    return bool(inside.any())


def legend_overlaps(fig: Figure) -> list[str]:
    """Legends whose box covers a bar, a point or a whisker end of any panel."""
    renderer = draw(fig)
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    found = []
    for legend in legends:
        box = legend.get_window_extent(renderer).shrunk(0.98, 0.98)
        for ax in fig.axes:
            if any(_covers(box, item) for item in _data_boxes(ax, renderer)):
                found.append(f"legend {[t.get_text() for t in legend.get_texts()][:2]} covers data of "
                             f"{ax.get_title() or ax.get_ylabel()!r}")
    return found


# ---------------------------------------------------------------- the checks on every figure kind

@pytest.mark.parametrize("name", sorted(FIGURES))
def test_saved_figure_fits_the_pixel_budget(name, rendered, tmp_path):
    png, pdf = save_figure(rendered[name], tmp_path / name)
    width, height = png_size(png)
    assert width <= MAX_PIXELS and height <= MAX_PIXELS, f"{name}: {width} x {height} px"
    assert pdf.stat().st_size > 1000


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_no_label_is_a_configuration_key(name, rendered):
    keys = config_keys()
    assert {"pgd_at", "pgd_l2_05", "pgd20", "at", "trades", "frl_reweight"} <= keys  # the check sees them
    assert raw_keys_shown(rendered[name], keys) == []


@pytest.mark.parametrize("name", sorted(PERCENT_FIGURES))
def test_accuracies_and_rates_are_in_percent(name, rendered):
    checked, problems = percent_problems(rendered[name])
    assert checked > 0, f"{name} has no axis in percent"
    assert problems == []


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_no_legend_covers_data(name, rendered):
    assert legend_overlaps(rendered[name]) == []


def test_many_classes_panels_and_methods_wrap_instead_of_growing():
    """Built within the budget, not just shrunk on saving: 100 classes under two threat models,
    six 100-class confusion matrices, 34 methods under four evaluations."""
    hundred = [f"class{i:02d}" for i in range(100)]
    rates = {ev: np.clip(np.linspace(0.2, 0.9, 100) - 0.1 * k, 0, 1) for k, ev in enumerate(LEARNED)}
    records = [({"run_id": "r", "dataset": "cifar100", "model": "resnet18", "method": "pgd_at", "seed": 0,
                 "epochs": 200, "eval": ev}, _samples(p, 1, per_class=10)) for ev, p in rates.items()]
    groups = [f"superclass {c % 20}" for c in range(100)]
    panels = {ev: np.eye(100) for ev in ("clean", "pgd20", "autoattack", "square", "pgd_l2_05", "pgd_l2_025")}
    methods = [f"m{i}" for i in range(34)]
    table = pd.DataFrame([{"method": m, "eval": ev, "checkpoint": "last", "mean": 0.5, "mean_lo": 0.45,
                           "mean_hi": 0.55, "worst": 0.2, "worst_lo": 0.1, "worst_hi": 0.3}
                          for m in methods for ev in ("clean", "pgd20", "autoattack", "square")])
    for fig in (plot_classwise(classwise_table(records, hundred)), plot_confusion(panels, hundred, groups),
                plot_mitigation(table)):
        width, height = fig.get_size_inches() * 150
        assert width <= MAX_PIXELS and height <= MAX_PIXELS
    assert len(plot_confusion(panels, hundred, groups).axes) >= 6  # wrapped, not dropped


def test_saving_shrinks_a_figure_built_too_wide(tmp_path):
    fig = Figure(figsize=(30, 4))
    fig.subplots().plot([0, 1], [0, 1])
    png, _ = save_figure(fig, tmp_path / "wide")
    assert png_size(png)[0] <= MAX_PIXELS


# ---------------------------------------------------------------- the checks can fail

def test_the_checks_catch_a_legend_on_the_data_a_key_and_a_share_axis():
    fig = Figure(figsize=(4, 3))
    ax = fig.subplots()
    ax.bar(range(5), [0.9] * 5, label="pgd_l2_05")
    ax.set_ylabel("accuracy")
    ax.legend(loc="center")  # squarely on the bars
    assert legend_overlaps(fig)
    assert raw_keys_shown(fig, config_keys()) == ["pgd_l2_05"]
    checked, problems = percent_problems(fig)
    assert checked == 0 and problems == ["y axis 'accuracy' is not in percent"]
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 1)
    assert percent_problems(fig)[1] == ["y axis 'accuracy (%)' spans 0..1"]


# ---------------------------------------------------------------- threat models, titles, caveats

def _legend_labels(fig: Figure) -> list[list[str]]:
    per_axes = [ax.get_legend_handles_labels()[1] for ax in fig.axes]
    return [labels for labels in per_axes if labels]


def test_l2_and_linf_never_share_an_axis():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    settings = {k: params["evaluations"][k] for k in ("pgd20", "pgd_l2_05")}
    fig = plot_classwise(_classwise(methods=("pgd_at",)), eval_settings=settings)
    assert "robustness (PGD-20, L∞ 8/255)" in [t.get_text() for t in fig.legends[0].get_texts()]
    groups = _legend_labels(fig)
    assert len(groups) == 2, "one panel per threat model"
    for panel_labels in groups:
        joined = " ".join(panel_labels)
        assert not ("L∞" in joined and "L2" in joined), panel_labels
        assert "clean accuracy" in panel_labels  # clean is the reference in each
    cfp = plot_cfp(_cfp_table(), "t")
    assert all(not ("L∞" in " ".join(lab) and "L2" in " ".join(lab)) for lab in _legend_labels(cfp))
    summary = discrepancy_summary(_with_roles(_classwise(seeds=(0,))), by=["dataset", "method", "role", "eval"],
                                  n_boot=20)
    titles = [ax.get_title() for ax in plot_discrepancy(summary, "dataset").axes]
    assert all(not ("L∞" in t and "L2" in t) for t in titles)
    assert any("L2" in t for t in titles) and any("L∞" in t for t in titles)
    table = _classwise(models=("resnet18", "small_cnn"), seeds=(0,)).assign(config=lambda t: t["model"])
    panels = rank_panels(table, evaluations=["pgd20", "pgd_l2_05"])
    assert len(panels) == 3 and all(not ("L∞" in p and "L2" in p) for p in panels)


def test_rank_panel_that_mixes_threat_models_says_so():
    wide = pd.DataFrame({"a": [0.1, 0.2, 0.3], "b": [0.3, 0.2, 0.1]})
    from study.metrics.rank import rank_agreement

    fig = plot_rank_agreement({"robustness (PGD-20, L∞, PGD, L2 0.5)": (rank_agreement(wide), rank_agreement(
        wide, "kendall"))})
    assert "not comparable" in fig.axes[0].get_title()


def test_mitigation_title_counts_the_methods_drawn_and_legend_lists_only_what_is_drawn():
    table = mitigation_table(_mitigation_classwise(methods=("at", "trades")))
    table = table[table["checkpoint"] == "best"]  # only best checkpoints drawn
    fig = plot_mitigation(table, "CIFAR-10 | PreAct-ResNet-18  ·  34 methods")
    title = fig._suptitle.get_text()
    assert "2 methods" in title and "34" not in title
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["PGD-AT", "TRADES", "filled: best checkpoint"]
    # the table's best checkpoints are PGD-20's only: one panel, and it says how many methods it shows
    assert [ax.get_title().splitlines()[0] for ax in fig.axes] == ["PGD-20, L∞ · 2 methods"]
    assert counted_title("x · 4 methods", 1, "method") == "x  ·  1 method"


def test_figure_three_draws_intervals_per_class():
    fig = plot_frl_errors(_frl_table(methods=("pgd_at",)), "t")
    ax = fig.axes[0]
    whiskers = [seg for coll in ax.collections if isinstance(coll, LineCollection) for seg in coll.get_segments()]
    assert len(whiskers) == 2 * len(CLASSES)  # standard and robust error, one whisker per class each
    heights = sorted(p.get_height() for p in ax.patches)
    assert heights[-1] > 1  # percent, not a share


def test_caveat_on_short_or_chance_level_runs_and_not_on_a_real_one():
    assert run_caveat(epochs=2) == "run too short to compare (2 epochs)"
    assert run_caveat(epochs=200, mean_acc=0.5, num_classes=10) is None
    assert "chance level" in run_caveat(mean_acc=0.1, num_classes=10)
    assert "worst class at 0%" in run_caveat(worst=[0.0, 0.0])
    assert run_caveat(worst=[0.0, 0.1]) is None
    # two epochs on the whole training set (the demo's recipe) are not short; on a subset they are
    assert run_caveat(epochs=2, images_seen=MIN_IMAGES_SEEN) is None
    assert run_caveat(epochs=2, images_seen=MIN_IMAGES_SEEN - 1) == "run too short to compare (2 epochs)"

    def notes(fig: Figure) -> list[str]:
        return [t for t in texts(fig) if t.startswith("⚠")]

    short = _classwise(methods=("pgd_at",), evals=("clean", "pgd20"), epochs=2)
    assert notes(plot_classwise(short)) == ["⚠ run too short to compare (2 epochs)"]
    assert notes(plot_classwise(_classwise(methods=("pgd_at",), evals=("clean", "pgd20")))) == []
    assert notes(plot_classwise(short, caveat=None)) == []
    assert notes(plot_classwise(short, caveat="demo run")) == ["⚠ demo run"]
    chance = {ev: np.full(10, 0.1) for ev in LEARNED}
    degenerate = _classwise(methods=("pgd_at",), evals=("clean", "pgd20"), rates=chance)
    assert "chance level" in table_caveat(degenerate)
    assert len(notes(plot_classwise(degenerate))) == 1
    assert notes(plot_epochs(_epoch_table(epochs=2))) == ["⚠ run too short to compare (2 epochs)"] * 2
    whole = _epoch_table(epochs=2).assign(train_n=MIN_IMAGES_SEEN // 20)  # per class: 10 classes x 2 epochs
    assert images_seen(whole) == MIN_IMAGES_SEEN and notes(plot_epochs(whole)) == []
    assert notes(plot_epochs(whole.assign(train_n=350))) == ["⚠ run too short to compare (2 epochs)"] * 2
    full_set = short.assign(train_per_class=np.nan)  # train_per_class empty: the whole training set
    assert notes(plot_classwise(full_set)) == [] and notes(plot_classwise(short.assign(train_per_class=350))) != []
    zero_worst = {ev: np.r_[0.0, np.full(9, 0.8)] for ev in LEARNED}
    fig = plot_mitigation(mitigation_table(_mitigation_classwise(methods=("at",), rates=zero_worst)))
    assert all("worst class at 0%" in n for n in notes(fig)) and len(notes(fig)) == 2


def test_epoch_labels_never_overlap_even_when_the_lines_end_together():
    same = np.full(10, 0.5)
    same[3] = 0.2
    fig = plot_epochs(_epoch_table(final=same), "t")
    renderer = draw(fig)
    for ax in fig.axes:
        # the text itself, without the leader line an annotation's own extent includes
        boxes = [Text.get_window_extent(t, renderer) for t in ax.texts]
        assert len(boxes) == 10
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                assert not boxes[i].overlaps(boxes[j]), (ax.texts[i].get_text(), ax.texts[j].get_text())
    assert list(spread_labels(np.array([50.0, 50.0, 50.0]), 5.0)) == [50.0, 55.0, 60.0]
    assert list(spread_labels(np.array([100.0, 99.0]), 5.0)) == [100.0, 95.0]


# ---------------------------------------------------------------- the names table

def test_display_names_of_every_configured_method_and_evaluation():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for key in params["methods"]:
        shown = labels.method_name(key)
        assert shown != key and "_" not in shown, key
    for key, settings in params["evaluations"].items():
        assert labels.eval_name(key, settings) != key and "_" not in labels.eval_name(key, settings), key
    assert labels.method_name("pgd_at") == labels.method_name("at") == "PGD-AT"
    assert labels.method_name("trades") == "TRADES"
    assert labels.method_name("pgd_at_cfa_fawa") == "PGD-AT + CFA + FAWA"
    assert labels.method_name("trades_cfa_nowa") == "TRADES + CFA (no weight averaging)"
    assert labels.method_name("frl_reweight") == "FRL (reweight)"
    assert labels.eval_name("pgd20", params["evaluations"]["pgd20"]) == "PGD-20, L∞ 8/255"
    assert labels.eval_name("pgd_l2_05") == "PGD, L2 0.5"
    assert labels.eval_name("pgd20_linf4") == "PGD-20, L∞ 4/255"
    assert labels.eval_name("autoattack", params["evaluations"]["autoattack"]) == "AutoAttack, L∞ 8/255"
    assert labels.eval_name("pgd20@best") == "PGD-20, L∞ (best checkpoint)"
    assert labels.dataset_name("cifar10") == "CIFAR-10"
    assert labels.model_name("preact_resnet18") == "PreAct-ResNet-18"
    assert labels.humanize("my_new_attack") == "My New Attack"
    assert labels.eval_name("my_new_attack") == "My New Attack"
    assert labels.method_name("cw_equal") == "Cost-sensitive (equal)"


def test_evaluation_labels_follow_the_settings_of_the_dataset():
    from study.config.params import load_params

    params = load_params(ROOT / "params.yaml", overrides={"preset": "paper"})
    mnist = labels.evaluation_settings(params, "mnist")
    cifar = labels.evaluation_settings(params, "cifar10")
    # the same key, another budget: the label must come from the settings, not from the key
    assert labels.eval_name("pgd10", mnist["pgd10"]) == "PGD-10, L∞ 0.3"
    assert labels.eval_name("pgd10", cifar["pgd10"]) == "PGD-10, L∞ 8/255"
    assert labels.eval_name("pgd40", mnist["pgd40"]) == "PGD-40, L∞ 0.3"
    assert labels.eval_norm("pgd_l2_05", cifar["pgd_l2_05"]) == "l2"


def test_the_classwise_legend_fits_the_figure_width():
    """Four long evaluation labels (clean, PGD-20, AutoAttack, Square) in one row ran past the
    edges of figure 2; the legend takes as many columns as fit its width."""
    from study.figures.classwise import legend_columns

    labels = ["clean accuracy", "robustness (PGD-20, L∞)", "robustness (AutoAttack, L∞)", "robustness (Square, L∞)"]
    columns = legend_columns(labels, width_in=8.0)
    assert 1 < columns < len(labels)
    rows = [labels[i:i + columns] for i in range(0, len(labels), columns)]
    assert max(sum(len(label) + 6 for label in row) for row in rows) <= 11 * 8.0
    assert legend_columns(labels[:2], width_in=8.0) == 2  # short legends stay on one row
