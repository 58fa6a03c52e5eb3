"""The model zoo: a real RobustBench architecture with seeded random weights, saved in
robustbench's folder layout, loads through robustbench.utils.load_model; torchvision's
ResNet-50 with random weights, saved as torchvision saves its state dicts, loads as a zoo
entry of source torchvision and is evaluated class-wise on a tiny ImageNet-shaped set like
any run; a missing file is one line naming its place; the zoo figures and the table beside
RobustBench's numbers draw from hand-built records."""


import numpy as np
import pandas as pd
import pytest
import torch
from helpers.params import changed
from helpers.zoo import ENTRY, place_random_weights

from study.config import ConfigError
from study.config.spec import ConfigSpec, EvaluationSpec
from study.config.types import ZooEntry as ZooConfigEntry
from study.config.zoo import plan_zoo, zoo_run_config
from study.data.prepared import save_prepared
from study.data.splits import Splits
from study.evaluate.checkpoint_eval import evaluate_checkpoint
from study.evaluate.records import read_records
from study.figures.fig15_17_zoo import draw_zoo_classwise, draw_zoo_gap, draw_zoo_ranks
from study.models.weights import WEIGHTS_ENV, WeightsUnavailableError
from study.models.zoo import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    ZooEntry,
    import_torchvision,
    load_zoo_model,
    reported_accuracy,
)
from study.run_directory import write_zoo_run
from study.tables.classwise import build_tables, zoo_table


def test_zoo_model_loads_through_robustbench_from_the_folder(tmp_path):
    net, _ = place_random_weights(tmp_path)
    model = load_zoo_model(ENTRY, tmp_path)
    x = torch.rand(2, 3, 32, 32)  # the project's contract: [0, 1] images in, normalization inside
    with torch.no_grad():
        torch.testing.assert_close(model(x), net(x))
    assert not model.training


def test_missing_weights_are_one_line_naming_the_file(tmp_path):
    with pytest.raises(WeightsUnavailableError) as err:
        load_zoo_model(ENTRY, tmp_path)
    message = str(err.value)
    assert "\n" not in message and str(tmp_path / "cifar10/Linf/Wong2020Fast.pt") in message
    assert "<model_dir>/<dataset>/<threat_model>/<name>.pt" in message and "Google Drive" in message
    with pytest.raises(ValueError, match="not in robustbench's model zoo"):
        load_zoo_model(ZooEntry("cifar10", "Linf", "NoSuchModel2099"), tmp_path)


def _classwise(models, classes=("cat", "dog", "ship")):
    rng = np.random.default_rng(0)
    rows = []
    for m, model in enumerate(models):
        for c, name in enumerate(classes):
            for ev in ("clean", "autoattack"):
                drop = 0.3 if ev != "clean" else 0
                acc = float(np.clip(0.3 + 0.2 * c + 0.05 * m - drop + rng.normal(0, .02), 0, 1))
                rows.append({"run_id": f"zoo-cifar10-Linf-{model}", "dataset": "cifar10", "model": model,
                             "method": "robustbench", "eval": ev, "class": c, "class_name": name, "n": 1000,
                             "correct": round(acc * 1000), "acc": round(acc * 1000) / 1000,
                             "ci_lo": acc - .03, "ci_hi": acc + .03})
    return pd.DataFrame(rows)


def test_zoo_figures_and_table_from_hand_built_records(tmp_path):
    table = tmp_path / "classwise.csv"
    _classwise(["Standard", "Carmon2019Unlabeled", "Rice2020Overfitting"]).to_csv(table, index=False)
    ours = _classwise(["preact_resnet18"]).assign(method="pgd_at", train_data="original")
    ours["eval"] = ours["eval"].replace({"autoattack": "pgd20"})
    ours.to_csv(tmp_path / "ours.csv", index=False)
    options = {"dataset": "cifar10", "threat_model": "Linf", "evaluations": ["autoattack"]}
    written = draw_zoo_classwise(table, tmp_path / "heat", **options)
    intervals = pd.read_csv(tmp_path / "heat.csv")
    assert {p.suffix for p in written} == {".png", ".pdf", ".csv"} and len(intervals) == 9
    assert set(intervals["model_name"]) >= {"Carmon et al. 2019 (Unlabeled)"}  # display names, not IDs
    draw_zoo_ranks(table, tmp_path / "ranks", reference=str(tmp_path / "ours.csv"), **options)
    draw_zoo_gap(table, tmp_path / "gap", **options)
    assert all((tmp_path / f"{s}.png").exists() for s in ("heat", "ranks", "gap"))
    out = pd.read_csv(zoo_table(table, tmp_path / "zoo.csv"))
    carmon = out[(out["name"] == "Carmon2019Unlabeled") & (out["eval"] == "autoattack")].iloc[0]
    reported = reported_accuracy()[("cifar10", "Linf", "Carmon2019Unlabeled")]
    assert carmon["reported_robust_pct"] == reported["robust"] == 59.53  # from robustbench's package metadata
    assert carmon["difference_pp"] == pytest.approx(carmon["ours_pct"] - 59.53, abs=0.01)
    assert not carmon["full_test_set"] and not carmon["flag"]  # 3,000 images: not RobustBench's test set


