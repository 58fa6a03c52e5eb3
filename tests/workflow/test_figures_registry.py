"""The figure catalog (study/figures/catalog.py), `study figure` built from it, and the
panels (study/figures/panels.py) that the workflow draws from the plan."""

import inspect
import subprocess
import sys

import pytest
from helpers.commands import run_study

from study.config import plan_runs
from study.figures import panels
from study.figures.catalog import FIGURE_KINDS, make_figure
from study.run_directory import setting_tuple


def test_every_kind_draws_with_the_uniform_signature():
    for kind, spec in FIGURE_KINDS.items():
        draw = spec.draw
        params = inspect.signature(draw).parameters
        assert list(params)[:2] == ["table" if spec.reads == "table" else "records", "out_stem"], kind
        assert any(p.kind is p.VAR_KEYWORD for p in params.values()), f"{kind} must accept every option"
        assert spec.reads in ("table", "records") and spec.made_by.startswith("study "), kind


def test_importing_the_kinds_loads_no_plotting_code():
    # the `study` command builds its parser from the table: every command would pay for it
    code = "import sys, study.figures.catalog; print(sorted(m for m in sys.modules if m.split('.')[0] in " \
           "('matplotlib', 'scipy', 'pandas', 'torch')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_study_figure_offers_exactly_the_registered_kinds(tmp_path):
    proc = run_study("figure", "nope", "--out-stem", str(tmp_path / "x"), check=False)
    assert proc.returncode == 2 and "invalid choice: 'nope'" in proc.stderr
    assert all(kind in proc.stderr for kind in FIGURE_KINDS)


def test_make_figure_names_what_is_missing(tmp_path):
    with pytest.raises(ValueError, match="unknown figure kind 'nope'; valid: classwise, epochs"):
        make_figure("nope", None, tmp_path / "x")
    with pytest.raises(ValueError, match="figure classwise needs --model, --method"):
        make_figure("classwise", tmp_path / "t.csv", tmp_path / "x", dataset="cifar10")
    with pytest.raises(ValueError, match=r"figure confusion needs per-sample records \(--records; `study evaluate`"):
        make_figure("confusion", None, tmp_path / "x")
    with pytest.raises(FileNotFoundError, match="`study robustness-tables` makes it"):
        make_figure("cfp", tmp_path / "cfp.csv", tmp_path / "x", dataset="d", model="m", method="pgd_at")


def test_panels_of_the_ci_plan(ci_params):
    runs = plan_runs(ci_params)
    plain = [r for r in runs if not r.config.get("constructed") and not panels.is_mitigation_run(r)]
    epochs = panels.classwise(runs, evaluations=False)
    assert set(epochs) == {(r.dataset, r.config["model"], r.config["method"]) for r in plain}
    by_id = {r.run_id: r for r in runs}
    for key, (ids, options) in epochs.items():
        # one training setting per panel, that of the panel's first planned run
        first = next(r for r in plain if (r.dataset, r.config["model"], r.config["method"]) == key)
        assert ids[0] == first.run_id and {setting_tuple(by_id[i].run) for i in ids} == {setting_tuple(first.run)}
        assert options == {"dataset": key[0], "model": key[1], "method": key[2], "runs": ids}
    standard = panels.classwise(runs, "standard")
    assert {key[2] for key in standard} == {"standard"}
    assert all(options["evaluations"][0] == "clean" for _, options in standard.values())

    (group_key, (ids, options)), = panels.discrepancy(runs, "models", "model").items()
    assert group_key == ("models",) and ids == [r.run_id for r in runs if "models" in r.groups]
    assert options["by"] == "model" and options["runs"] == ids
    with pytest.raises(ValueError, match="experiment group 'nope'.*its groups: baseline, datasets"):
        panels.discrepancy(runs, "nope", "model")

    mitigation = [r for r in runs if panels.is_mitigation_run(r)]
    (key, (ids, options)), = panels.mitigation(runs).items()
    assert key[2] == "all" and options["methods"] == list(dict.fromkeys(r.config["method"] for r in mitigation))
    frl = panels.robustness([r for r in runs if "baseline" in r.groups], "all")
    assert [key[2] for key in frl] == ["all"] and len(next(iter(frl.values()))[0]) == sum(
        "baseline" in r.groups for r in runs)
    assert all(k[2] == "pgd_at" for k in panels.robustness(runs, of_method="pgd_at"))


def test_params_may_list_exactly_the_catalogs_figures_and_each_has_its_caption(repo_root):
    # the schema's names are the catalog's (tools/params_schema.py writes them from it)
    from study.figures.catalog import FIGURES
    from tools.params_schema import params_schema

    assert params_schema()["properties"]["figures"]["items"]["enum"] == list(FIGURES)
    for fig in FIGURES.values():
        captions = [fig.caption, *(caption for _, _, caption in fig.extra if caption)]
        assert all((repo_root / f"workflow/report/{c}.rst").exists() for c in captions), fig.name
