"""Figures a reviewer accepts (issue 32, part 5), each checked on hand-built tables through the
figure's artists, not its pixels: figure 2's bars of an evaluation on fewer test images are marked
and name their n; figure 9's cells carry their percentages in a contrasting colour; figure 13 names
each method's control and draws its arrows over the markers; a figure from a reduced recipe says
so under its title, decided from the runs' epochs and training images."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, Rectangle

from study.figures.classwise import SUBSET_HATCH, plot_classwise
from study.figures.explain import plot_confusion
from study.figures.fig09_10_class_matrices import records_recipe
from study.figures.heatmap import MAX_ANNOTATED, cell_text, text_color
from study.figures.mitigation import ARROW_STYLE, mitigation_table, plot_mitigation
from study.figures.style import FEWEST_PUBLISHED_EPOCHS, reduced_recipe, table_recipe
from study.labels import eval_label, method_name
from study.metrics.intervals import wilson_interval

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
# The demo's figure 2: clean and PGD-20 on 100 images per class, AutoAttack on 10; on its 10 images
# ship's AutoAttack robustness (7 of 10) stands above its clean accuracy on 100 (69 of 100).
CORRECT = {"clean": ([44, 63, 24, 16, 47, 47, 42, 52, 69, 53], 100),
           "pgd20": ([34, 38, 12, 7, 25, 26, 22, 28, 44, 37], 100),
           "autoattack": ([1, 3, 0, 0, 0, 1, 1, 1, 7, 4], 10)}


def _classwise(correct=CORRECT, epochs=2, train_per_class: float | None = 3000, seeds=(0,)) -> pd.DataFrame:
    rows = []
    for seed in seeds:
        for ev, (hits, n) in correct.items():
            for c, (name, k) in enumerate(zip(CLASSES, hits, strict=True)):
                lo, hi = wilson_interval(k, n)
                rows.append({"run_id": f"r{seed}", "dataset": "cifar10", "data_variant": "official",
                             "model": "small_cnn_s2", "method": "pgd_at", "seed": seed, "epochs": epochs,
                             "train_per_class": train_per_class, "eval": ev, "class": c, "class_name": name,
                             "n": n, "correct": k, "acc": k / n, "ci_lo": lo, "ci_hi": hi})
    return pd.DataFrame(rows)


def _bars(fig: Figure) -> list[Rectangle]:
    """The accuracy bars of the top panel (the first axes), legend patches excluded."""
    return [p for p in fig.axes[0].patches if isinstance(p, Rectangle) and p.get_height() != 0]


def _legend(fig: Figure) -> tuple[list[str], str]:
    legend = fig.legends[0]
    return [t.get_text() for t in legend.get_texts()], legend.get_title().get_text()


# ---------------------------------------------------------------- figure 2: bars on other test images


def test_bars_of_an_evaluation_on_fewer_images_are_marked_and_name_their_n():
    fig = plot_classwise(_classwise())
    labels, note = _legend(fig)
    assert labels == [eval_label("clean"), eval_label("pgd20"),
                      f"{eval_label('autoattack')} · subset: n = 10 per class"]
    assert "pale, dotted: a subset of the test images" in note and "n = 100 per class" in note
    clean_color = to_rgba(fig.axes[0].patches[0].get_facecolor())
    by_kind: dict[str, list[Rectangle]] = {"solid": [], "subset": []}
    for bar in _bars(fig):
        by_kind["subset" if bar.get_hatch() == SUBSET_HATCH else "solid"].append(bar)
    # 10 classes: clean and PGD-20 solid (ship's 0% AutoAttack-free bars excluded by height), AutoAttack marked
    assert len(by_kind["subset"]) == sum(1 for k in CORRECT["autoattack"][0] if k) and len(by_kind["solid"]) == 20
    assert all(bar.get_facecolor()[3] < 0.5 for bar in by_kind["subset"]), "a subset bar drawn at full weight"
    assert all(bar.get_facecolor()[3] == 1 for bar in by_kind["solid"])
    assert clean_color[3] == 1


def test_bars_on_the_same_images_are_drawn_alike():
    same = {ev: (hits, 100) for ev, (hits, _) in CORRECT.items()}
    fig = plot_classwise(_classwise(same))
    labels, note = _legend(fig)
    assert not any("subset" in label for label in labels) and "subset" not in note
    assert not any(bar.get_hatch() for bar in _bars(fig))


def test_a_seed_aggregated_table_reads_its_n_per_seed():
    """seed_aggregate sums n over seeds: 2 seeds of 10 images per class are still n = 10."""
    fig = plot_classwise(_classwise(seeds=(0, 1)))
    labels, note = _legend(fig)
    assert labels[-1].endswith("subset: n = 10 per class") and "n = 100 per class" in note


# ---------------------------------------------------------------- reduced recipe


def test_reduced_recipe_is_named_from_the_runs_epochs_and_training_images():
    title = plot_classwise(_classwise(epochs=2, train_per_class=3000))._suptitle.get_text()
    heading, _, subtitle = title.partition("\n")
    subtitle = subtitle.replace("\n", " ")  # wrapped to the figure's width
    assert heading == "CIFAR-10 | Small CNN-S2 | PGD-AT"
    assert subtitle.startswith("reduced recipe: 2 epochs") and "3,000 training images per class" in subtitle
    assert subtitle.endswith("shows direction, not size")
    published = plot_classwise(_classwise(epochs=200, train_per_class=None))._suptitle.get_text()
    assert "reduced" not in published and "\n" not in published
    # the whole training set for few epochs: named for its epochs alone
    few = table_recipe(_classwise(epochs=5, train_per_class=None))
    assert few is not None and "5 epochs" in few and "training images" not in few
    # FRL's published fine-tuning (120 epochs) on the whole set is not a reduced recipe
    assert reduced_recipe([FEWEST_PUBLISHED_EPOCHS], [math.nan]) is None
    assert reduced_recipe([2, 4], [150, None]) == ("reduced recipe: 2-4 epochs (published recipes: 120-200), "
                                                   "150 training images per class (published: all); shows "
                                                   "direction, not size")


def test_records_recipe_reads_the_run_configs_and_skips_zoo_models(tiny_run_config):
    cfg = tiny_run_config
    note = records_recipe([{"run_config": cfg}])
    assert note is not None and f"{cfg['epochs']} epochs" in note
    if cfg.get("train_per_class"):
        assert f"{cfg['train_per_class']:,} training images per class" in note
    assert records_recipe([{"evaluation": {"name": "clean"}}]) is None


# ---------------------------------------------------------------- figure 9: numbers in the cells


def test_confusion_cells_carry_their_percentages_in_a_contrasting_colour():
    rng = np.random.default_rng(0)
    shares = rng.dirichlet(np.ones(10) * 0.5, size=10)
    shares[0] = [0.44, 0.0, 0.003, 0.557, 0, 0, 0, 0, 0, 0]
    fig = plot_confusion({"clean": shares, "pgd20": shares[::-1]}, CLASSES, recipe="reduced recipe: 2 epochs")
    ax = fig.axes[0]
    cells = {(round(t.get_position()[1]), round(t.get_position()[0])): t for t in ax.texts}
    assert len(cells) == 100
    assert [cells[(0, j)].get_text() for j in range(4)] == ["44", "0", "<1", "56"]
    image = ax.images[0]
    for (i, j), text in cells.items():
        cell = image.cmap(image.norm(100 * shares[i, j]))
        assert text.get_color() == text_color(cell)
    # the scale's two ends: white on the darkest cells, black on the brightest
    assert text_color(image.cmap(0.0)) == "white" and text_color(image.cmap(1.0)) == "black"
    assert "numbers in the cells" in fig.axes[-1].get_ylabel()
    assert fig._suptitle.get_text().endswith("\nreduced recipe: 2 epochs")


def test_too_many_classes_for_numbers_draw_none():
    n = MAX_ANNOTATED + 1
    fig = plot_confusion({"clean": np.full((n, n), 1 / n)}, [f"c{i}" for i in range(n)])
    assert len(fig.axes[0].texts) == 0
    assert cell_text(float("nan")) == "" and cell_text(99.6) == "100"


# ---------------------------------------------------------------- figure 13: controls and arrows


def _mitigation() -> pd.DataFrame:
    rows = []
    accs = {"at": [0.6, 0.2, 0.5], "trades_cfa": [0.55, 0.35, 0.5], "frl_reweight": [0.5, 0.3, 0.6],
            "fat": [0.58, 0.22, 0.5]}
    for method, per_class in accs.items():
        for seed in (0, 1):
            for c, acc in enumerate(per_class):
                rows.append({"run_id": f"{method}-{seed}", "dataset": "cifar10", "model": "small_cnn_s2",
                             "method": method, "seed": seed, "eval": "pgd20", "checkpoint": "last", "class": c,
                             "class_name": f"c{c}", "n": 100, "correct": int(acc * 100), "acc": acc + 0.01 * seed})
    return mitigation_table(pd.DataFrame(rows), list(accs), {"trades_cfa": "at", "frl_reweight": "at", "fat": None})


def test_mitigation_names_each_control_and_draws_visible_arrows_from_it():
    table = _mitigation()
    fig = plot_mitigation(table, "CIFAR-10 | Small CNN-S2", recipe="reduced recipe: 2 epochs")
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[:4] == ["PGD-AT", f"{method_name('trades_cfa')} (vs PGD-AT)", f"{method_name('frl_reweight')} "
                          "(vs PGD-AT)", method_name("fat")]
    assert "arrows: from each method's control" in fig.legends[0].get_title().get_text()
    ax = fig.axes[0]
    # an annotation draws its arrow when it is drawn itself: its zorder is the arrow's
    annotations = [t for t in ax.texts if getattr(t, "arrow_patch", None) is not None]
    assert len(annotations) == 2, "one arrow per method with a control"
    markers = [line for line in ax.lines if isinstance(line, Line2D) and line.get_marker() not in (None, "None", "")]
    for note in annotations:
        arrow: FancyArrowPatch = note.arrow_patch
        assert arrow.get_linewidth() >= ARROW_STYLE["lw"] and arrow.get_alpha() in (None, 1)
        assert note.get_zorder() > max(line.get_zorder() for line in markers), "an arrow under the markers"
        assert type(arrow.get_arrowstyle()).__name__ == "CurveFilledB", "a filled head"
        assert arrow.shrinkA > 0 and arrow.shrinkB > 0, "the head ends on the marker's centre, under it"
    method_colors = {to_rgba(line.get_color()) for line in markers}
    assert {to_rgba(note.arrow_patch.get_edgecolor()) for note in annotations} <= method_colors
    # each arrow runs from its control's point to the method's
    at = table[table["method"] == "at"].iloc[0]
    for method in ("trades_cfa", "frl_reweight"):
        row = table[table["method"] == method].iloc[0]
        assert row["compare_with"] == "at"
        assert row["delta_mean"] == pytest.approx(row["mean"] - at["mean"])
    assert fig._suptitle.get_text().endswith("reduced recipe: 2 epochs")