def test_zoo_entry_on_data_of_another_image_size_is_a_config_error(tmp_path, monkeypatch, ci_params):
    """The ci preset's synthetic images are smaller than CIFAR's: with the weights placed, its
    zoo entry is refused when planned, naming the setting that fits (not a shape error in a job)."""

    from study.config import ConfigError
    from study.config.zoo import plan_zoo
    from study.data.registry import get_dataset_info

    place_random_weights(tmp_path)
    monkeypatch.setenv("STUDY_WEIGHTS_DIR", str(tmp_path))
    side = get_dataset_info(ENTRY.dataset).image_size
    assert ci_params.data.synthetic.image_size != side
    with pytest.raises(ConfigError, match=f"zoo entry {ENTRY.name}: RobustBench's {ENTRY.dataset} models take "
                                          f"{side}x{side} images.*set data.synthetic.image_size: {side}"):
        plan_zoo(ci_params)
    data = ci_params.set_fields()["data"]
    params = changed(ci_params, data={**data, "synthetic": {**data["synthetic"], "image_size": side}})
    assert [r.config["zoo"]["name"] for r in plan_zoo(params)] == [ENTRY.name]


# torchvision's standard ResNet-50 as the paper preset lists it, its file under a subfolder here
TORCHVISION = {"dataset": "imagenet", "threat_model": "Linf", "name": "resnet50", "source": "torchvision",
               "file": "torchvision/resnet50-random.pth"}
CLEAN = {"name": "clean", "type": "clean", "batch_size": 8, "seed": 0}
PGD = {"name": "pgd20_linf4", "type": "pgd", "norm": "linf", "eps": 4 / 255, "alpha": 2 / 255,
       "steps": 2, "restarts": 1, "batch_size": 8, "seed": 0}


@pytest.fixture(scope="module")
def torchvision_weights(tmp_path_factory):
    """torchvision's own ResNet-50 with seeded random weights, saved as torchvision's files are
    (a plain state dict, without BatchNorm's num_batches_tracked); (folder, the network)."""
    import_torchvision()  # first: it makes torchvision importable here (study/models/zoo.py)
    import torchvision

    folder = tmp_path_factory.mktemp("weights")
    torch.manual_seed(0)
    net = torchvision.models.resnet50()
    # BN statistics of a trained net, roughly, so the random net's logits stay finite and varied.
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_var.fill_(4.0)
    path = folder / TORCHVISION["file"]
    path.parent.mkdir()
    torch.save({k: v for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}, path)
    return folder, net.eval()


@pytest.fixture(scope="module")
def imagenet_like(tmp_path_factory):
    """A prepared 'ImageNet' of 3 classes x 2 images at 32 px (ResNet-50 pools down to 1 px)."""
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


def test_torchvision_entry_is_torchvisions_resnet50_with_the_files_weights(torchvision_weights):
    import torchvision

    folder, net = torchvision_weights
    model = load_zoo_model(ZooEntry(**TORCHVISION), folder)
    assert isinstance(model.network[1], torchvision.models.ResNet) and not model.training
    loaded = model.network[1].state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked"))
    x = torch.rand(2, 3, 32, 32)  # [0, 1] images in: the ImageNet normalization is inside
    mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    with torch.no_grad():
        expected = net((x - mean) / std)
        torch.testing.assert_close(model(x), expected)
    assert torch.isfinite(expected).all() and not torch.allclose(expected[0], expected[1])  # input-dependent


