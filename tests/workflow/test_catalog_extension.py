"""Adding a named thing is one row in one table (docs/architecture.md, "How to add"): a model
row in study.models.registry.MODELS, a figure row (with its kind) in study.figures.catalog, an
evaluation kind in study.config.evaluations.EVALUATION_KINDS and a dataset in
study.data.registry.DATASETS, each added here in-process and then seen where the study reads it:
the params check (and the schema written from the types), the plan (study.config.plan_runs),
what the workflow derives from the plan for its rules (the panels and command of a figure rule,
a job's time estimate: the functions workflow/rules/common.smk calls), the labels and the
`study` command's choices and arguments."""

import copy
import json
import sys
import types
from pathlib import Path
from typing import Literal

import pytest
import torch
from helpers.model_rows import row_mismatches
from torch import nn

from study import cost, labels, resources, workload
from study.cli import build_parser
from study.config import ConfigError, EvaluationSpec, Params, evaluations, load_params, plan_runs, resolve_evaluation
from study.data import registry as data_registry
from study.data.registry import DatasetInfo
from study.figures import catalog, panels
from study.models import registry
from tools.params_schema import schema_text


class TinyNet(nn.Module):
    """A model no row of the table builds: one 3x3 convolution of 8 channels, pooled, then `fc`
    (the registry's contract); 314 parameters at 10 classes and 3 channels, its own size."""

    def __init__(self, num_classes: int, in_channels: int, normalize: nn.Module) -> None:
        super().__init__()
        self.normalize = normalize
        self.conv = nn.Conv2d(in_channels, 8, 3, padding=1)
        self.feature_dim = 8
        self.fc = nn.Linear(8, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(nn.functional.adaptive_avg_pool2d(torch.relu(self.conv(self.normalize(x))), 1), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


NEW_MODEL = registry.ModelSpec("tiny_net", "tiny_net", "TinyNet", "Tiny Net", 0.00044,
                               parameters=314, feature_dim=8, min_image_size=8)


@pytest.fixture
def with_new_model(monkeypatch):
    """Its module (study/models/tiny_net.py, as a module object) and its one row."""
    module = types.ModuleType("study.models.tiny_net")
    module.TinyNet = TinyNet
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(registry.MODELS, NEW_MODEL.name, NEW_MODEL)
    return NEW_MODEL.name


def _with_model_in_baseline(root: Path, params: Params, model: str) -> Params:
    """The ci preset, loaded and checked as the workflow loads it, its baseline also training `model`."""
    experiments = copy.deepcopy(params.set_fields()["experiments"])
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
    assert workload.forward_gflops(with_new_model, 64) == pytest.approx(4 * NEW_MODEL.gflops_32)
    assert row_mismatches(NEW_MODEL) == []  # the row states the size of the model it builds
    assert labels.model_name(with_new_model) == "Tiny Net"
    # the class-wise figures draw a panel of it (common.smk's FIGURE_PANELS)
    study = catalog.Study(plan=plan)
    keys = catalog.FIGURES["fig01_classwise_standard"].panels(study)
    assert any(key[1] == with_new_model for key in keys)


def test_a_model_row_is_priced_by_its_own_size(repo_root, ci_params, with_new_model):
    plan = plan_runs(_with_model_in_baseline(repo_root, ci_params, with_new_model))
    table = workload.load_throughput(repo_root / workload.THROUGHPUT_TABLE)
    # the same method's run of the new model and of the baseline's own (small_cnn): only the model differs
    new, old = ([r for r in plan if r.groups[0] == "baseline" and r.run.method == "standard" and r.run.model == m]
                for m in (with_new_model, "small_cnn"))
    assert len(new) == len(old) == 1
    (new,), (old,) = new, old
    disk = {r.run.model: cost.train_job(r, "baseline", table).disk["checkpoints"] for r in (new, old)}
    # model.pt and checkpoint.pt (weights and momentum), 4 bytes a parameter of the row; not small_cnn's, not the zoo's
    assert disk == {with_new_model: 3 * 4 * 314, "small_cnn": 3 * 4 * registry.MODELS["small_cnn"].parameters}
    # the host memory request holds its state, 16 bytes a parameter, beside the data and the runtime
    train, test, channels, side = workload.data_facts(new.run)
    data_mb = (train + test) * channels * side * side / 2**20
    for run, parameters in ((new, 314), (old, registry.MODELS["small_cnn"].parameters)):
        assert resources.mem_mb(run.run, floor=0) == int(6000 + 4 * data_mb + parameters * 16 / 2**20)


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


# ---------------------------------------------------------------- an evaluation type, a dataset

class NoiseEvaluation(evaluations.AnyEvaluation):
    type: Literal["noise"]
    norm: Literal["l2"]
    eps: float
    draws: int = 4


NEW_KIND = evaluations.EvaluationKind("noise", NoiseEvaluation, "Gaussian noise", lambda ev: ev.draws,
                                      "study.attacks.configured:attack_clean")


@pytest.fixture
def with_new_kind(monkeypatch):
    monkeypatch.setitem(evaluations.EVALUATION_KINDS, NEW_KIND.name, NEW_KIND)
    return NEW_KIND.name


def _load(root: Path, schema: Path, **overrides) -> Params:
    return load_params(root / "params.yaml", {"preset": "ci", **overrides}, presets_dir=root / "workflow/presets",
                       schema_path=schema)


def test_an_evaluation_kind_row_is_checked_planned_estimated_labelled_and_parsed(repo_root, ci_params, with_new_kind,
                                                                                 tmp_path):
    noise = {"type": "noise", "norm": "l2", "eps": 0.5, "draws": 30}
    experiments = copy.deepcopy(ci_params.set_fields()["experiments"])
    next(g for g in experiments if g["group"] == "baseline")["evaluations"].append("noise")
    evals = {**ci_params.set_fields()["evaluations"], "noise": noise}
    # the schema written from the types holds the row (the params check validates against it)
    schema = tmp_path / "params.schema.yaml"
    schema.write_text(schema_text())
    with pytest.raises(ConfigError, match="draws: 'many' is not valid; expected an integer"):
        _load(repo_root, schema, evaluations={**evals, "noise": {**noise, "draws": "many"}})
    params = _load(repo_root, schema, evaluations=evals, experiments=experiments)
    run = next(r for r in plan_runs(params) if "noise" in r.evaluations)
    # the workflow's evaluate job (common.smk: the resolved evaluation, parsed; its time from the row's cost)
    job = EvaluationSpec.parse(resolve_evaluation(params, "noise", run.config["dataset"])).config
    assert type(job).__name__ == "NoiseJob" and job.draws == 30 and job.name == "noise"
    assert workload.attack_steps(job) == 30
    assert resources.evaluate_minutes(run.run, job) >= 10
    assert labels.eval_name("noise", noise) == "Gaussian noise, L2 0.5"
    # `study evaluate --evaluation` takes it; the row's attack function (what predict calls) resolves
    args = build_parser().parse_args(["evaluate", "--run-dir", str(tmp_path), "--data", str(tmp_path),
                                      "--evaluation", json.dumps(job.model_dump()), "--out", "x.parquet"])
    assert args.evaluation[0].config == job
    assert NEW_KIND.run.__name__ == "attack_clean"
    # a type no row holds is named with the valid ones
    with pytest.raises(ConfigError, match="type: 'blur' is not valid; valid: clean, pgd, autoattack, square, noise"):
        _load(repo_root, schema, evaluations={**evals, "noise": {**noise, "type": "blur"}})


NEW_DATASET = DatasetInfo("tiny_digits", 10, 1, 16, tuple(str(i) for i in range(10)), ("default",),
                          label="Tiny Digits", train_size=5_000, test_size=1_000)


def test_a_dataset_row_is_planned_estimated_and_labelled(repo_root, ci_params, monkeypatch):
    monkeypatch.setitem(data_registry.DATASETS, NEW_DATASET.name, NEW_DATASET)
    experiments = copy.deepcopy(ci_params.set_fields()["experiments"])
    next(g for g in experiments if g["group"] == "baseline")["dataset"] = NEW_DATASET.name
    params = _load(repo_root, repo_root / "workflow/schemas/params.schema.yaml", experiments=experiments)
    runs = [r for r in plan_runs(params) if r.config["dataset"] == NEW_DATASET.name]
    assert runs and all(r.config["data_variant"] == "default" for r in runs)
    # the job estimates read the row's sizes: the full training split and its test split
    run = next(r.run for r in runs if r.config["method"] == "standard")
    parameters = registry.MODELS[run.model].parameters
    assert resources.mem_mb(run, floor=0) == int(6000 + 4 * (5_000 + 1_000) * 16 * 16 / 2**20 + parameters * 16 / 2**20)
    assert labels.dataset_name(NEW_DATASET.name) == "Tiny Digits"
    assert labels.dataset_name(f"{NEW_DATASET.name}_d_r") == "Tiny Digits (D_R)"
