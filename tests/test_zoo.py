"""The RobustBench zoo: a real zoo architecture with seeded random weights, saved in
robustbench's folder layout, loads through robustbench.utils.load_model; a missing file is
one line naming its place; the zoo figures and the table beside RobustBench's numbers draw
from hand-built records."""

import numpy as np
import pandas as pd
import pytest
import torch

from study.figures.zoo import draw_zoo_classwise, draw_zoo_gap, draw_zoo_ranks
from study.models.weights import WeightsUnavailableError
from study.models.zoo import ZooEntry, _import_robustbench, load_zoo_model, reported_accuracy
from study.tables import zoo_table

ENTRY = ZooEntry("cifar10", "Linf", "Wong2020Fast")  # PreAct-ResNet-18: the cheapest real zoo entry


def place_random_weights(folder, entry=ENTRY, seed=0):
    """robustbench's own architecture of `entry`, seeded random weights, saved where its
    model_dir layout expects them (nested and prefixed, as its checkpoints are)."""
    utils = _import_robustbench()  # first: it makes robustbench importable here (study/models/zoo.py)
    from robustbench.model_zoo.enums import BenchmarkDataset, ThreatModel

    torch.manual_seed(seed)
    net = utils.all_models[BenchmarkDataset(entry.dataset)][ThreatModel(entry.threat_model)][entry.name]["model"]()
    path = folder / entry.relative_file
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {f"module.{k}": v for k, v in net.state_dict().items()}}, path)
    return net.eval(), path


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
    import copy

    from study.config import ConfigError
    from study.config.zoo import plan_zoo
    from study.data.registry import get_dataset_info

    place_random_weights(tmp_path)
    monkeypatch.setenv("STUDY_WEIGHTS_DIR", str(tmp_path))
    side = get_dataset_info(ENTRY.dataset).image_size
    assert ci_params["data"]["synthetic"]["image_size"] != side
    with pytest.raises(ConfigError, match=f"zoo entry {ENTRY.name}: RobustBench's {ENTRY.dataset} models take "
                                          f"{side}x{side} images.*set data.synthetic.image_size: {side}"):
        plan_zoo(ci_params)
    params = copy.deepcopy(ci_params)
    params["data"]["synthetic"]["image_size"] = side
    assert [r.config["zoo"]["name"] for r in plan_zoo(params)] == [ENTRY.name]
