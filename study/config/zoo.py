"""The model zoo of the configured study (params `zoo`): one run-like entry per model.

A zoo model is trained elsewhere and evaluated here: one of RobustBench's zoo (the default
`source`), or a torchvision ImageNet model (`source: torchvision`, its state dict `file` in
the weights folder). It becomes a `RunSpec` whose config has the shape of a trained run's
(the tables read the same fields; the training fields say `pretrained`, zero epochs) plus
`zoo` (the leaderboard's dataset and threat model, the model's name, and for torchvision its
source and file). Its run id is `zoo-<dataset>-<threat model>-<name>`, so its records, checks
and CIFAR-10-C records sit beside the trained runs' and every rule that evaluates a run
evaluates it alike.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from study.config.core import ConfigError, configured_mirror
from study.config.plan import RunSpec
from study.config.spec import ConfigSpec
from study.config.types import Params, Zoo, ZooEntry, ZooImageNet, ZooModel

ZOO_PREFIX = "zoo-"
ZOO_GROUP = "zoo"


def _zoo(params: Params) -> Zoo | None:
    return params.zoo


def given_weights_dir(params: Params) -> str | None:
    """The weights folder a user chose: the config key zoo.weights_dir, else $STUDY_WEIGHTS_DIR; None if neither."""
    from study.models.weights import WEIGHTS_ENV

    zoo = _zoo(params)
    return (zoo.weights_dir if zoo is not None else None) or os.environ.get(WEIGHTS_ENV) or None


def default_weights_dir(params: Params) -> str:
    """The project's own weights folder, <data.root>/zoo_weights: the one the workflow downloads into."""
    from study.models.weights import DEFAULT_WEIGHTS_SUBDIR

    return f"{params.data.root}/{DEFAULT_WEIGHTS_SUBDIR}"


def zoo_weights_dir(params: Params) -> str:
    """The weights folder the zoo reads: the one a user chose (given_weights_dir; read as it
    is, never written: an offline machine's copy), else the project's default_weights_dir."""
    return given_weights_dir(params) or default_weights_dir(params)


def zoo_downloads(params: Params) -> bool:
    """Whether the zoo's jobs fetch missing weights: only into the project's own folder."""
    return given_weights_dir(params) is None


def zoo_data(entry: ZooEntry) -> str:
    """The dataset an entry is evaluated on (`data`, default its leaderboard's)."""
    return entry.data or entry.dataset


def hand_placed_missing(params: Params, dataset: str, root: str | Path | None = None) -> str | None:
    """For a dataset a user must place by hand (ImageNet) that is neither prepared nor placed
    (data.root/raw, the mirror): how to supply it, in one line; None otherwise (in place, or
    downloadable)."""
    from study.config.plan import prepared_name
    from study.data.placed import imagenet_how_to_place, locate_imagenet

    if dataset != "imagenet":
        return None
    data = Path(root or ".") / params.data.root
    if (data / "prepared" / f"{prepared_name('imagenet', 'val')}.pt").is_file():
        return None
    mirror = configured_mirror(params.data.mirror)
    if locate_imagenet(data / "raw", Path(mirror) if mirror else None) is not None:
        return None
    return imagenet_how_to_place(data / "raw")


class LeftOut(NamedTuple):
    """A zoo entry left out of the plan: its run id, the data it lacks (evaluated on it), its
    threat model (with the data: its figure panel) and how a user supplies the data."""

    run_id: str
    dataset: str
    threat_model: str
    how: str


def zoo_left_out(params: Params, root: str | Path | None = None) -> list[LeftOut]:
    """Every zoo entry left out of the plan because its hand-placed data is not in place;
    `root` is the project folder (default: the working one)."""
    zoo = _zoo(params)
    out = []
    for entry in zoo.models if zoo is not None else []:
        if (how := hand_placed_missing(params, zoo_data(entry), root)) is not None:
            out.append(LeftOut(zoo_run_id(entry), zoo_data(entry), entry.threat_model, how))
    return out


def zoo_imagenet_options(params: Params) -> dict:
    """`study prepare --options` of the ImageNet validation subset (zoo.imagenet, its defaults the type's)."""
    zoo = _zoo(params)
    return (zoo.imagenet if zoo is not None else ZooImageNet()).model_dump()


def zoo_source(entry: ZooEntry | ZooModel) -> str:
    """Who builds the entry's network: robustbench (the default) or torchvision (with its `file`)."""
    if (entry.source == "torchvision") != bool(entry.file):
        raise ConfigError(f"zoo entry {entry.name}: `file` (its weights file in the folder) is given with "
                          f"source torchvision and only then; here source is {entry.source!r}, file {entry.file!r}")
    if entry.source == "torchvision" and entry.dataset != "imagenet":
        raise ConfigError(f"zoo entry {entry.name}: torchvision's models classify ImageNet; dataset "
                          f"{entry.dataset!r} (valid: imagenet)")
    return entry.source


def zoo_weights_file(entry: ZooEntry | ZooModel) -> str:
    """The entry's file in the weights folder (robustbench's layout, or the torchvision entry's `file`)."""
    if zoo_source(entry) == "torchvision":
        return str(entry.file)
    return f"{entry.dataset}/{entry.threat_model}/{entry.name}.pt"


