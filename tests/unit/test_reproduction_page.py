"""The reproduction report as the HTML page the study's report shows (study.reproduction.page): the
same rows and verdicts as the markdown, each claim's rows under its heading, and each run group's
recipe stated once above its rows rather than in every row."""

import re
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from helpers.class_rows import AA_PER_CLASS, AT_AA, AT_CLEAN, AT_PGD, runs

import study.reproduction.report as report
from study.reproduction import compare, reproduction_report
from study.reproduction.page import group_key, render_html
from study.reproduction.render import render

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def params():
    from study.config import load_params

    return load_params(ROOT / "params.yaml", {"preset": "paper"}, presets_dir=ROOT / "workflow/presets",
                       schema_path=ROOT / "workflow/schemas/params.schema.yaml")


def two_groups() -> pd.DataFrame:
    """AT runs at the published recipe, and the same runs at a reduced one (20 epochs, fewer images):
    two evaluations a group, each group's rows sharing its recipe."""
    evaluations = {"clean@best": AT_CLEAN, "pgd20@best": AT_PGD, "autoattack@best": AT_AA}
    full = runs("at", evaluations, per_class={"autoattack@best": AA_PER_CLASS})
    reduced = runs("at", evaluations, per_class={"autoattack@best": AA_PER_CLASS}, epochs=20, train_per_class=500)
    return pd.concat([full, reduced], ignore_index=True)


class _Tables(HTMLParser):
    """The page's tables as lists of rows of cell texts, and the text of each run group's header."""

    def __init__(self):
        super().__init__()
        self.tables, self.groups, self._cell, self._in_group = [], [], None, False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "div" and ("class", "group") in attrs:
            self._in_group = True
            self.groups.append("")

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell)
            self._cell = None
        elif tag == "div":
            self._in_group = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._in_group:
            self.groups[-1] += data


def test_the_page_holds_the_markdowns_rows_and_states_each_recipe_once(params):
    values, deltas = compare(two_groups(), params)
    page = render_html(values, deltas, "paper", "abc1234", "2026-01-01")
    markdown = render(values, deltas, "paper", "abc1234", "2026-01-01")
    parsed = _Tables()
    parsed.feed(page)
    rows = [row for table in parsed.tables for row in table[1:]]
    shown = [r for r in values + deltas if r.setting or r.estimate is not None]
    assert len(rows) == len(shown) > 0
    # every row's id and verdict, as in the markdown
    for row in shown:
        (cells,) = [c for c in rows if f"({row.published.id})" in c[0]]
        assert cells[-1] == row.verdict
        assert f"`{row.published.id}`" in markdown
    # the verdict count, the same line as the markdown's
    (count,) = [line for line in markdown.splitlines() if line.startswith("Claims: ")]
    assert count in page
    # one header per run group (its runs, protocol and recipe), above its rows: the recipe is on the
    # page once per group, never in a row (a row has the six columns of _HEAD alone)
    keys = {group_key(r) for r in shown}
    assert len(parsed.groups) == len(keys) and len(parsed.tables) == len(keys) < len(shown)
    for runs_text, _, recipe in keys:
        (header,) = [g for g in parsed.groups if g.startswith(f"Our runs: {runs_text} ")]
        assert header.endswith(f"recipe differences: {recipe}")
        assert page.count(escape(recipe)) == sum(key[2] == recipe for key in keys)
    assert all(len(cells) == 6 for cells in rows)
    headers = re.findall(r"<h2>(.*?)</h2>", page)
    assert "Wei et al. 2023 (CFA), Table 1" in headers and headers[-1].startswith("Fairness methods")


def test_the_command_writes_the_page_beside_the_markdown(params, tmp_path, monkeypatch):
    two_groups().to_csv(tmp_path / "classwise.csv", index=False)
    monkeypatch.setattr(report, "git_commit", lambda cwd=None: None)
    out = reproduction_report(tmp_path, params, tmp_path / "r.md", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert out == tmp_path / "r.md" and page.startswith("<!DOCTYPE html>")
    assert "commit <code>unknown</code>" in page and "- commit: `unknown`" in out.read_text()
