"""The README's numbers come from the results: `study readme-numbers` on hand-built tables."""

import json

import pandas as pd
import pytest

from study.cli import main
from tools.readme_numbers import END, START, update_readme

ROOT_README = __import__("pathlib").Path(__file__).resolve().parents[2] / "README.md"


def _tables(tmp_path):
    tables, runs = tmp_path / "tables", tmp_path / "runs"
    tables.mkdir()
    rows = []
    for method, acc in (("standard", 0.5), ("pgd_at", 0.4)):
        run_id = f"cifar10-small_cnn-{method}"
        (runs / run_id).mkdir(parents=True)
        (runs / run_id / "meta.json").write_text(json.dumps({"git_commit": "abcdef123456"}))
        for ev, drop in (("clean", 0.0), ("pgd20", 0.3)):
            rows.append({"run_id": run_id, "dataset": "cifar10", "method": method, "train_data": "original",
                         "eval": ev, "mean": acc - drop, "worst": acc - drop - 0.2, "worst_class": "cat",
                         "best": acc - drop + 0.25, "best_class": "ship", "gap": 0.45})
    pd.DataFrame(rows).to_csv(tables / "summary.csv", index=False)
    pd.DataFrame([{"dataset": "cifar10", "method": "pgd_at", "eval": "autoattack", "acc": 0.07, "n": 100}]).to_csv(
        tables / "attacks.csv", index=False)
    checks = pd.DataFrame([{"status": "pass"}, {"status": "pass"}, {"status": "flag"}])
    checks.to_csv(tables / "checks.csv", index=False)
    return tables, runs


def test_block_is_made_from_the_tables_and_fills_the_marked_part(tmp_path, capsys):
    tables, runs = _tables(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{START}\nold numbers\n{END}\noutro\n")
    assert main(["readme-numbers", "--tables", str(tables), "--runs", str(runs), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "old numbers" not in text
    assert "| Standard | Clean | 50.0% | cat 30.0% | ship 75.0% | 45.0 pts |" in text
    assert "AutoAttack" in text and "7.0% of 100 images" in text
    assert "1 flag, 2 pass" in text and "commit abcdef1" in text


def test_missing_markers_are_named(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("no block here\n")
    with pytest.raises(ValueError, match="has no <!-- readme-numbers:start -->"):
        update_readme(readme, "x")


def test_the_project_readme_has_the_block():
    text = ROOT_README.read_text()
    assert text.count(START) == 1 and text.count(END) == 1
    assert "study readme-numbers" in text.split(START)[1].split(END)[0]


def _classwise(tables, worst_hi):
    """PGD-AT's class rows: ship best, cat worst, with the given upper bound of cat's interval."""
    rows = []
    for ev in ("clean", "pgd20"):
        for c, (name, acc, lo, hi) in enumerate((("ship", 0.6, 0.5, 0.7), ("cat", 0.2, 0.12, worst_hi))):
            rows.append({"dataset": "cifar10", "method": "pgd_at", "train_data": "original", "eval": ev,
                         "class": c, "class_name": name, "n": 100, "acc": acc, "ci_lo": lo, "ci_hi": hi})
    # AutoAttack on a smaller subset: not one of the targets' evaluations
    rows.append({"dataset": "cifar10", "method": "pgd_at", "train_data": "original", "eval": "autoattack",
                 "class": 0, "class_name": "ship", "n": 10, "acc": 0.3, "ci_lo": 0.1, "ci_hi": 0.6})
    pd.DataFrame(rows).to_csv(tables / "classwise.csv", index=False)


def test_targets_intervals_and_figure_13_are_stated(tmp_path):
    from tools.readme_numbers import DEMO_TARGETS, readme_block

    tables, runs = _tables(tmp_path)
    _classwise(tables, worst_hi=0.3)
    fig13 = tmp_path / "figures" / "fig13_mitigation"
    fig13.mkdir(parents=True)
    pd.DataFrame([
        {"method": "at", "eval": "clean", "mean": 0.4, "mean_lo": 0.37, "mean_hi": 0.43, "worst": 0.2, "worst_lo": 0.13,
         "worst_hi": 0.29, "worst_class": "cat", "compare_with": None, "delta_mean": None, "delta_worst": None},
        {"method": "trades_cfa", "eval": "clean", "mean": 0.38, "mean_lo": 0.35, "mean_hi": 0.41, "worst": 0.25,
         "worst_lo": 0.17, "worst_hi": 0.34, "worst_class": "bird", "compare_with": "at", "delta_mean": -0.02,
         "delta_worst": 0.05},
    ]).to_csv(fig13 / "cifar10__small_cnn_s2__all.csv", index=False)
    block = readme_block(tables, runs)
    # summary: standard clean 50% (< 60%), PGD-AT clean 40% (= 40%), PGD-AT PGD-20 10% (< 25%)
    assert DEMO_TARGETS[("standard", "clean")] > 0.5 and "Standard Clean 50.0% (target 60%: NOT reached)" in block
    assert "PGD-AT Clean 40.0% (target 40%: reached)" in block
    assert "Test images per class of the targets' evaluations: 100." in block
    assert "best ship 60.0% [50, 70] vs worst cat 20.0% [12, 30], apart" in block
    assert "| TRADES + CFA | Clean | 38.0% [35, 41] | bird 25.0% [17, 34] | -2.0, +5.0 pts vs PGD-AT |" in block
    _classwise(tables, worst_hi=0.55)
    assert "OVERLAPPING" in readme_block(tables, runs)
