"""The study's HTML report, opened in a real headless browser (Debian's chromium, driven by
Playwright): it opens on the finding, with the numbers of the results' class-wise table; its
categories come in the study's order; every figure of the manifest is in it and renders; its
landing page's links show the reproduction table as a page (a table per claim, each row with its
verdict or why it is not compared) and the headline figure (figure 2's PGD-AT panel) as an image.

The report is built as `make report PRESET=ci` builds it (synthetic data, minutes):
the figures, the reproduction report and the landing text through Snakemake, then
`snakemake --report`. `.ci/run` installs chromium where it is missing."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from helpers.workflow import BIN, copy_project, run_command

from study.front_page import class_range, headline_attack, headline_rows
from study.reproduction.comparison import (
    CONTEXT,
    DIFFERENCE_VERDICTS,
    FLAGGED,
    NO_NUMBER,
    NO_VALUE,
    NOT_IN_PRESET,
    RECIPE_DIFFERS,
    REDUCED,
    TEST_CHOSEN,
)
from study.reproduction.verdicts import VERDICTS

CHROMIUM = Path("/usr/bin/chromium")
# a headless browser on a machine without a network: no background connections, no sandbox as root
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync", "--disable-quic"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    project = copy_project(tmp_path_factory.mktemp("report"))
    shutil.copytree(Path(__file__).resolve().parents[2] / "study", project / "study",
                    ignore=shutil.ignore_patterns("__pycache__"))
    # as `make report PRESET=ci` builds it: what the report shows (rule report_inputs), then the report
    common = [BIN / "snakemake", "--profile", "workflow/profiles/cpu", "--cores", "2", "--config", "preset=ci"]
    run_command([*common, "--", "report_inputs"], project)
    run_command([*common, "--report", "results/ci/report.html", "--", "report_inputs"], project)
    return project


def test_the_report_opens_on_the_finding_and_every_figure_renders(report):
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: apt-get install chromium (as .ci/run does)"
    manifest = (report / "results/ci/figures/all").read_text().splitlines()
    figures = [line.split("\t")[0] for line in manifest if line and not line.startswith("#")]
    pngs = [f for f in figures if f.endswith(".png")]
    assert pngs, "the manifest lists no figure"
    classwise = pd.read_csv(report / "results/ci/tables/classwise.csv")
    rows = headline_rows(classwise)
    robust = class_range(rows, "pgd_at", headline_attack(rows))

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto((report / "results/ci/report.html").as_uri())
        page.wait_for_function("typeof results !== 'undefined' && typeof app !== 'undefined'")
        landing = page.inner_text("body")
        # the finding, with the numbers of this run's table
        assert "Class-wise robustness: the finding" in landing
        assert f"weakest class is {robust.weakest} at {100 * robust.weakest_acc:.1f}%" in " ".join(landing.split())
        assert "Claims: " in landing and "reduced recipe" in landing
        # the categories, in the study's order (numbered, so the report's alphabetical menu keeps it)
        ordered = sorted(page.evaluate("Object.keys(categories)"))
        assert ordered[0].endswith("Class-wise accuracy and robustness") and ordered[-1].endswith("Reproduction")
        assert [int(c.split(" ")[0]) for c in ordered] == list(range(1, len(ordered) + 1))
        # every figure of the manifest is a result of the report, and its image decodes in the browser
        present = set(page.evaluate("Object.keys(results)"))
        missing = [f for f in pngs if f not in present]
        assert not missing, f"figures of the manifest not in the report: {missing}"
        sizes = page.evaluate("""async (paths) => Promise.all(paths.map(async (path) => {
            const img = new Image();
            img.src = results[path].data_uri;
            await img.decode();
            return [path, img.naturalWidth, img.naturalHeight];
        }))""", pngs)
        assert all(w > 100 and h > 100 for _, w, h in sizes), sizes
        # the landing page's links show what they name: the reproduction table as a rendered page (a
        # table with the verdicts, not a download), and the headline figure as an image
        page.get_by_text("the reproduction table").click()
        shown = page.frame_locator("iframe")
        shown.locator("table").first.wait_for(timeout=10_000)
        assert shown.locator("table").count() > 0 and shown.locator("td.verdict").count() > 0
        assert shown.locator("#verdicts").inner_text().startswith("Claims: ")
        # rows by claim (a heading each), every verdict cell a named verdict or why the row is not compared
        assert shown.locator("h2").count() > 1
        words = {*VERDICTS, *DIFFERENCE_VERDICTS, NOT_IN_PRESET, RECIPE_DIFFERS, FLAGGED, NO_VALUE, CONTEXT, NO_NUMBER,
                 *(f"size {v}; {TEST_CHOSEN}" for v in VERDICTS)}
        # or what a row needs to reach a verdict (power.needs_text), after a difference row's direction
        needs = re.compile(r"((agrees|inconclusive|differs) in direction; size )?"
                           r"needs (≥ \d+ seeds|the whole test set and ≥ \d+ seeds|> \d+ seeds)")
        cells = shown.locator("td.verdict").all_inner_texts()
        odd = {c for c in cells if c.split(REDUCED)[0] not in words and not needs.fullmatch(c)}
        assert not odd, sorted(odd)
        page.goto((report / "results/ci/report.html").as_uri())
        page.wait_for_function("typeof results !== 'undefined' && typeof app !== 'undefined'")
        page.get_by_text("class-wise accuracy and robustness of PGD-AT").click()
        image = page.locator("img[src^='data:image/png']").first
        image.wait_for(timeout=10_000)
        assert image.evaluate("img => img.complete && img.naturalWidth > 100"), "the headline figure is not shown"
        # the figure the link names: figure 2 (PGD-AT's class-wise accuracy and robustness), no other
        (named,) = page.evaluate("src => Object.keys(results).filter(k => results[k].data_uri === src)",
                                 image.get_attribute("src"))
        assert "/fig02_classwise_adversarial/" in named and named.endswith("__pgd_at.png"), named
        browser.close()