def zoo_run_config(entry: ZooEntry) -> dict:
    """The run config of one zoo entry; `data` (default: RobustBench's dataset) is what it is evaluated on."""
    from study.data.registry import get_dataset_info

    data = entry.data or entry.dataset
    source = zoo_source(entry)
    return {
        "dataset": data,
        "data_variant": entry.variant or get_dataset_info(data).variants[0],
        "train_per_class": None,
        "model": entry.name,
        "method": source,
        "seed": 0,
        "optimizer": {"name": "pretrained", "lr": 0.0, "weight_decay": 0.0},
        "schedule": {"name": "pretrained"},
        "epochs": 0,
        # robustbench's entries keep their three fields only, so their run configs are those of before
        "zoo": {"dataset": entry.dataset, "threat_model": entry.threat_model, "name": entry.name,
                **({"source": source, "file": entry.file} if source != "robustbench" else {})},
    }


def zoo_run_id(entry: ZooEntry | ZooModel, data: str | None = None) -> str:
    """`zoo-<dataset>-<threat model>-<name>`, `-on-<data>` where it is evaluated on other data
    (an entry's `data`, or `data` given for a zoo run config's model)."""
    data = data or (entry.data if isinstance(entry, ZooEntry) else None) or entry.dataset
    on = "" if data == entry.dataset else f"-on-{data}"
    return f"{ZOO_PREFIX}{entry.dataset}-{entry.threat_model}-{entry.name}{on}"


def _weights_present(entry: ZooEntry, weights_dir: str | None) -> bool:
    return weights_dir is not None and (Path(weights_dir).expanduser() / zoo_weights_file(entry)).is_file()


def weights_present(params: Params, entry: ZooEntry | ZooModel, root: str | Path | None = None) -> bool:
    """Whether the entry's file (an ensemble's first member: robustbench's record, which needs
    robustbench itself, says how many) lies in the weights folder."""
    folder = Path(root or ".") / Path(zoo_weights_dir(params)).expanduser()
    return (folder / zoo_weights_file(entry)).is_file() or (folder / f"{zoo_weights_file(entry)}_m0.pt").is_file()


def _check_image_size(params: Params, entry: ZooEntry) -> None:
    """RobustBench's architectures take their dataset's image size (CIFAR's 32 px: a fixed
    final pooling); evaluated on other data, that data must have the same size."""
    from study.data.registry import get_dataset_info

    data = entry.data or entry.dataset
    wanted, size = get_dataset_info(entry.dataset).image_size, get_dataset_info(data).image_size
    if data == "synthetic":  # generated at the size the params give (as plan.run_config passes them)
        size = params.data.synthetic.image_size
    if size != wanted:
        raise ConfigError(f"zoo entry {entry.name}: RobustBench's {entry.dataset} models take {wanted}x{wanted} "
                          f"images, its data {data} has {size}x{size}"
                          + (f" (set data.synthetic.image_size: {wanted})" if data == "synthetic" else ""))


def plan_zoo(params: Params, root: str | Path | None = None) -> list[RunSpec]:
    """The zoo's runs; with `require_weights` only those whose weights file is in the folder
    (for a preset that must not grow when no weights are placed); never those
    whose hand-placed data is missing (zoo_left_out). `root`: the project folder (default:
    the working one), where data.root lies."""
    zoo = params.zoo
    if zoo is None:
        return []
    weights_dir = zoo_weights_dir(params)
    if not Path(weights_dir).is_absolute():
        weights_dir = str(Path(root or ".") / weights_dir)
    left_out = {item.run_id for item in zoo_left_out(params, root)}
    runs = []
    for entry in zoo.models:
        if zoo.require_weights and not _weights_present(entry, weights_dir):
            continue
        zoo_source(entry)  # a bad entry is a config error whether or not its data is in place
        if zoo_run_id(entry) in left_out:
            continue
        evaluations = entry.evaluations or getattr(zoo.evaluations, entry.threat_model)
        if not evaluations:
            raise ConfigError(f"zoo entry {entry.name}: no evaluations (give `evaluations`, or "
                              f"zoo.evaluations.{entry.threat_model})")
        _check_image_size(params, entry)
        for ev in evaluations:
            if ev not in params.evaluations:
                raise ConfigError(f"zoo entry {entry.name}: unknown evaluation {ev!r}; "
                                  f"defined in params 'evaluations': {', '.join(sorted(params.evaluations))}")
        # An entry without its own variant takes the study's (data.variants, "auto" resolved).
        variant = entry.variant or params.variant(entry.data or entry.dataset)
        cfg = zoo_run_config(entry.model_copy(update={"variant": variant}))
        runs.append(RunSpec(zoo_run_id(entry), ConfigSpec.parse(cfg, f"zoo entry {entry.name}: run config"),
                            [ZOO_GROUP], list(evaluations)))
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"zoo.models lists a model twice: {sorted({i for i in ids if ids.count(i) > 1})}")
    return runs


def zoo_checked(params: Params, runs: list[RunSpec]) -> list[RunSpec]:
    """Zoo runs that get the checks against false robustness (zoo.checks: threat models)."""
    zoo = _zoo(params)
    wanted = set(zoo.checks) if zoo is not None else set()
    return [r for r in runs if r.zoo.threat_model in wanted]


def zoo_corrupted(params: Params, runs: list[RunSpec]) -> list[RunSpec]:
    """Zoo runs evaluated on CIFAR-10-C (zoo.corruptions, on the datasets robustness.corruptions corrupts)."""
    if params.zoo is None or not params.zoo.corruptions or params.robustness.corruptions is None:
        return []
    return [r for r in runs if r.dataset in params.robustness.corruptions.datasets]
