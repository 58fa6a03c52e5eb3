"""A real zoo entry with random weights, placed as robustbench's model_dir layout expects
(the zoo tests of every tier use it; no download)."""

import torch

from study.models.zoo import ZooEntry, import_robustbench

ENTRY = ZooEntry("cifar10", "Linf", "Wong2020Fast")  # PreAct-ResNet-18: the cheapest real zoo entry


def place_random_weights(folder, entry=ENTRY, seed=0):
    """robustbench's own architecture of `entry`, seeded random weights, saved where its
    model_dir layout expects them (nested and prefixed, as its checkpoints are)."""
    utils = import_robustbench()  # first: it makes robustbench importable here (study/models/zoo.py)
    from robustbench.model_zoo.enums import BenchmarkDataset, ThreatModel

    torch.manual_seed(seed)
    net = utils.all_models[BenchmarkDataset(entry.dataset)][ThreatModel(entry.threat_model)][entry.name]["model"]()
    path = folder / entry.relative_file
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {f"module.{k}": v for k, v in net.state_dict().items()}}, path)
    return net.eval(), path
