"""Pretrained ImageNet models: torchvision's plain state dict loads into our ResNet-50,
RobustBench's file loads through robustbench itself (from the weights folder, never
downloaded), and `study evaluate-pretrained` writes the records of `study evaluate`."""

import json

import numpy as np
import pytest
import torch
from conftest import run_study

from study.data.prepared import save_prepared
from study.data.splits import Splits
from study.evaluate.pretrained import evaluate_pretrained
from study.evaluate.records import read_records
from study.models.imagenet_resnet import ImageNetResNet50
from study.models.pretrained import (
    PRETRAINED,
    WEIGHTS_ENV,
    WeightsUnavailableError,
    load_pretrained,
)
from study.tables import build_tables

CLEAN = {"name": "clean", "type": "clean", "batch_size": 8, "seed": 0}
PGD = {"name": "pgd_linf4", "type": "pgd", "norm": "linf", "eps": 4 / 255, "alpha": 2 / 255,
       "steps": 2, "restarts": 1, "batch_size": 8, "seed": 0}


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """One random ResNet-50, saved in both layouts; returns (folder, reference state)."""
    folder = tmp_path_factory.mktemp("weights")
    torch.manual_seed(0)
    model = ImageNetResNet50()
    # BN statistics of a trained net, roughly, so the random net's logits stay finite and varied.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_var.fill_(4.0)
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("normalize.")}
    # Saved as torchvision's older files are: without BatchNorm's num_batches_tracked.
    plain = {k: v for k, v in state.items() if not k.endswith("num_batches_tracked")}
    torch.save(plain, folder / PRETRAINED["resnet50_torchvision"].file)
    robust = folder / PRETRAINED["Salman2020Do_R50"].file
    robust.parent.mkdir(parents=True)
    # RobustBench's file, as its folder holds it: robustbench parses the layout itself.
    torch.save({"state_dict": {f"module.{k}": v for k, v in state.items()}}, robust)
    return folder, state


@pytest.fixture(scope="module")
def imagenet_like(tmp_path_factory):
    """A prepared 'ImageNet' of 3 classes x 2 images at 32 px (the net pools down to 1 px)."""
    g = torch.Generator().manual_seed(1)
    splits = Splits(
        train_x=torch.zeros((0, 3, 32, 32), dtype=torch.uint8),
        train_y=torch.zeros(0, dtype=torch.int64),
        test_x=torch.randint(0, 256, (6, 3, 32, 32), dtype=torch.uint8, generator=g),
        test_y=torch.tensor([0, 0, 1, 1, 2, 2]),
        # The 1000 ImageNet classes; the samples come from the first three.
        class_names=["tench", "goldfish", "great white shark"] + [f"class{k}" for k in range(3, 1000)],
        meta={"dataset": "imagenet", "variant": "val"},
    )
    path = tmp_path_factory.mktemp("data") / "imagenet-val.pt"
    save_prepared(splits, path)
    return path, splits


def test_both_layouts_load_the_same_network(weights):
    folder, state = weights
    tv = load_pretrained("resnet50_torchvision", folder)
    rb = load_pretrained("Salman2020Do_R50", folder)  # robustbench's own ResNet-50, normalizer inside
    for key, value in state.items():
        assert torch.equal(tv.state_dict()[key], value), key
    loaded = rb.network.model.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in state.items() if not k.endswith("num_batches_tracked"))
    x = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(tv(x), rb(x))


def test_missing_weights_name_the_expected_file(tmp_path, monkeypatch):
    with pytest.raises(WeightsUnavailableError, match="imagenet/Linf/Salman2020Do_R50.pt"):
        load_pretrained("Salman2020Do_R50", tmp_path)
    monkeypatch.delenv(WEIGHTS_ENV, raising=False)
    with pytest.raises(WeightsUnavailableError, match="pretrained.weights_dir"):
        load_pretrained("resnet50_torchvision")
    with pytest.raises(ValueError, match="valid names: resnet50_torchvision, Salman2020Do_R50"):
        load_pretrained("Wong2020Fast")


def test_wrong_architecture_is_rejected(tmp_path):
    path = tmp_path / PRETRAINED["resnet50_torchvision"].file
    torch.save({"conv1.weight": torch.zeros(64, 3, 7, 7), "head.weight": torch.zeros(2)}, path)
    with pytest.raises(ValueError, match="missing keys .* unexpected .*head.weight"):
        load_pretrained("resnet50_torchvision", tmp_path)


def test_evaluate_pretrained_writes_study_records(weights, imagenet_like, tmp_path):
    folder, _ = weights
    data, splits = imagenet_like
    out = tmp_path / "records"
    evaluate_pretrained("resnet50_torchvision", splits, CLEAN, out / "tv-clean.parquet",
                        weights_dir=folder, device="cpu", progress=False)
    # The CLI, as the workflow calls it, for the attack (RobustBench's ImageNet threat model).
    run_study("evaluate-pretrained", "--model", "Salman2020Do_R50", "--weights-dir", str(folder),
              "--data", str(data), "--evaluation", json.dumps(PGD), "--out", str(out / "rb-pgd.parquet"),
              "--device", "cpu", "--no-progress")
    tv, tv_meta = read_records(out / "tv-clean.parquet")
    pgd, pgd_meta = read_records(out / "rb-pgd.parquet")
    assert list(tv.columns[:3]) == ["index", "label", "pred"] and tv.shape == (6, 3 + 1000)
    assert tv["index"].tolist() == list(range(6)) and tv["label"].tolist() == splits.test_y.tolist()
    assert pgd_meta["run_id"] == "pretrained-Salman2020Do_R50"
    assert pgd_meta["run_config"]["pretrained"]["sha256"] != tv_meta["run_config"]["pretrained"]["sha256"]
    assert tv_meta["run_config"]["pretrained"]["layout"] == "torchvision"
    assert pgd_meta["evaluation"]["eps"] == pytest.approx(4 / 255)
    assert pgd_meta["class_names"] == splits.class_names
    # Both files hold the same network (test above), so the clean torchvision records are
    # the robust model's clean records too. The attack lowers every true-class margin.
    def margin(frame):
        logits = frame.filter(like="logit_").to_numpy().copy()
        true = logits[np.arange(len(frame)), frame["label"].to_numpy()]
        np.put_along_axis(logits, frame["label"].to_numpy()[:, None], -np.inf, 1)
        return true - logits.max(1)
    assert (margin(pgd) < margin(tv) + 1e-4).all()
    assert (margin(pgd) < margin(tv)).any()
    # The study's tables take these records like any run's.
    tables = build_tables(sorted(out.glob("*.parquet")), [], tmp_path / "tables")
    classwise = __import__("pandas").read_csv(tables["classwise"])
    assert set(classwise["method"]) == {"resnet50_torchvision", "Salman2020Do_R50"}
    evaluated = classwise[classwise["n"] > 0]
    assert set(evaluated["class_name"]) == {"tench", "goldfish", "great white shark"}


def test_evaluate_pretrained_refuses_other_datasets(weights, synthetic_splits, tmp_path):
    with pytest.raises(ValueError, match="classifies ImageNet; the data given is synthetic"):
        evaluate_pretrained("resnet50_torchvision", synthetic_splits, CLEAN, tmp_path / "x.parquet",
                            weights_dir=weights[0], device="cpu", progress=False)
