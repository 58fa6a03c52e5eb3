"""`check_run` on a run's last and best checkpoints, and the robustness tables marking what the checks doubt."""

import json

import pandas as pd
import pytest
import torch
from torch import nn

from study.config.spec import ConfigSpec, EvaluationSpec
from study.evaluate.checkpoint_checks import check_run
from study.evaluate.checkpoint_eval import evaluate_model
from study.evaluate.checks import Check, Thresholds, resolve_scopes, summarize
from study.models.registry import build_model
from study.tables.classwise import build_tables
from study.tables.robustness import robustness_tables

RUN_CONFIG = {"dataset": "synthetic", "data_variant": "default", "model": "lenet", "method": "standard", "seed": 0,
              "method_config": {"adversary": None}, "optimizer": {"name": "sgd", "lr": 0.1, "weight_decay": 5e-4},
              "schedule": {"name": "constant"}, "epochs": 2, "batch_size": 64, "epoch_eval": {"per_class": 5}}
CLEAN = {"name": "clean", "type": "clean", "test_per_class": 3}
PGD3 = {"name": "pgd3", "type": "pgd", "norm": "linf", "eps": 8 / 255, "alpha": 3 / 255, "steps": 3, "restarts": 1,
        "test_per_class": 3}
CHEAP = Thresholds(strong_steps=4, strong_restarts=1, large_eps_steps=4)


pytestmark = pytest.mark.usefixtures("one_thread")


ARCH = {"name": "lenet", "num_classes": 10, "in_channels": 3, "image_size": 32, "mean": [0.5] * 3, "std": [0.25] * 3}


def _lenet() -> nn.Module:
    torch.manual_seed(0)
    return build_model("lenet", 10, mean=ARCH["mean"], std=ARCH["std"]).eval()


@pytest.fixture()
def run(tmp_path, synthetic_splits):
    """A run directory whose best checkpoint answers class k + 1 where the last answers class k."""
    run_dir = tmp_path / "run-a"
    run_dir.mkdir()
    last, best = _lenet(), _lenet()
    head = [m for m in best.modules() if isinstance(m, nn.Linear)][-1]
    with torch.no_grad():
        head.weight.copy_(head.weight.roll(1, 0))
        head.bias.copy_(head.bias.roll(1, 0))
    for file, model in (("model.pt", last), ("model_best.pt", best)):
        torch.save({"arch": ARCH, "state_dict": model.state_dict()}, run_dir / file)
    return run_dir, last, best


def _evaluate(model, splits, evaluation, path, checkpoint="last", run_id="run-a"):
    job = EvaluationSpec.parse({**evaluation, "checkpoint": checkpoint})
    evaluate_model(model, splits, job, path, run_id=run_id,
                   run_config=ConfigSpec.parse(RUN_CONFIG), device=torch.device("cpu"), progress=False)
    return path


def _check(run_dir, splits, records, checkpoint):
    out = run_dir / f"checks-{checkpoint}.json"
    return check_run(run_dir, splits, records, EvaluationSpec.parse(PGD3), out, out.with_suffix(".csv"), per_class=2,
                     eps_factors=[1.0], checkpoint=checkpoint, thresholds=CHEAP), out


