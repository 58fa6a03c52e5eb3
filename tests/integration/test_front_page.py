"""The report's landing text (study/front_page.py): the finding with numbers read from the
class-wise table, the reduced-recipe note, the reproduction verdicts and the links."""

from pathlib import Path

import pandas as pd
import pytest

from study.cli import main
from study.front_page import class_range, front_page, reduced_recipe

CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
STANDARD = (0.80, 0.90, 0.60, 0.50, 0.70, 0.65, 0.85, 0.80, 0.88, 0.86)
PGD_AT_CLEAN = (0.60, 0.70, 0.40, 0.30, 0.50, 0.45, 0.62, 0.61, 0.72, 0.68)
PGD_AT_PGD = (0.30, 0.40, 0.15, 0.08, 0.20, 0.18, 0.31, 0.33, 0.45, 0.38)
REPRODUCTION = ("# Reproduction\n\nClaims: 10 published values and claims; 6 compared: 2 agrees, 3 inconclusive, "
                "1 differs. Not compared: 4 recipe differs.\n")
FIGURES = ["results/demo/figures/fig02_classwise_adversarial/mnist__small_cnn_s2__pgd_at.png",
           "results/demo/figures/fig02_classwise_adversarial/cifar10__lenet__pgd_at.png",
           "results/demo/figures/fig02_classwise_adversarial/cifar10__small_cnn_s2__pgd_at.png"]
CATEGORIES = ["01 · Class-wise accuracy and robustness", "02 · Mitigation", "03 · Reproduction"]


def table(epochs=2, train_per_class=3000.0, seeds=(0,), shift=0.0):
    rows = []
    for seed in seeds:
        for method, evaluations in (("standard", {"clean": STANDARD}),
                                    ("pgd_at", {"clean": PGD_AT_CLEAN, "pgd20": PGD_AT_PGD, "pgd5@best": STANDARD})):
            for ev, profile in evaluations.items():
                for c, acc in enumerate(profile):
                    rows.append({"run_id": f"cifar10-{method}-s{seed}", "dataset": "cifar10", "model": "small_cnn_s2",
                                 "method": method, "seed": seed, "epochs": epochs, "train_per_class": train_per_class,
                                 "train_data": "original", "eval": ev, "checkpoint": "best" if "@" in ev else "last",
                                 "class": c, "class_name": CLASSES[c], "n": 100, "acc": acc + shift * seed})
    return pd.DataFrame(rows)


def test_the_finding_is_stated_with_the_tables_numbers():
    text = front_page(table(), REPRODUCTION, "results/demo/reproduction.html", FIGURES, CATEGORIES, "demo")
    mean = sum(PGD_AT_PGD) / 10
    assert (f"Under PGD-20, L∞, PGD-AT's weakest class is **cat at 8.0%** and its strongest ship at 45.0% "
            f"(mean {100 * mean:.1f}%).") in text
    assert "On clean images its weakest class is cat at 30.0% against ship at 72.0%." in text
    assert "Standard training is already unequal: cat 50.0% to automobile 90.0% on clean images" in text
    assert "Preset ``demo``: CIFAR-10, Small CNN-S2, one seed." in text
    # the best checkpoint's evaluation is no part of the finding (the last checkpoint's is)
    assert "PGD-5" not in text
    assert "Claims: 10 published values and claims; 6 compared: 2 agrees, 3 inconclusive, 1 differs." in text
    # the links show what they name: the reproduction page, and the headline figure (figure 2's PGD-AT
    # panel of the finding's dataset and model) as an image
    assert ("resultPath:'results/demo/reproduction.html',content:'html',"
            "contentPath:results['results/demo/reproduction.html'].data_uri") in text
    figure = "results/demo/figures/fig02_classwise_adversarial/cifar10__small_cnn_s2__pgd_at.png"
    assert f"resultPath:'{figure}',content:'img',contentPath:results['{figure}'].data_uri" in text
    # categories in the order given (the study's), each a link
    positions = [text.index(f"`{c} <javascript:app.showCategory(") for c in CATEGORIES]
    assert positions == sorted(positions)


def test_other_results_say_other_numbers_and_seeds_are_averaged():
    text = front_page(table(seeds=(0, 1), shift=0.02), REPRODUCTION, "r.md", FIGURES, CATEGORIES, "ci")
    assert "2 seeds (class accuracies are means over them)." in text
    assert "**cat at 9.0%**" in text  # 8% and 10%
    assert class_range(table(), "pgd_at", "pgd20").strongest == "ship"


def test_a_reduced_recipe_is_said_and_the_published_one_is_not():
    assert reduced_recipe(table()) == "2 epochs, not 200; 3,000 training images per class"
    assert reduced_recipe(table(epochs=200, train_per_class=float("nan"))) == ""
    text = front_page(table(epochs=200, train_per_class=float("nan")), REPRODUCTION, "r.md", FIGURES, CATEGORIES,
                      "paper")
    assert "reduced recipe" not in text
    assert "These runs use a reduced recipe (2 epochs, not 200; 3,000 training images per class)" in front_page(
        table(), REPRODUCTION, "r.md", FIGURES, CATEGORIES, "demo")


def test_no_adversarial_run_is_one_line(tmp_path, capsys):
    no_pgd_at = table().query("method == 'standard'")
    with pytest.raises(ValueError, match="no last-checkpoint pgd_at run"):
        front_page(no_pgd_at, REPRODUCTION, "r.md", FIGURES, CATEGORIES, "demo")
    no_pgd_at.to_csv(tmp_path / "classwise.csv", index=False)
    (tmp_path / "reproduction.md").write_text(REPRODUCTION)
    args = ["front-page", "--classwise", str(tmp_path / "classwise.csv"), "--reproduction",
            str(tmp_path / "reproduction.md"), "--preset", "demo", "--out", str(tmp_path / "front.rst")]
    assert main(args) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pgd_at" in err and "Traceback" not in err
    assert not (tmp_path / "front.rst").exists()


def test_the_command_writes_the_page_and_names_a_missing_input(tmp_path, capsys):
    table().to_csv(tmp_path / "classwise.csv", index=False)
    out = tmp_path / "results" / "report_front.rst"
    args = ["front-page", "--classwise", str(tmp_path / "classwise.csv"), "--reproduction",
            str(tmp_path / "reproduction.md"), "--preset", "demo", "--out", str(out), "--figures", *FIGURES,
            "--categories", *CATEGORIES]
    assert main(args) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(tmp_path / "reproduction.md") in err
    (tmp_path / "reproduction.md").write_text(REPRODUCTION)
    assert main(args) == 0
    text = Path(out).read_text()
    assert text.startswith("Class-wise robustness: the finding\n==") and "**cat at 8.0%**" in text
