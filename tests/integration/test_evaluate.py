import json
import shutil

import numpy as np
import pandas as pd
import pytest

from study.config import resolve_evaluation
from study.config.spec import ConfigSpec, EvaluationSpec
from study.evaluate.checkpoint_eval import evaluate_checkpoint
from study.evaluate.records import read_records
from study.tables.classwise import build_tables
from study.train.engine import train_run


@pytest.fixture(scope="module")
def trained_runs(tmp_path_factory, synthetic_splits, ci_params):
    """Two seeds of a standard small CNN on synthetic data, with clean and PGD records."""
    from study.config import plan_runs

    base = next(r for r in plan_runs(ci_params) if r.config["method"] == "standard").config
    root = tmp_path_factory.mktemp("runs")
    records, epochs = [], []
    for seed in (0, 1):
        cfg = {**base, "seed": seed, "epochs": 3}
        run = root / "runs" / f"std-s{seed}"
        train_run(cfg, synthetic_splits, run, device="cpu", progress=False)
        for name in ("clean", "pgd3"):
            out = root / "evaluations" / run.name / f"{name}.parquet"
            job = EvaluationSpec.parse(resolve_evaluation(ci_params, name))
            evaluate_checkpoint(run, synthetic_splits, [(job, out)],
                                device="cpu",
                                progress=False)
            records.append(out)
        epochs.append(run / "epochs.csv")
    return root, records, epochs


def test_records_are_per_sample_and_self_describing(trained_runs, synthetic_splits):
    _, records, _ = trained_runs
    frame, meta = read_records(records[0])
    n_test = len(synthetic_splits.test_y)
    assert len(frame) == n_test
    assert frame["index"].tolist() == sorted(frame["index"].tolist())
    true_labels = synthetic_splits.test_y[frame["index"].to_numpy().copy()].numpy()
    np.testing.assert_array_equal(frame["label"].to_numpy(), true_labels)
    assert {f"logit_{k}" for k in range(10)} <= set(frame.columns)
    # the prediction is the arg-max of the stored logits
    logits = frame[[f"logit_{k}" for k in range(10)]].to_numpy()
    np.testing.assert_array_equal(logits.argmax(1), frame["pred"].to_numpy())
    assert meta["evaluation"]["name"] == "clean" and meta["data_variant"] == "default"
    assert meta["run_config"]["seed"] == 0 and len(meta["class_names"]) == 10


def test_attack_records_never_beat_clean_per_sample_on_average(trained_runs):
    _, records, _ = trained_runs
    clean, _ = read_records(records[0])
    attacked, meta = read_records(records[1])
    assert meta["evaluation"]["steps"] == 3
    assert (attacked["pred"] == attacked["label"]).mean() < (clean["pred"] == clean["label"]).mean()


def test_evaluation_is_reproducible(tmp_path, trained_runs, synthetic_splits, ci_params):
    root, records, _ = trained_runs
    again = tmp_path / "again.parquet"
    evaluate_checkpoint(root / "runs" / "std-s0", synthetic_splits,
                        [(EvaluationSpec.parse(resolve_evaluation(ci_params, "pgd3")), again)],
                 device="cpu", progress=False)
    pd.testing.assert_frame_equal(read_records(again)[0], read_records(records[1])[0])


def test_test_subset_is_stratified(tmp_path, trained_runs, synthetic_splits, ci_params):
    root, _, _ = trained_runs
    ev = {**resolve_evaluation(ci_params, "clean"), "test_per_class": 4}
    out = tmp_path / "sub.parquet"
    evaluate_checkpoint(root / "runs" / "std-s1", synthetic_splits, [(EvaluationSpec.parse(ev), out)],
                        device="cpu", progress=False)
    frame, _ = read_records(out)
    assert frame["label"].value_counts().to_dict() == {c: 4 for c in range(10)}