def test_each_checkpoint_is_checked_against_its_own_records(run, synthetic_splits):
    run_dir, last, best = run
    records = [_evaluate(last, synthetic_splits, CLEAN, run_dir / "clean.parquet"),
               _evaluate(last, synthetic_splits, PGD3, run_dir / "pgd3.parquet"),
               _evaluate(best, synthetic_splits, {**CLEAN, "name": "clean@best"}, run_dir / "clean@best.parquet",
                         "best")]
    for checkpoint, own in (("last", ["clean", "pgd3"]), ("best", ["clean@best"])):
        result, out = _check(run_dir, synthetic_splits, records, checkpoint)
        assert result["checkpoint"] == checkpoint and result["evaluations"] == own
        by = {c["name"]: c for c in result["checks"]}
        assert by["records_reproduce"]["status"] == "pass", by["records_reproduce"]
        assert by["records_reproduce"]["values"]["records"][own[0]]["n"] == 20  # 2 per class of 3 recorded
        table = pd.read_csv(out.with_suffix(".csv"))
        assert set(table["checkpoint"]) == {checkpoint} and len(table) == len(result["checks"])
    # Records labelled @best but written by the last model: the best checkpoint does not reproduce them.
    wrong = _evaluate(last, synthetic_splits, {**CLEAN, "name": "clean@best"}, run_dir / "wrong" / "clean@best.parquet",
                      "best")
    result, _ = _check(run_dir, synthetic_splits, [records[0], wrong], "best")
    by = {c["name"]: c for c in result["checks"]}
    assert result["status"] == "fail" and by["records_reproduce"]["status"] == "fail"
    assert by["records_reproduce"]["evaluations"] == ["clean@best"]
    assert by["records_reproduce"]["values"]["records"]["clean@best"]["pred_differs"] == 20


def test_bad_checkpoints_and_foreign_records_are_refused(run, synthetic_splits, tmp_path):
    run_dir, last, _ = run
    with pytest.raises(ValueError, match="'final'; valid: last, best"):
        _check(run_dir, synthetic_splits, [], "final")
    foreign = _evaluate(last, synthetic_splits, CLEAN, tmp_path / "run-b" / "clean.parquet", run_id="run-b")
    with pytest.raises(ValueError, match="belongs to run run-b, not run-a"):
        _check(run_dir, synthetic_splits, [foreign], "last")
    mislabelled = _evaluate(last, synthetic_splits, {**CLEAN, "name": "clean@best"}, run_dir / "x.parquet", "last")
    with pytest.raises(ValueError, match="records checkpoint 'last' but its name says 'best'"):
        _check(run_dir, synthetic_splits, [mislabelled], "last")


