"""Everything the configuration alone decides is checked where the plan is made (issue 49, item 4):
no job finds a configuration error after the jobs before it were paid for.

- Every planned run of every preset builds its training setup (optimizer and schedule, policies with
  their averaging, the training attack and the step's forwards, the loaders' subsets and validation
  split of the data's labels), without data, model or epoch; and every preset passes the
  reproduction report's pair checks.
- Each condition a training or report job checks from the configuration is refused by
  `load_params` or `plan_runs` (every front end's: `study plan`, `study preflight`, the DAG, `dvc
  repro`) in one line that names the bad value and what is valid.
"""

import dataclasses
import functools
import math
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
import torch

from study.config import ConfigError, ConfigSpec, available_presets, load_params, plan_runs
from study.config.comparisons import comparisons
from study.config.requirements import fat_tau, wat_costs
from study.config.types import RunConfig
from study.data.registry import DATASETS
from study.data.splits import stratified_subset
from study.models.registry import MODELS
from study.train.adversary import Adversary
from study.train.optim import build_optimizer, build_scheduler
from study.train.policies import build_policies
from study.train.step import TrainStep
from study.train.validation import validation_split

ROOT = Path(__file__).resolve().parents[2]
PRESETS = available_presets(ROOT / "workflow/presets")


def _load(preset: str, **overrides: object):
    return load_params(ROOT / "params.yaml", {"preset": preset, **overrides}, presets_dir=ROOT / "workflow/presets",
                       schema_path=ROOT / "workflow/schemas/params.schema.yaml")


@functools.cache
def _labels(dataset: str, per_class: int) -> torch.Tensor:
    """Labels of a split of `dataset` with `per_class` images of each class, class by class."""
    return torch.arange(DATASETS[dataset].num_classes).repeat_interleave(per_class)


@functools.cache
def _loaders(dataset: str, data: tuple[int, int], train_per_class: int | None, validation: tuple,
             eval_per_class: int) -> torch.Tensor:
    """What the run's setup takes of its data's labels (study.train.setup: the training subset, the
    validation split, the per-epoch test subset), once per setting: the training split's class counts."""
    train_y = _labels(dataset, data[0])
    train_idx = stratified_subset(train_y, train_per_class)
    if validation:
        train_idx, _ = validation_split(train_idx, train_y, dict(validation))
    assert len(stratified_subset(_labels(dataset, data[1]), eval_per_class)) == \
        DATASETS[dataset].num_classes * eval_per_class
    return torch.bincount(train_y[train_idx], minlength=DATASETS[dataset].num_classes)


