"""The README's numbers come from the results: `study readme-numbers` on hand-built tables."""

import json

import pandas as pd
import pytest

from study.cli import main
from study.readme_numbers import END, START, update_readme

ROOT_README = __import__("pathlib").Path(__file__).resolve().parents[1] / "README.md"


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