def test_tables_mark_what_the_checks_doubt(run, synthetic_splits, tmp_path):
    run_dir, last, best = run
    records = [_evaluate(last, synthetic_splits, CLEAN, run_dir / "clean.parquet"),
               _evaluate(last, synthetic_splits, PGD3, run_dir / "pgd3.parquet"),
               _evaluate(last, synthetic_splits, {**CLEAN, "name": "clean@best"}, run_dir / "clean@best.parquet",
                         "best"),
               _evaluate(best, synthetic_splits, {**PGD3, "name": "pgd3@best"}, run_dir / "pgd3@best.parquet", "best")]
    # The last checkpoint: a masking flag on its gradient-based evaluation, which PGD is.
    flag = [Check("large_eps_breaks", "flag", "masking", scope="gradient"), Check("batch_independent", "pass", "")]
    resolve_scopes(flag, {"clean": CLEAN, "pgd3": PGD3}, PGD3)
    last_json = tmp_path / "last.json"
    last_json.write_text(json.dumps({"run_id": "run-a", "checkpoint": "last", "evaluations": ["clean", "pgd3"],
                                     **summarize(flag)}))
    # The best checkpoint, checked for real on its clean records alone (written by the wrong model).
    _, best_json = _check(run_dir, synthetic_splits, [records[2]], "best")
    paths = robustness_tables(records, [last_json, best_json], tmp_path / "tables")
    attacks = pd.read_csv(paths["attacks"]).set_index("eval")
    assert attacks["check_status"].to_dict() == {"clean": "pass", "pgd3": "flag", "clean@best": "fail",
                                                 "pgd3@best": "unchecked"}
    assert attacks.loc["pgd3", "checks_not_passed"] == "large_eps_breaks (flag)"
    assert "records_reproduce (fail)" in attacks.loc["clean@best", "checks_not_passed"]
    # The measured number stays, marked.
    assert attacks["acc"].notna().all()
    assert attacks.loc["clean", "trusted_acc"] == attacks.loc["clean", "acc"]
    # one rule (study.metrics.trust): flagged and failed evaluations are not counted; an unchecked one is
    assert attacks.loc[["pgd3", "clean@best"], "trusted_acc"].isna().all()
    assert attacks.loc[["pgd3", "clean@best"], "trusted_worst_acc"].isna().all()
    assert attacks.loc["pgd3@best", "trusted_acc"] == attacks.loc["pgd3@best", "acc"]
    frl = pd.read_csv(paths["frl"])
    assert set(frl.groupby("eval")["check_status"].unique().map(tuple)) == {("flag",), ("unchecked",)}
    checks = pd.read_csv(paths["checks"])
    assert set(checks["checkpoint"]) == {"last", "best"}

    # The same rule in the study's tables: marked in classwise and summary, not counted over seeds or in metrics.
    tables = build_tables(records, [], tmp_path / "study-tables", tmp_path / "metrics",
                          checks=[last_json, best_json])
    classwise = pd.read_csv(tables["classwise"])
    assert classwise.groupby("eval")["check_status"].first().to_dict() == attacks["check_status"].to_dict()
    assert classwise["acc"].notna().any() and classwise.loc[classwise["eval"] == "pgd3", "acc"].notna().all()
    summary = pd.read_csv(tables["summary"]).set_index("eval")
    assert summary.loc["pgd3", "checks_not_passed"] == "large_eps_breaks (flag)"
    seeds = pd.read_csv(tables["classwise_seeds"])
    left_out = seeds[seeds["eval"].isin(["pgd3", "clean@best"])]
    assert left_out["acc"].isna().all() and (left_out["flagged_seeds"] == 1).all()
    kept = seeds[seeds["eval"].isin(["clean", "pgd3@best"])]
    assert kept["acc"].notna().any() and (kept["flagged_seeds"] == 0).all()
    (metrics_file,) = [p for p in (tmp_path / "metrics").glob("*.json") if p.name != "headline.json"]
    metrics = json.loads(metrics_file.read_text())
    flagged = {name: m for name, m in metrics.items() if "flagged" in m}
    assert sorted(flagged) == ["clean@best", "pgd3"]
    assert all(m["mean"] is None and m["worst_class"] is None and m["flagged"] == 1 for m in flagged.values())
    assert checks.set_index(["checkpoint", "check"]).loc[("last", "large_eps_breaks"), "evaluations"] == "pgd3"


def test_checks_json_of_an_older_check_is_refused(run, synthetic_splits, tmp_path):
    run_dir, last, _ = run
    record = _evaluate(last, synthetic_splits, CLEAN, run_dir / "clean.parquet")
    old = tmp_path / "checks.json"
    old.write_text(json.dumps({"run_id": "run-a", "status": "pass",
                               "checks": [{"name": "eval_mode", "status": "pass", "detail": ""}]}))
    with pytest.raises(ValueError, match="older `study check`"):
        robustness_tables([record], [old], tmp_path / "tables")


def test_a_class_with_fewer_test_images_than_asked_is_checked_on_all_of_them(run, synthetic_splits):
    """TinyImageNet has 50 labelled test images per class where the paper preset checks 100: the
    check takes every image of the class rather than failing the job."""
    run_dir, last, _ = run
    records = [_evaluate(last, synthetic_splits, CLEAN, run_dir / "clean.json")]
    fewest = int(torch.bincount(synthetic_splits.test_y.long()).min())
    out = run_dir / "checks-many.json"
    result = check_run(run_dir, synthetic_splits, records, EvaluationSpec.parse(PGD3), out, out.with_suffix(".csv"),
                       per_class=fewest + 100, eps_factors=[1.0], checkpoint="last", thresholds=CHEAP)
    assert result["per_class"] == fewest and json.loads(out.read_text())["per_class"] == fewest