def _class_counts(run: RunConfig) -> torch.Tensor:
    """The training split's class counts of a run, its data as many images per class as it holds
    (synthetic: its settings; a real dataset: its size over its classes)."""
    info = DATASETS[run.dataset]
    if run.synthetic is not None:
        data = (run.synthetic.train_per_class, run.synthetic.test_per_class)
    else:
        data = ((info.train_size or 0) // info.num_classes, (info.test_size or 0) // info.num_classes)
    validation = tuple(run.validation.model_dump().items()) if run.validation is not None else ()
    return _loaders(run.dataset, data, run.train_per_class, validation, run.epoch_eval.per_class)


def _training_setup(run: RunConfig) -> TrainStep:
    """What study.train.setup.setup_run and the step build of a run, but its data and model: the
    subsets and split of the labels, the optimizer and schedule (over a stand-in parameter), the
    policies, the training attack, the step (its forwards, its update)."""
    num_classes = DATASETS[run.dataset].num_classes
    counts = _class_counts(run)
    model = torch.nn.Linear(2, num_classes)
    optimizer = build_optimizer(model.parameters(), run.optimizer)
    scheduler = build_scheduler(optimizer, run.schedule, run.epochs, math.ceil(int(counts.sum()) / run.batch_size))
    assert all(math.isfinite(lr) for lr in scheduler.get_last_lr())
    policies = build_policies(run.method_config, num_classes, run.epochs, counts)
    adversary = Adversary(run.method_config.adversary)
    if adversary.cfg is not None and adversary.cfg.type == "fat":
        fat_tau(adversary.cfg)
    if run.method_config.weights is not None and run.method_config.weights.type == "wat":
        wat_costs(run.method_config)  # the validation costs' loss and attack (study.train.records)
    state = SimpleNamespace(run=run, model=model, dev=torch.device("cpu"), optimizer=optimizer, policies=policies,
                            adversary=adversary, dev_gen=torch.Generator(), inner_loss=policies.loss.inner)
    return TrainStep(state, "off")


@pytest.mark.parametrize("preset", PRESETS)
def test_every_planned_run_builds_its_training_setup_and_every_pair_passes_the_reports_checks(preset):
    params = _load(preset)
    runs = [r for r in plan_runs(params) if r.trained is not None]
    assert runs
    steps = [_training_setup(r.trained) for r in runs]
    # the step's forwards come from each run's own bn_stats: an adversarial forward before every update
    assert all("adv" in step.before for step in steps)
    # the pairs the report (and figure 13) compares, with what each declares and what differs
    assert comparisons(params), "every preset compares methods"


# ------------------------------------------------- each condition, refused in one line at plan time

def _refused(preset: str, overrides: dict) -> str:
    """The one-line ConfigError of loading the preset with `overrides` and planning its runs."""
    with pytest.raises(ConfigError) as err:
        plan_runs(_load(preset, **overrides))
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(("overrides", "expected"), [
    # a per-class list of the wrong length, and a class index the dataset lacks (a train job's errors before)
    ({"methods.cw_critical.weights": {"type": "static", "values": [1, 2, 3]}},
     "method 'cw_critical': run config: method_config.weights.values: 3 class costs for synthetic's 10 classes; "
     "valid: 10 positive numbers"),
    ({"methods.cw_critical.weights": {"type": "static"}},
     "method 'cw_critical': weights.values: missing; weights type 'static' needs its class costs"),
    ({"methods.tat_weakest.targets": {"class": 12}},
     "method_config.targets.class: 12 is not a class of synthetic; valid: 'weakest' or a class index 0..9"),
    ({"methods.cw_critical.weights": {"class": 10}},
     "method_config.weights.class: 10 is not a class of synthetic; valid: 'weakest' or a class index 0..9"),
    # DAFA's warm-up epoch beyond the run: its weights would never be computed
    ({"methods.trades_dafa.weights": {"warmup_epoch": 70}},
     "method_config.weights.warmup_epoch: 70 is not valid for a run of 2 epochs (DAFA's weights come after that "
     "epoch); valid: 1..1"),
    # the method's policies and training attack
    ({"methods.trades_cfa.loss": {"normalize": False}},
     "method 'trades_cfa': loss.normalize: false is not valid with lambda2 0.5"),
    ({"methods.pgd_at.adversary": {"restarts": 2}},
     "adversary.restarts: 2 is not valid; a training attack runs one restart (1)"),
    ({"methods.pgd_at.adversary": {"step_noise": 0.001}},
     "adversary.step_noise: 0.001 (FAT's omega) needs adversary type 'fat'; the method's is 'pgd'"),
    ({"methods.fat.adversary": {"tau": None}},
     "adversary.tau: missing; adversary type 'fat' needs its steps after the first misclassification"),
    ({"methods.trades_trix.adversary": {"type": "fat", "tau": 3}},
     "targets.type: 'trix' attacks each sample targeted or untargeted with PGD; the method's adversary type is "
     "'fat'; valid: 'pgd'"),
    ({"methods.trades_wat.loss": {"type": "ce"}},
     "weights.type: 'wat' computes its costs with the TRADES loss and the training attack; the method has loss "
     "type 'ce' and adversary 'pgd'; valid: loss type 'trades' with an adversary"),
    ({"methods.trades_dafa.weights": {"type": "none"}},
     "epsilon.type: 'dafa' scales the radius by DAFA's class weights; the method's weights type is 'none'; "
     "valid: 'dafa'"),
    ({"methods.pgd_at.adversary": {"bn_stats": ["clean", "step", "adv"]}},
     "adversary.bn_stats: ['clean', 'step', 'adv'] is not valid; the loss's forwards (adv) come before the update"),
    # the loaders' subsets of the synthetic data (60 training and 20 test images per class in ci)
    ({"train.train_per_class": 100},
     "train_per_class: 100 is more than the 60 training images per class of the synthetic data (data.synthetic); "
     "valid: 1..60"),
    ({"train.epoch_eval.per_class": 30},
     "epoch_eval.per_class: 30 is more than the 20 test images per class of the synthetic data (data.synthetic); "
     "valid: 1..20"),
    ({"methods.frl_reweight.train.validation": {"fraction": 0.99}},
     "validation: {'fraction': 0.99} holds out 20 of the 20 training images of each class, leaving none to train "
     "on; valid: fewer than 20 per class"),
], ids=lambda v: next(iter(v)) if isinstance(v, dict) else None)
def test_a_condition_a_train_job_would_meet_is_refused_by_the_plan(overrides, expected):
    assert expected in _refused("ci", overrides)


def test_a_method_that_reads_a_validation_split_in_a_group_without_one_is_refused_by_the_plan():
    # the paper plan before CFA's split was given to trades_cfa_published (issue 49, item 5)
    message = _refused("paper", {"methods.trades_cfa_published.train": None})
    assert message.startswith("experiment group 'published_dafa', method 'trades_cfa_published': run config: ")
    assert ("validation: null, but method 'trades_cfa_published' adapts to the validation split's statistics: "
            "averaging type 'fawa' (FAWA's threshold); set train.validation (e.g. {fraction: 0.02})") in message


def test_a_model_too_large_for_the_images_is_refused_by_the_plan():
    # no model of the table needs more than the smallest images a preset trains on: one that did
    row = dataclasses.replace(MODELS["small_cnn"], min_image_size=32)
    with mock.patch.dict(MODELS, {"small_cnn": row}):
        message = _refused("ci", {})
    assert "model: 'small_cnn' needs images of at least 32 pixels a side; synthetic's are 16" in message


def test_a_run_config_given_by_hand_is_checked_as_the_plans_are():
    """`study train --run-config` parses the same way: a job never trains a config the plan refuses."""
    run = next(r for r in plan_runs(_load("ci")) if r.trained is not None and r.trained.method == "trades_cfa")
    config = {**run.config, "validation": None}
    config.pop("selection", None)
    with pytest.raises(ConfigError, match=r"^run config: validation: null, but method 'trades_cfa' adapts to the "
                                          r"validation split's statistics: averaging type 'fawa'"):
        ConfigSpec.parse({k: v for k, v in config.items() if v is not None})


def test_a_cross_group_control_without_the_groups_dataset_is_refused_where_the_params_are_loaded():
    # the reproduce preset sets `at` against the baseline group's standard runs; on another dataset
    # that control has no runs to compare with
    with pytest.raises(ConfigError, match=r"experiment group 'mitigation': compare: group 'baseline' runs "
                                          r"'standard' on cifar10 with preact_resnet18; a cross-group control "
                                          r"needs the group's datasets"):
        _load("reproduce", **{"experiments": _reproduce_groups_on("cifar100")})


def _reproduce_groups_on(dataset: str) -> list[dict]:
    from study.config import read_yaml

    groups = read_yaml(ROOT / "workflow/presets/reproduce.yaml")["experiments"]
    return [{**g, "dataset": dataset} if g["group"] == "mitigation" else g for g in groups]
