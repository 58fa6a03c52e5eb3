"""AutoAttack and Square records, shards, CIFAR-10-C regeneration and robustness tables on
a small CNN trained on synthetic data (real pyautoattack, real checkpoints)."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from study.config import resolve_evaluation
from study.config.spec import EvaluationSpec
from study.data.corruptions import CORRUPTIONS, corrupt
from study.evaluate.checkpoint_eval import evaluate_checkpoint
from study.evaluate.corruptions import evaluate_corruptions
from study.evaluate.records import read_records
from study.evaluate.shards import merge_shards
from study.figures.catalog import make_figure
from study.tables.robustness import corruption_table, robustness_tables


@pytest.fixture(scope="module")
def records(standard_run, synthetic_splits, ci_params, tmp_path_factory):
    out = tmp_path_factory.mktemp("evaluations")
    paths = {}
    for name in ("clean", "pgd3", "autoattack", "square"):
        ev = resolve_evaluation(ci_params, name)
        paths[name] = out / f"{name}.parquet"
        evaluate_checkpoint(standard_run, synthetic_splits, [(EvaluationSpec.parse(ev), paths[name])],
                            device="cpu", progress=False)
    return paths


def test_autoattack_and_square_records_name_the_breaking_attack(records, ci_params):
    aa, meta = read_records(records["autoattack"])
    assert meta["evaluation"]["attacks"] == ["apgd-ce", "apgd-t"]
    assert set(aa["broken_by"]) <= {"clean", "apgd-ce", "apgd-t", ""}
    # Robust exactly when no attack broke the sample; 'clean' exactly when clean-misclassified.
    assert ((aa["broken_by"] == "") == (aa["pred"] == aa["label"])).all()
    clean = read_records(records["clean"])[0].set_index("index").loc[aa["index"]]
    assert ((aa["broken_by"] == "clean").to_numpy() == (clean["pred"] != clean["label"]).to_numpy()).all()
    sq = read_records(records["square"])[0]
    assert set(sq["broken_by"]) <= {"clean", "square", ""}
    assert len(aa) == len(sq) == 4 * 10


def test_autoattack_is_reproducible_with_its_seed(standard_run, synthetic_splits, ci_params, tmp_path):
    ev = {**resolve_evaluation(ci_params, "autoattack"), "test_per_class": 1}
    for name in ("a", "b"):
        evaluate_checkpoint(standard_run, synthetic_splits, [(EvaluationSpec.parse(ev), tmp_path / f"{name}.parquet")],
                            device="cpu",
                            progress=False)
    a, b = read_records(tmp_path / "a.parquet")[0], read_records(tmp_path / "b.parquet")[0]
    assert a["pred"].tolist() == b["pred"].tolist() and a["broken_by"].tolist() == b["broken_by"].tolist()


def test_shards_merge_into_one_record(standard_run, synthetic_splits, ci_params, tmp_path):
    ev = resolve_evaluation(ci_params, "pgd3")
    parts = []
    for i in range(3):
        parts.append(tmp_path / f"{i}-of-3.parquet")
        evaluate_checkpoint(standard_run, synthetic_splits, [(EvaluationSpec.parse(ev), parts[-1])],
                            device="cpu", progress=False,
                            shard=(i, 3))
    merged, meta = read_records(merge_shards(parts, tmp_path / "pgd3.parquet"))
    assert meta["shards"] == 3 and meta["n"] == len(merged) == len(synthetic_splits.test_y)
    assert merged["index"].tolist() == sorted(merged["index"]) and not merged["index"].duplicated().any()
    with pytest.raises(ValueError, match="expected shards"):
        merge_shards(parts[:2], tmp_path / "x.parquet")
    with pytest.raises(ValueError, match="shard index"):
        evaluate_checkpoint(standard_run, synthetic_splits, [(EvaluationSpec.parse(ev), tmp_path / "y.parquet")],
                            device="cpu",
                            progress=False, shard=(3, 3))


def test_corruptions_are_deterministic_and_grow_with_severity(synthetic_splits):
    x = synthetic_splits.test_x[:20]
    for name in CORRUPTIONS:
        a, b = corrupt(x, name, 1, seed=3), corrupt(x, name, 1, seed=3)
        assert a.dtype == torch.uint8 and a.shape == x.shape and torch.equal(a, b), name
        d1 = (corrupt(x, name, 1).float() - x.float()).abs().mean()
        d5 = (corrupt(x, name, 5).float() - x.float()).abs().mean()
        # elastic_transform's severity 1 is its largest affine jitter (tests/integration/test_corruptions.py)
        assert (d1 > d5 > 0) if name == "elastic_transform" else (d5 > d1 > 0), name
    with pytest.raises(ValueError, match="glass_blur"):
        corrupt(x, "hail", 1)
    with pytest.raises(ValueError, match="severity"):
        corrupt(x, "contrast", 6)


def test_contrast_matches_its_definition():
    x = torch.tensor([[[[0, 255]], [[100, 100]], [[50, 150]]]], dtype=torch.uint8)  # 1 image, 1x2 pixels
    y = corrupt(x, "contrast", 2)  # factor 0.5 around each channel's mean
    assert y[0, :, 0, :].tolist() == [[63, 191], [100, 100], [75, 125]]


def test_corruption_records_tables_and_figures(standard_run, synthetic_splits, records, tmp_path):
    out = tmp_path / "corruptions.parquet"
    evaluate_corruptions(standard_run, synthetic_splits, ["contrast", "gaussian_noise"], [1, 5], out, per_class=3)
    frame, meta = read_records(out)
    assert meta["corruption_variant"] == "regenerated" and len(frame) == 2 * 2 * 30
    # resumable: the parts are reused
    assert len(list((tmp_path / "corruptions.parts").glob("*.parquet"))) == 4
    table = corruption_table([out])
    assert set(table["corruption"]) == {"contrast", "gaussian_noise"} and (table["n"] == 3).all()
    assert (table["corruption_variant"] == "regenerated").all()
    cc = tmp_path / "tables" / "corruptions.csv"
    cc.parent.mkdir()
    table.to_csv(cc, index=False)
    paths = robustness_tables(list(records.values()), [], tmp_path / "tables")
    attacks = pd.read_csv(paths["attacks"]).set_index("eval")
    assert set(attacks.index) == {"clean", "pgd3", "autoattack", "square"}
    assert (attacks["worst_acc"] <= attacks["acc"]).all() and (attacks["ci_lo"] <= attacks["acc"]).all()
    assert (attacks.loc["pgd3", "robust_error_worst"] >= attacks.loc["pgd3", "robust_error_avg"])
    cfp = pd.read_csv(paths["cfp"])
    sums = cfp.groupby("eval")["cfp"].sum()
    assert np.allclose(sums[cfp.groupby("eval")["misclassified"].first() > 0], 1.0)
    frl = pd.read_csv(paths["frl"])
    assert set(frl["eval"]) == {"pgd3", "autoattack", "square"}
    assert np.allclose(frl["standard_error"] + frl["boundary_error"], frl["robust_error"])
    cfg = json.loads((standard_run / "config.json").read_text())
    for kind, path in (("corruptions", cc), ("cfp", paths["cfp"]), ("frl_errors", paths["frl"])):
        written = make_figure(kind, path, tmp_path / "fig" / kind, dataset=cfg["dataset"], model=cfg["model"],
                              method="all" if kind == "frl_errors" else cfg["method"])
        assert all(p.stat().st_size > 1000 for p in written)


def test_autoattack_records_give_exactly_the_librarys_robust_accuracy(standard_run, synthetic_splits, ci_params):
    """Our cascade, one attack at a time over the whole set, keeps pyautoattack's attack
    objects and chunks: per sample, robust exactly where the library's one-call cascade says."""
    from study.attacks.autoattack import attack_list, autoattack_batch, build_autoattack
    from study.config.spec import EvaluationSpec
    from study.data.augment import to_float
    from study.run_directory import load_trained_model

    model, _ = load_trained_model(standard_run)
    ev = EvaluationSpec.parse({**resolve_evaluation(ci_params, "autoattack"), "seed": 3, "batch_size": 7}).config
    x = to_float(synthetic_splits.test_x[:30])
    y = synthetic_splits.test_y[:30]
    _, broken_by = autoattack_batch(model, x, y, ev, attack_list(ev))
    ours = broken_by == ""

    aa = build_autoattack(model, ev, len(synthetic_splits.class_names), x.device)
    aa.attacks_to_run = attack_list(ev)
    _, pred = aa.run_standard_evaluation(x, y, batch_size=ev.batch_size)
    library = (pred == y).numpy()
    assert ours.tolist() == library.tolist()
    # the model and the batch in channels_last, as training and predict hold them: the same answer
    # (the library reshapes with view(), which a channels_last batch would refuse)
    _, broken_cl = autoattack_batch(model.to(memory_format=torch.channels_last),
                                    x.contiguous(memory_format=torch.channels_last), y, ev, attack_list(ev))
    assert (broken_cl == "").tolist() == library.tolist()
