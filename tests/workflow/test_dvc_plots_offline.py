"""`make plots`' page (`study plots-template`, then `dvc plots show --html-template`): the repo's
dvc.yaml plots of two runs that differ only in their optimizer, drawn by the real `dvc`. The page
loads nothing from a network (the vega libraries inline, no CDN tag), and each panel is one run:
the plots are keyed by run_id, which names a run fully, so the two runs never share a panel."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import yaml

from study.cli import main

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"
RUNS = ("synthetic-small_cnn-standard-adam0.001-e2-s0-aaaa", "synthetic-small_cnn-standard-sgd0.05-e2-s0-bbbb")


def _project(path: Path) -> Path:
    """A DVC project holding the repo's plot definitions and templates, and two runs' tables."""
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run([BIN / "dvc", "init", "-q"], cwd=path, check=True)
    plots = [p for p in yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"] if "figure_images" not in str(p)]
    (path / "dvc.yaml").write_text(yaml.safe_dump({"plots": plots}))
    shutil.copytree(ROOT / "workflow/plots", path / "workflow/plots")
    epochs, classwise = [], []
    for run in RUNS:  # the same model, method, dataset and seed: only the optimizer differs
        same = {"run_id": run, "model": "small_cnn", "method": "standard", "dataset": "synthetic", "seed": 0}
        for c, name in enumerate(("cat", "dog")):
            epochs += [{**same, "epoch": e, "class_name": name, "clean_acc": 0.2 * e + 0.1 * c, "robust_acc": 0.1 * e}
                       for e in (1, 2)]
            classwise.append({**same, "eval": "clean", "checkpoint": "last", "class_name": name, "acc": 0.5 + 0.1 * c,
                              "ci_lo": 0.4, "ci_hi": 0.7, "n": 20})
    # the plots' files are the preset's (`${preset}`, interpolated from params.yaml)
    (path / "params.yaml").write_text("preset: ci\n")
    (path / "results/ci/tables").mkdir(parents=True)
    pd.DataFrame(epochs).to_csv(path / "results/ci/tables/epochs.csv", index=False)
    pd.DataFrame(classwise).to_csv(path / "results/ci/tables/classwise.csv", index=False)
    return path


def test_the_plots_page_needs_no_network_and_keys_panels_by_run(tmp_path, capsys):
    project = _project(tmp_path)
    template = project / "results/plots/template.html"
    assert main(["plots-template", "--out", str(template)]) == 0
    subprocess.run([BIN / "dvc", "plots", "show", "--html-template", str(template), "-o", "results/plots"],
                   cwd=project, check=True, capture_output=True)
    page = (project / "results/plots/index.html").read_text()
    # no script from elsewhere: every <script> is inline, and the libraries are in it
    assert not re.findall(r"<script[^>]*\bsrc=", page)
    assert "cdn.jsdelivr" not in page and "vegaEmbed(" in page
    assert all(f"/* {lib} (from snakemake.assets) */" in page for lib in ("vega/vega.js", "vega-lite/vega-lite.js"))
    specs = [json.loads(s) for s in re.findall(r"var spec = (\{.*?\});\n", page, flags=re.DOTALL)]
    assert len(specs) == 3
    for spec in specs:
        facet = spec["facet"]["field"]
        if facet == "evaluation":  # the class bars: their panel name starts with the run_id, with intervals
            (calc,) = [t["calculate"] for t in spec["transform"] if t.get("as") == "evaluation"]
            assert calc.startswith("datum.run_id + ")
            assert {"x": {"field": "ci_lo", "type": "quantitative"}, "x2": {"field": "ci_hi"}} in [
                layer["encoding"] for layer in spec["spec"]["layer"]]
        else:
            assert facet == "run_id"
        assert {row["run_id"] for row in spec["data"]["values"]} == set(RUNS)
