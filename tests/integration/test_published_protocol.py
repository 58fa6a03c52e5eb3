"""The published protocol (issue 31, part 3): beside the study's best checkpoint on validation,
a run may keep `published`, the checkpoint CFA's code would have reported: chosen on the test
subset's per-epoch records by CFA's index (mean plus worst-class robust accuracy), from the
first epoch after half of the run, candidates within 0.02 of the best index so far."""

import copy
import json
from pathlib import Path
from typing import get_args

import pandas as pd
import pytest
from helpers.params import changed

from study.checkpoints import CHECKPOINT_FILES, CHECKPOINTS, STUDY_CHECKPOINTS
from study.config import ConfigError, load_params, plan_runs
from study.config.fields import Checkpoint
from study.config.protocols import published_protocol
from study.config.spec import EvaluationSpec
from study.config.types import PublishedSelection
from study.io import load_torch
from study.labels import eval_name
from study.metrics.epoch_selection import first_eligible_epoch
from study.record_names import record_name, split_record_name
from study.train.published_protocol import choose_published

ROOT = Path(__file__).resolve().parents[2]
CFA = PublishedSelection()


def _records(accs: dict[int, list[float]], n: int = 10) -> list[dict]:
    """epochs.csv rows: epoch -> robust accuracy of each class on n test images per class."""
    return [{"epoch": epoch, "class": c, "n": n, "robust_acc": acc}
            for epoch, per_class in accs.items() for c, acc in enumerate(per_class)]


# ------------------------------------------------------------------ the chooser, by hand


def test_first_eligible_epoch_counts_as_cfa():
    # CFA train.py: 0-based `epoch >= 0.5 * args.epochs`: of 200 epochs the 101st is the first
    assert first_eligible_epoch(200, 0.5) == 101
    assert first_eligible_epoch(2, 0.5) == 2 and first_eligible_epoch(3, 0.5) == 2
    assert first_eligible_epoch(10, 0.0) == 1


def test_the_band_is_measured_from_the_best_index_so_far():
    """8 epochs, eligible from the 5th. Indices (mean + worst): 1: 2.0 (the highest, too early);
    5: 0.5 + 0.4 = 0.9, the first eligible, a candidate; 6: 0.45 + 0.4 = 0.85 < 0.9 - 0.02;
    7: 0.6 + 0.5 = 1.1, the new best; 8: 0.6 + 0.48 = 1.08, on the band's edge: a candidate.
    Epoch 5 stays a candidate although 1.1 came later: CFA saved it when it was the best."""
    choice = choose_published(_records({1: [1.0, 1.0], 2: [0.1, 0.1], 3: [0.2, 0.2], 4: [0.2, 0.2],
                                        5: [0.6, 0.4], 6: [0.5, 0.4], 7: [0.7, 0.5], 8: [0.72, 0.48]}), 8, CFA)
    by_epoch = {e.epoch: e for e in choice.epochs}
    assert [e.eligible for e in choice.epochs] == [False] * 4 + [True] * 4
    assert by_epoch[5].index == pytest.approx(0.9) and by_epoch[6].index == pytest.approx(0.85)
    assert by_epoch[8].mean == pytest.approx(0.6) and by_epoch[8].worst == pytest.approx(0.48)
    assert choice.candidates == [5, 7, 8]
    assert choice.chosen_epoch == 7
    narrow = choose_published(_records({5: [0.6, 0.4], 7: [0.7, 0.5], 8: [0.72, 0.48]}), 8,
                              PublishedSelection(band=0.01))
    assert narrow.candidates == [5, 7] and narrow.chosen_epoch == 7


def test_the_index_is_the_mean_plus_the_worst_class_unless_the_mean_is_asked_for():
    # epoch 3: mean 0.55, worst 0.2 (0.75); epoch 4: mean 0.5, worst 0.4 (0.9)
    accs = {3: [0.9, 0.2], 4: [0.6, 0.4]}
    assert choose_published(_records(accs), 4, CFA).chosen_epoch == 4
    assert choose_published(_records(accs), 4, PublishedSelection(index="mean")).chosen_epoch == 3


def test_the_worst_index_chooses_the_best_worst_class_as_trix_reports():
    # TRIX's "best checkpoint": the best worst-class robust accuracy, whatever the mean; epoch 3
    # has the best mean, epoch 4 the best CFA index (the earlier of a tie with 5), epoch 5 the best worst class
    accs = {3: [0.9, 0.2], 4: [0.6, 0.4], 5: [0.45, 0.45]}
    trix = PublishedSelection(index="worst", band=0, from_epoch=0)
    assert choose_published(_records(accs), 5, trix).chosen_epoch == 5
    assert choose_published(_records(accs), 5, CFA).chosen_epoch == 4
    assert choose_published(_records(accs), 5, PublishedSelection(index="mean")).chosen_epoch == 3


