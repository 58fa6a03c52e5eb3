"""Adding a named thing is one row in one table (docs/architecture.md, "How to add"): a model
row in study.models.registry.MODELS and a figure row (with its kind) in study.figures.catalog,
each added here in-process and then seen where the study reads it: the plan
(study.config.plan_runs), what the workflow derives from the plan for its rules (the panels and
command of a figure rule, a job's time estimate: the functions workflow/rules/common.smk calls)
and the `study` command's choices."""

import copy
from pathlib import Path

import pytest

from study import labels, resources
from study.cli import build_parser
from study.config import ConfigError, load_params, plan_runs
from study.figures import catalog, panels
from study.models import registry

NEW_MODEL = registry.ModelSpec("tiny_net", "small_cnn", "SmallCNN", "Tiny Net", 0.01, min_image_size=8)


@pytest.fixture
def with_new_model(monkeypatch):
    monkeypatch.setitem(registry.MODELS, NEW_MODEL.name, NEW_MODEL)
    return NEW_MODEL.name


def _with_model_in_baseline(root: Path, params: dict, model: str) -> dict:
    """The ci preset, loaded and checked as the workflow loads it, its baseline also training `model`."""
    experiments = copy.deepcopy(params["experiments"])
    baseline = next(g for g in experiments if g["group"] == "baseline")
    baseline["models"] = [*baseline["models"], model]
    return load_params(root / "params.yaml", {"preset": "ci", "experiments": experiments},
                       presets_dir=root / "workflow/presets", schema_path=root / "workflow/schemas/params.schema.yaml")


def test_a_model_row_is_planned_estimated_labelled_and_drawn(repo_root, ci_params, with_new_model):
    with pytest.raises(ConfigError, match="unknown model 'other_net'"):  # the params check: no row, no model
        _with_model_in_baseline(repo_root, ci_params, "other_net")
    plan = plan_runs(_with_model_in_baseline(repo_root, ci_params, with_new_model))
    runs = [r for r in plan if r.config["model"] == with_new_model]
    assert runs, "the plan trains the new model"
    # the workflow's rule resources (common.smk: run_resource, train_priority) from the row's cost
    assert all(resources.train_minutes(r.run) >= 15 for r in runs)
    assert resources.forward_gflops(with_new_model, 64) == pytest.approx(4 * NEW_MODEL.gflops_32)
    assert labels.model_name(with_new_model) == "Tiny Net"
    # the class-wise figures draw a panel of it (common.smk's FIGURE_PANELS)
    study = catalog.Study(plan=plan)
    keys = catalog.FIGURES["fig01_classwise_standard"].panels(study)
    assert any(key[1] == with_new_model for key in keys)


def _draw_new(table: Path, out_stem: str | Path, **_) -> list[Path]:
    return []


@pytest.fixture
def with_new_figure(monkeypatch):
    kind = catalog.FigureKind("class_count", _draw_new, "table", ("dataset",))
    monkeypatch.setitem(catalog.FIGURE_KINDS, kind.name, kind)
    figure = catalog.Figure("fig99_class_count", kind.name, "classwise", lambda s: panels.rank_agreement(s.plan),
                            "rank_agreement", "Class counts", "{dataset}")
    monkeypatch.setitem(catalog.FIGURES, figure.name, figure)
    return figure


def test_a_figure_row_is_planned_given_a_command_and_offered_by_study_figure(ci_params, with_new_figure, tmp_path):
    plan = plan_runs(ci_params)
    drawn = with_new_figure.panels(catalog.Study(plan=plan))
    assert drawn and all(options["dataset"] == key[0] for key, (_, options) in drawn.items())
    assert with_new_figure.command == "figure class_count"  # common.smk's figure_args
    # `study figure` offers it, and make_figure dispatches to the row's own function
    args = build_parser().parse_args(["figure", "class_count", "--out-stem", str(tmp_path / "x")])
    assert args.kind == "class_count"
    table = tmp_path / "classwise.csv"
    table.write_text("dataset\n")
    assert catalog.make_figure("class_count", table, tmp_path / "x", dataset="synthetic") == []
    with pytest.raises(ValueError, match="figure class_count needs --dataset"):
        catalog.make_figure("class_count", table, tmp_path / "x")


def test_a_figure_row_names_a_known_kind_or_a_command_of_its_own():
    with pytest.raises(ValueError, match="unknown kind 'nope'"):
        catalog.Figure("fig99", "nope", "classwise", lambda s: {}, "classwise", "x")
    with pytest.raises(ValueError, match="a kind or a command of its own"):
        catalog.Figure("fig99", None, "classwise", lambda s: {}, "classwise", "x")