def test_tables_from_records(tmp_path, trained_runs):
    _, records, epochs = trained_runs
    paths = build_tables(records, epochs, tmp_path / "tables", tmp_path / "metrics")
    classwise = pd.read_csv(paths["classwise"])
    assert len(classwise) == 2 * 2 * 10  # seeds x evaluations x classes
    expected_columns = {"run_id", "dataset", "model", "method", "seed", "eval", "class_name", "acc", "ci_lo", "ci_hi"}
    assert expected_columns <= set(classwise)
    # the class accuracy equals the share of correct per-sample predictions
    frame, _ = read_records(records[0])
    expected = (frame["pred"] == frame["label"]).groupby(frame["label"]).mean()
    got = classwise[(classwise["seed"] == 0) & (classwise["eval"] == "clean")].set_index("class")["acc"]
    np.testing.assert_allclose(got.sort_index().to_numpy(), expected.sort_index().to_numpy())
    assert (classwise["ci_lo"] <= classwise["acc"]).all() and (classwise["acc"] <= classwise["ci_hi"]).all()

    epochs_table = pd.read_csv(paths["epochs"])
    assert len(epochs_table) == 2 * 3 * 10 and set(epochs_table["seed"]) == {0, 1}

    # one file per model, its evaluations inside: the rows and columns of `dvc metrics show`
    # (and the study's headline in two numbers: null, the records hold no PGD-AT run)
    assert sorted(p.name for p in (tmp_path / "metrics").iterdir()) == ["headline.json",
                                                                        "synthetic__small_cnn__standard.json"]
    assert json.loads((tmp_path / "metrics/headline.json").read_text()) == {"robust": None, "worst": None}
    metrics = json.loads((tmp_path / "metrics/synthetic__small_cnn__standard.json").read_text())
    assert set(metrics) == set(classwise["eval"])
    entry = metrics["clean"]
    assert set(entry) == {"mean", "worst", "worst_class"} and 0 <= entry["worst"] <= entry["mean"] <= 1
    # the worst class is the class the seeds' summary rows name worst (one they name most often)
    summary = pd.read_csv(paths["summary"]).query("eval == 'clean'")
    assert entry["worst_class"] in summary["worst_class"].mode().tolist()
    assert len(summary) == 2 and entry["worst"] == round(summary["worst"].mean(), 4)  # over both seeds
    # a model no longer in the records leaves no file behind to be shown as this study's
    stale = tmp_path / "metrics/synthetic__small_cnn__gone.json"
    stale.write_text("{}")
    build_tables(records[:1], epochs, tmp_path / "tables", tmp_path / "metrics")
    assert not stale.exists() and (tmp_path / "metrics/synthetic__small_cnn__standard.json").exists()


def test_tables_without_records_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no evaluation records"):
        build_tables([], [], tmp_path)


def test_one_evaluate_call_writes_several_evaluations(tmp_path, trained_runs, synthetic_file, ci_params, capsys):
    """The workflow's evaluate job: all evaluations of a run in one process, each record as
    its own call makes it; an --out missing for an --evaluation is named."""
    from study.cli import main

    root, records, _ = trained_runs
    own = tmp_path / ConfigSpec.parse(json.loads((root / "runs/std-s0/config.json").read_text())).run_id
    shutil.copytree(root / "runs/std-s0", own)  # the command evaluates a folder named by its run id only
    args = ["evaluate", "--data", str(synthetic_file), "--run-dir", str(own), "--no-progress"]
    pairs = []
    for name in ("clean", "pgd3"):
        evaluation = json.dumps(resolve_evaluation(ci_params, name))
        pairs += ["--evaluation", evaluation, "--out", str(tmp_path / f"{name}.parquet")]
    assert main([*args, *pairs]) == 0
    for name, made in zip(("clean", "pgd3"), records[:2], strict=True):
        pd.testing.assert_frame_equal(read_records(tmp_path / f"{name}.parquet")[0], read_records(made)[0])
    assert main([*args, *pairs[:-2]]) == 2  # the second --evaluation without its --out
    assert "2 --evaluation but 1 --out" in capsys.readouterr().err