def test_the_worst_class_of_100_classes_is_the_weakest_tenth():
    # the study's worst-class figure (study.metrics.worst), as the papers' CIFAR-100 tables
    choice = choose_published(_records({1: [0.0] + [0.3] * 9 + [0.6] * 90}), 1, CFA)
    assert choice.epochs[0].worst == pytest.approx(0.27)
    assert choice.epochs[0].mean == pytest.approx(0.567)


def test_ties_keep_the_earlier_epoch_and_both_are_candidates():
    choice = choose_published(_records({2: [0.5, 0.3], 3: [0.3, 0.5], 4: [0.4, 0.2]}), 4,
                              PublishedSelection(from_epoch=0.25))
    assert choice.chosen_epoch == 2 and choice.candidates == [2, 3]


def test_records_without_robust_accuracy_are_refused():
    with pytest.raises(ValueError, match=r"epoch 1: .*train\.epoch_eval\.attack"):
        choose_published(_records({1: [float("nan"), 0.5]}), 2, PublishedSelection(from_epoch=0.0))


# ------------------------------------------------------------------ names and settings


def test_published_is_a_checkpoint_everywhere_checkpoints_are_named():
    assert CHECKPOINTS == get_args(Checkpoint) == tuple(CHECKPOINT_FILES)
    assert CHECKPOINT_FILES["published"] == "model_published.pt"
    assert record_name("pgd20", "published") == "pgd20@published"
    assert split_record_name("pgd20@published") == ("pgd20", "published")
    assert "published protocol" in eval_name("pgd20@published")
    assert "published" not in STUDY_CHECKPOINTS


def test_the_ci_plan_keeps_and_evaluates_the_published_checkpoint(ci_params):
    runs = plan_runs(ci_params)
    kept = [r for r in runs if "published_selection" in r.config]
    assert {r.config["method"] for r in kept} >= {"at", "frl_reweight_remargin", "trades_cfa"}
    assert all(r.config["published_selection"] == CFA.model_dump() for r in kept)
    assert all("mitigation" in r.kinds for r in kept)
    listed = [r for r in runs if "mitigation_last" in r.groups]
    assert listed and all(r.checkpoints == ["last", "best", "published"] for r in listed)
    # a group that does not list it: the checkpoints it lists, no more
    assert all("published" not in r.checkpoints for r in runs if "mitigation_last" not in r.groups)


def test_a_group_listing_published_needs_the_protocol(ci_params):
    groups = [{**g, "checkpoints": ["last", "published"]} if g["group"] == "baseline" else g
              for g in ci_params.set_fields()["experiments"]]
    params = changed(ci_params, experiments=groups)
    with pytest.raises(ConfigError, match=r"'baseline': checkpoint 'published' needs the published protocol "
                                          r"\(train\.published_selection\)") as err:
        plan_runs(params)
    assert "\n" not in str(err.value)


def test_the_protocol_without_an_epoch_attack_is_refused(ci_params):
    groups = [{**g, "train": {**g["train"], "epoch_eval": {"per_class": 4, "attack": None}}}
              if g["group"] == "mitigation_last" else g for g in ci_params.set_fields()["experiments"]]
    params = changed(ci_params, experiments=groups)
    with pytest.raises(ConfigError, match=r"'mitigation_last' on synthetic: train\.published_selection needs "
                                          r"train\.epoch_eval\.attack") as err:
        plan_runs(params)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("value", "named"), [({"band": 2}, "band: 2 is not valid; expected a number >= 0 and <= 1"),
                                              ({"index": "median"}, "expected one of mean, mean_plus_worst"),
                                              ({"from_epoch": 1}, "from_epoch: 1 is not valid")])
def test_a_bad_setting_is_one_line_naming_it(value, named):
    with pytest.raises(ConfigError, match=r"train\.published_selection\.") as err:
        load_params(ROOT / "params.yaml", {"preset": "ci", "train.published_selection": value},
                    presets_dir=ROOT / "workflow/presets", schema_path=ROOT / "workflow/schemas/params.schema.yaml")
    assert named in str(err.value) and "\n" not in str(err.value)


def test_the_run_config_refuses_the_protocol_without_an_epoch_attack(ci_params):
    from study.config.spec import ConfigSpec

    cfg = copy.deepcopy(next(r for r in plan_runs(ci_params) if "published_selection" in r.config).config)
    cfg["epoch_eval"].pop("attack")
    with pytest.raises(ValueError, match=r"published_selection: needs epoch_eval\.attack"):
        ConfigSpec.parse(cfg)


def test_the_paper_protocol_reads_as_the_report_names_it():
    paper = load_params(ROOT / "params.yaml", {"preset": "paper"}, presets_dir=ROOT / "workflow/presets",
                        schema_path=ROOT / "workflow/schemas/params.schema.yaml")
    for group in ("mitigation", "mitigation_cifar100"):
        protocol = published_protocol(paper, group)
        assert protocol.selection == CFA and protocol.first_eligible_epoch == 101
        assert protocol.describe() == (
            "published protocol: test set (100 images per class, pgd10), CFA index (mean + worst-class robust "
            "accuracy) from epoch 101 of 200, band 0.02")
        listed = paper.group(group).checkpoints
        assert listed == ["last", "best", "published"]
    assert published_protocol(paper, "baseline") is None
    with pytest.raises(ConfigError, match="unknown experiment group 'nope'"):
        published_protocol(paper, "nope")