def test_torchvision_entry_evaluates_class_wise_like_a_run(torchvision_weights, imagenet_like, tmp_path):
    folder, _ = torchvision_weights
    _, splits = imagenet_like
    cfg = zoo_run_config(ZooConfigEntry(**TORCHVISION))
    run_dir = write_zoo_run(tmp_path / "zoo-imagenet-Linf-resnet50", ConfigSpec.parse(cfg), folder)
    blob = torch.load(run_dir / "model.pt", weights_only=True)
    assert list(blob["files"]) == [TORCHVISION["file"]] and len(blob["files"][TORCHVISION["file"]]) == 64
    out = tmp_path / "records"
    evaluate_checkpoint(run_dir, splits, [(EvaluationSpec.parse(CLEAN), out / "clean.parquet"),
                                          (EvaluationSpec.parse(PGD), out / "pgd20_linf4.parquet")],
                        device="cpu", progress=False)
    clean, clean_meta = read_records(out / "clean.parquet")
    pgd, pgd_meta = read_records(out / "pgd20_linf4.parquet")
    assert list(clean.columns[:3]) == ["index", "label", "pred"] and clean.shape == (6, 3 + 1000)
    assert clean["label"].tolist() == splits.test_y.tolist()
    assert pgd_meta["run_id"] == "zoo-imagenet-Linf-resnet50"
    assert pgd_meta["evaluation"]["eps"] == pytest.approx(4 / 255)
    assert clean_meta["run_config"]["zoo"] == TORCHVISION

    # The attack lowers every true-class margin, and strictly somewhere.
    def margin(frame):
        logits = frame.filter(like="logit_").to_numpy().copy()
        true = logits[np.arange(len(frame)), frame["label"].to_numpy()]
        np.put_along_axis(logits, frame["label"].to_numpy()[:, None], -np.inf, 1)
        return true - logits.max(1)
    assert (margin(pgd) < margin(clean) + 1e-4).all() and (margin(pgd) < margin(clean)).any()
    classwise = pd.read_csv(build_tables(sorted(out.glob("*.parquet")), [], tmp_path / "tables")["classwise"])
    assert set(classwise["method"]) == {"torchvision"} and set(classwise["model"]) == {"resnet50"}
    assert set(classwise[classwise["n"] > 0]["class_name"]) == {"tench", "goldfish", "great white shark"}


def test_torchvision_entry_refuses_other_data(torchvision_weights, synthetic_splits, tmp_path):
    spec = ConfigSpec.parse(zoo_run_config(ZooConfigEntry(**TORCHVISION)))
    run_dir = write_zoo_run(tmp_path / "run", spec, torchvision_weights[0])
    with pytest.raises(ValueError, match=r"trained on imagenet \(val\) but the data given is synthetic"):
        evaluate_checkpoint(run_dir, synthetic_splits, [(EvaluationSpec.parse(CLEAN), tmp_path / "x.parquet")],
                            device="cpu",
                            progress=False)


def test_torchvision_file_missing_wrong_or_of_no_model_is_one_line(torchvision_weights, tmp_path, monkeypatch):
    entry = ZooEntry(**TORCHVISION)
    with pytest.raises(WeightsUnavailableError) as err:
        load_zoo_model(entry, tmp_path)
    message = str(err.value)
    assert "\n" not in message and str(tmp_path / TORCHVISION["file"]) in message and "zoo.weights_dir" in message
    monkeypatch.delenv(WEIGHTS_ENV, raising=False)
    with pytest.raises(WeightsUnavailableError, match="set the config key zoo.weights_dir or \\$STUDY_WEIGHTS_DIR"):
        load_zoo_model(entry)
    wrong = tmp_path / TORCHVISION["file"]
    wrong.parent.mkdir()
    torch.save({"conv1.weight": torch.zeros(64, 3, 7, 7), "head.weight": torch.zeros(2)}, wrong)
    with pytest.raises(ValueError, match="missing keys .* unexpected .*head.weight"):
        load_zoo_model(entry, tmp_path)
    with pytest.raises(ValueError, match="torchvision has no model 'resnet5000'; valid: .*resnet50"):
        load_zoo_model(ZooEntry(**{**TORCHVISION, "name": "resnet5000"}), torchvision_weights[0])


def test_zoo_config_sources_files_and_weights_folder(ci_params, torchvision_weights, monkeypatch, tmp_path):
    """zoo.weights_dir is the folder (over the env); `file` comes with source torchvision and only
    then; torchvision's models classify ImageNet; require_weights looks for the entry's own file."""
    folder, _ = torchvision_weights
    monkeypatch.delenv(WEIGHTS_ENV, raising=False)
    monkeypatch.delenv("STUDY_DATA_MIRROR", raising=False)
    monkeypatch.chdir(tmp_path)  # the project folder: ImageNet placed in its data/raw (else left out)
    (tmp_path / ci_params.data.root / "raw/imagenet/val").mkdir(parents=True)
    zoo = {**ci_params.set_fields()["zoo"], "models": [TORCHVISION], "weights_dir": str(folder),
           "require_weights": True, "evaluations": {"Linf": ["clean"]}}
    [run] = plan_zoo(changed(ci_params, zoo=zoo))
    assert run.run_id == "zoo-imagenet-Linf-resnet50" and run.config["zoo"]["file"] == TORCHVISION["file"]
    assert plan_zoo(changed(ci_params, zoo={**zoo, "weights_dir": str(folder / "elsewhere")})) == []
    for bad, says in (({"file": None}, "source is 'torchvision', file None"),
                      ({"source": "robustbench"}, "source is 'robustbench', file 'torchvision/"),
                      ({"dataset": "cifar10"}, "dataset 'cifar10' \\(valid: imagenet\\)"),
                      ({"source": "hub"}, "models\\[0\\].source: 'hub' is not valid; expected one of robustbench")):
        with pytest.raises(ConfigError, match=says):
            plan_zoo(changed(ci_params, zoo={**zoo, "models": [{**TORCHVISION, **bad}]}))