def test_figure_13_leaves_the_published_checkpoint_out():
    from study.figures.mitigation import mitigation_table

    rows = [{"run_id": "at-s0", "dataset": "cifar10", "model": "m", "method": "at", "seed": 0, "eval": ev,
             "checkpoint": split_record_name(ev)[1], "class_name": f"c{c}", "acc": 0.5, "n": 100}
            for ev in ("pgd20@best", "pgd20@published", "pgd20") for c in range(10)]
    table = mitigation_table(pd.DataFrame(rows))
    assert sorted(table["checkpoint"]) == ["best", "last"]


# ------------------------------------------------------------------ a tiny run, end to end


@pytest.fixture(scope="module")
def published_run(tmp_path_factory, synthetic_splits, ci_params):
    """A 3-epoch PGD-AT run of the ci preset that keeps the published checkpoint (CFA's
    settings: epochs 2 and 3 are eligible), with its clean records of that checkpoint in the tables."""
    from study.config import resolve_evaluation
    from study.evaluate.checkpoint_eval import evaluate_checkpoint
    from study.tables.classwise import build_tables
    from study.train.engine import train_run

    pgd_at = next(r for r in plan_runs(ci_params) if r.config["method"] == "pgd_at")
    cfg = copy.deepcopy(pgd_at.config)
    cfg.update(epochs=3, train_per_class=12, published_selection=CFA.model_dump())
    cfg["epoch_eval"].update(per_class=4, attack={**cfg["epoch_eval"]["attack"], "steps": 1})
    cfg["method_config"]["adversary"]["steps"] = 1
    root = tmp_path_factory.mktemp("published")
    run_dir = root / "run"
    train_run(cfg, synthetic_splits, run_dir, device="cpu", progress=False)
    record = root / "clean@published.parquet"
    evaluate_checkpoint(run_dir, synthetic_splits,
                        [(EvaluationSpec.parse({**resolve_evaluation(ci_params, "clean"), "test_per_class": 2}),
                          record)],
                 device="cpu", progress=False, checkpoint="published")
    tables = build_tables([record], [run_dir / "epochs.csv"], root / "tables")
    return run_dir, tables, cfg


def test_the_run_keeps_the_epoch_its_records_choose(published_run):
    run_dir, _, _ = published_run
    epochs = pd.read_csv(run_dir / "epochs.csv")
    # by hand from epochs.csv: mean over the subset's images plus the weakest of its 10 classes
    index = {e: (g["robust_acc"] * g["n"]).sum() / g["n"].sum() + g["robust_acc"].min()
             for e, g in epochs.groupby("epoch")}
    assert len(index) == 3
    want = max((2, 3), key=lambda e: (index[e], -e))
    assert load_torch(run_dir / "model_published.pt")["epoch"] == want
    evidence = json.loads((run_dir / "published.json").read_text())
    assert evidence["chosen_epoch"] == want and evidence["split"] == "test"
    assert evidence["first_eligible_epoch"] == 2 and evidence["band"] == 0.02
    assert [e["eligible"] for e in evidence["epochs"]] == [False, True, True]
    assert [e["index"] for e in evidence["epochs"]] == pytest.approx([index[e] for e in (1, 2, 3)])
    assert evidence["candidates"][0] == 2 and want in evidence["candidates"]
    assert json.loads((run_dir / "meta.json").read_text())["published_epoch"] == want


def test_the_published_records_are_the_published_rows_of_the_tables(published_run):
    _, tables, _ = published_run
    classwise = pd.read_csv(tables["classwise"])
    assert set(classwise["checkpoint"]) == {"published"}
    assert set(classwise["eval"]) == {"clean@published"}


def test_a_resumed_run_chooses_as_an_uninterrupted_one(published_run, tmp_path, synthetic_splits):
    """The choice is recomputed from the records a resumed run reads back: stopped after the first
    eligible epoch and continued, the run keeps the same epoch, with the same evidence."""
    from study.train.engine import train_run

    run_dir, _, cfg = published_run
    resumed = tmp_path / "run"
    assert not train_run(cfg, synthetic_splits, resumed, device="cpu", progress=False, stop_after=2).finished
    assert json.loads((resumed / "published.json").read_text())["chosen_epoch"] == 2  # the only eligible one yet
    train_run(cfg, synthetic_splits, resumed, device="cpu", progress=False)
    assert (json.loads((resumed / "published.json").read_text())
            == json.loads((run_dir / "published.json").read_text()))
    assert load_torch(resumed / "model_published.pt")["epoch"] == load_torch(run_dir / "model_published.pt")["epoch"]
