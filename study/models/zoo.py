"""The model zoo: models trained elsewhere, read from the local weights folder (config key
`zoo.weights_dir`, or $STUDY_WEIGHTS_DIR), never downloaded silently. Two sources:

* robustbench (the default): RobustBench's zoo, loaded through robustbench itself
  (`robustbench.utils.load_model`) from the folder laid out as robustbench lays out its own
  `model_dir`: `<weights_dir>/<dataset>/<threat_model>/<name>.pt` (an ensemble:
  `<name>.pt_m0.pt`, `<name>.pt_m1.pt`, ...). robustbench parses its checkpoints (nesting,
  prefixes, the normalization layer) and returns models that take images in [0, 1] and
  normalize inside, which is this project's model contract.
* torchvision: one of torchvision's ImageNet classifiers (`name` is its builder, e.g.
  `resnet50`), built by torchvision without weights and given the plain state dict in the
  entry's `file` (`torch.load(..., weights_only=True)`, every key checked), behind the
  ImageNet normalization.

robustbench downloads a missing file from Google Drive (gdown, no timeout). Here it is
called only when every file it reads is in place; a missing file is one
`WeightsUnavailableError` line naming the file, its place and where the official copy comes
from. `download=True` fetches the missing files first (machines with a network; the workflow
asks for it only for its own folder, data/zoo_weights): robustbench's own download (Google
Drive; torchvision's files from download.pytorch.org), or, with $STUDY_WEIGHTS_URL_BASE set,
`<base>/<file's place in the folder>` from a site's mirror in the same layout. Either way
robustbench's load_model then reads the file (through a weights_only torch.load:
`_WeightsOnlyTorch`), after its sha256 is checked against the pinned table
(study.models.zoo_checksums); a failed download ends in the same one-line error, naming the URL.

robustbench and torchvision are imported inside the loaders only (seconds: timm, torchvision).
"""

from __future__ import annotations

import email.message
import os
import re
import socket
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn

from study.io import load_torch
from study.models.normalize import Normalize
from study.models.weights import (
    DEFAULT_WEIGHTS_SUBDIR,
    WEIGHTS_CONFIG_KEY,
    WEIGHTS_ENV,
    WEIGHTS_URL_BASE_ENV,
    WeightsUnavailableError,
    resolve_weights_dir,
)
from study.models.zoo_checksums import (
    UNREADABLE,
    CheckedFile,
    ZooWeightsRefused,
    check_file,
    pinned_checksums,
    unsafe_file_error,
)

ZOO_DATASETS = ("cifar10", "cifar100", "imagenet")
ZOO_THREAT_MODELS = ("Linf", "L2", "corruptions")
ZOO_SOURCES = ("robustbench", "torchvision")
DOWNLOAD_TIMEOUT_S = 60
TORCHVISION_URL_BASE = "https://download.pytorch.org/models"  # torchvision's own weights host
# The statistics torchvision's ImageNet weights were trained with (its transforms' defaults).
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# Declared schemas of the two torchvision ops that torchvision registers without checking
# that its compiled extension loaded (see import_robustbench); kept alive while the process runs.
_TORCHVISION_SCHEMAS: list[Any] = []


@dataclass(frozen=True)
class ZooEntry:
    """One zoo model: its leaderboard (dataset, threat model), its RobustBench model ID or
    torchvision builder, who builds it, and (torchvision) its state dict's file in the folder."""

    dataset: str
    threat_model: str
    name: str
    source: str = "robustbench"
    file: str | None = None

    def __post_init__(self) -> None:
        if self.dataset not in ZOO_DATASETS:
            raise ValueError(f"RobustBench dataset {self.dataset!r}; valid: {', '.join(ZOO_DATASETS)}")
        if self.threat_model not in ZOO_THREAT_MODELS:
            raise ValueError(f"RobustBench threat model {self.threat_model!r}; valid: {', '.join(ZOO_THREAT_MODELS)}")
        if self.source not in ZOO_SOURCES:
            raise ValueError(f"zoo source {self.source!r}; valid: {', '.join(ZOO_SOURCES)}")
        if (self.source == "torchvision") != bool(self.file):
            raise ValueError(f"zoo model {self.name}: a file is given with source torchvision and only then "
                             f"(source {self.source!r}, file {self.file!r})")
        if self.source == "torchvision" and self.dataset != "imagenet":
            raise ValueError(f"torchvision model {self.name}: dataset {self.dataset!r}; valid: imagenet")

    @property
    def relative_file(self) -> str:
        """The file's place in the weights folder (robustbench's model_dir layout, or torchvision's `file`)."""
        return self.file if self.file else f"{self.dataset}/{self.threat_model}/{self.name}.pt"

    def describe(self) -> str:
        who = "torchvision" if self.source == "torchvision" else "RobustBench"
        return f"{who} model {self.name} ({self.dataset}, {self.threat_model})"


class ZooModel(nn.Module):
    """A zoo model under the project's model contract: float images in [0, 1] in, logits
    out (the normalization is inside the network, where RobustBench puts it)."""

    def __init__(self, network: nn.Module, entry: ZooEntry):
        super().__init__()
        self.network = network
        self.entry = entry

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x).float()


def zoo_file(entry: ZooEntry, weights_dir: str | os.PathLike | None) -> Path:
    return resolve_weights_dir(weights_dir) / entry.relative_file


def _declare_torchvision_ops() -> None:
    lib = torch.library.Library("torchvision", "FRAGMENT")
    for op in ("nms", "qnms"):
        lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _TORCHVISION_SCHEMAS.append(lib)


def import_torchvision() -> None:
    """torchvision, importable even where its compiled ops do not match torch (a CUDA
    torchvision wheel beside a CPU torch): it then fails on two fake-op registrations that
    it makes unguarded; with their schemas declared, its pure-Python parts import (models,
    transforms; robustbench uses no compiled torchvision op)."""
    try:
        import torchvision  # noqa: F401
    except RuntimeError as err:
        if "torchvision::nms" not in str(err):
            raise
        for mod in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[mod]
        _declare_torchvision_ops()
        import torchvision  # noqa: F401


def import_robustbench() -> ModuleType:
    """`robustbench.utils`, imported where robustbench 1.1.1's own imports fail: its
    evaluation module imports `autoattack` (fra31/auto-attack, not on PyPI), the code that
    PyPI ships as `pyautoattack` (a dependency of robustbench and of this project)."""
    try:
        import autoattack  # noqa: F401
    except ImportError:
        import pyautoattack
        import pyautoattack.state

        sys.modules.setdefault("autoattack", pyautoattack)
        sys.modules.setdefault("autoattack.state", pyautoattack.state)
    import_torchvision()
    with warnings.catch_warnings():  # timm's and pkg_resources' deprecation notes, on every import
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
        import robustbench.utils

    return robustbench.utils


def _zoo_record(utils, entry: ZooEntry) -> dict:
    """robustbench's model-zoo entry of `entry`; refuses models it would not load from the folder."""
    import timm
    from robustbench.model_zoo.enums import BenchmarkDataset, ThreatModel

    models = utils.all_models[BenchmarkDataset(entry.dataset)][ThreatModel(entry.threat_model)]
    if entry.name not in models:
        raise ValueError(f"{entry.describe()} is not in robustbench's model zoo "
                         f"({len(models)} models there, e.g. {', '.join(list(models)[:5])})")
    timm_name = f"{entry.name.lower().replace('-', '_')}_{entry.dataset}_{entry.threat_model.lower()}"
    if timm.is_model(timm_name) or (entry.dataset == "imagenet" and "Standard" in entry.name):
        raise ValueError(f"robustbench loads {entry.name} from a model hub (timm / torchvision), "
                         "not from the weights folder; the study evaluates only folder-loaded models")
    if models[entry.name]["gdrive_id"] is None:
        raise ValueError(f"{entry.describe()} has no checkpoint in robustbench's zoo")
    return models[entry.name]


def zoo_files(entry: ZooEntry, weights_dir: str | os.PathLike | None, record: dict) -> list[Path]:
    """Every file robustbench's load_model reads for `entry` (several for an ensemble)."""
    base = zoo_file(entry, weights_dir)
    ids = record["gdrive_id"]
    return [Path(f"{base}_m{i}.pt") for i in range(len(ids))] if isinstance(ids, list) else [base]


def _official_copy(entry: ZooEntry, record: dict) -> str:
    """Where the official copy of `entry`'s weights comes from, for an error line."""
    ids = record["gdrive_id"]
    return (f"robustbench.utils.load_model({entry.name!r}, model_dir=<folder>, dataset={entry.dataset!r}, "
            f"threat_model={entry.threat_model!r}) downloads it from Google Drive (id "
            f"{ids if not isinstance(ids, list) else ', '.join(ids)}) on a machine with a network; in the project's "
            f"folder data/{DEFAULT_WEIGHTS_SUBDIR} the zoo_run job downloads it again")


def _missing_error(entry: ZooEntry, path: Path, record: dict, cause: str = "") -> WeightsUnavailableError:
    return WeightsUnavailableError(
        f"weights of {entry.describe()} not found: expected the file {path} ({entry.relative_file} in the "
        f"weights folder, robustbench's layout <model_dir>/<dataset>/<threat_model>/<name>.pt){cause}. The "
        f"official copy: {_official_copy(entry, record)}; copy the folder's "
        f"file there. The folder is the config key {WEIGHTS_CONFIG_KEY} or ${WEIGHTS_ENV}."
    )


def _download(utils, entry: ZooEntry, record: dict, missing: list[Path]) -> None:
    """robustbench's own download (gdown) of the missing files, bounded in time, each through a
    temporary file; only downloaded here: robustbench's load_model would unpickle them too."""
    from study.io import atomic_path

    ids = record["gdrive_id"]
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)
    try:
        for path in missing:
            gdrive_id = ids[int(path.name.rsplit("_m", 1)[1].removesuffix(".pt"))] if isinstance(ids, list) else ids
            with atomic_path(path) as tmp:
                utils.download_gdrive_new(gdrive_id, str(tmp))
                if not Path(tmp).is_file():  # gdown reports some failures by returning None
                    raise OSError(f"gdown wrote no file for id {gdrive_id}")
    except Exception as err:  # gdown / requests raise many kinds; the user needs the file's place
        raise _missing_error(entry, path, record, f" (robustbench's download failed: "
                             f"{type(err).__name__})") from None
    finally:
        socket.setdefaulttimeout(previous)


def weights_url_base() -> str | None:
    """$STUDY_WEIGHTS_URL_BASE without its trailing slash, or None (the public hosts)."""
    base = os.environ.get(WEIGHTS_URL_BASE_ENV, "").strip().rstrip("/")
    return base or None


def _http_download(url: str, target: Path, entry: ZooEntry) -> None:
    """`url` to `target` through a temporary file beside it (an interrupted download leaves
    nothing a later run would take for the weights); one-line error naming the URL otherwise."""
    import urllib.error
    import urllib.request

    from study.io import atomic_path

    print(f"downloading {entry.describe()}: {url} -> {target}", file=sys.stderr)
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response, atomic_path(target) as tmp:
            with open(tmp, "wb") as out:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
    except urllib.error.HTTPError as err:
        raise WeightsUnavailableError(f"weights of {entry.describe()}: download of {url} failed (HTTP {err.code} "
                                      f"{err.reason}); place the file at {target} by hand, or fix "
                                      f"${WEIGHTS_URL_BASE_ENV}") from None
    except (OSError, ValueError) as err:  # URLError, timeouts, refused connections; malformed URLs
        raise WeightsUnavailableError(f"weights of {entry.describe()}: download of {url} failed "
                                      f"({type(err).__name__}: {err}); place the file at {target} by hand"
                                      ) from None


def _torchvision_file(entry: ZooEntry, weights_dir: str | os.PathLike | None) -> Path:
    path = zoo_file(entry, weights_dir)
    if not path.is_file():
        raise WeightsUnavailableError(
            f"weights of {entry.describe()} not found: expected the file {path} ({entry.file} in the weights "
            f"folder, torchvision's state dict of {entry.name}). The official copy: the url of "
            f"torchvision.models.get_model_weights({entry.name!r}) (https://download.pytorch.org/models/"
            f"{path.name}); copy it there. The folder is the config key {WEIGHTS_CONFIG_KEY} or "
            f"${WEIGHTS_ENV}.")
    return path


def _load_torchvision(entry: ZooEntry, weights_dir: str | os.PathLike | None) -> nn.Module:
    """torchvision's `entry.name` with the state dict of its file, checked key by key,
    behind the ImageNet normalization."""
    path = _torchvision_file(entry, weights_dir)
    import_torchvision()
    import torchvision.models

    try:
        builder = torchvision.models.get_model_builder(entry.name)
    except ValueError:
        raise ValueError(f"torchvision has no model {entry.name!r}; valid: "
                         f"{', '.join(torchvision.models.list_models(torchvision.models))}") from None
    state = dict(load_torch(path))
    # Built without memory or random init (meta device): every weight comes from the file.
    with torch.device("meta"):
        network = builder(weights=None)
    expected = set(network.state_dict())
    for key in expected - state.keys():
        # Older torchvision files predate BatchNorm's batch counter, which eval never uses.
        if key.endswith(".num_batches_tracked"):
            state[key] = torch.tensor(0, dtype=torch.long)
    missing, unexpected = sorted(expected - state.keys()), sorted(state.keys() - expected)
    if missing or unexpected:
        raise ValueError(f"{path} does not hold torchvision's {entry.name} weights: {len(missing)} missing keys "
                         f"(e.g. {missing[:3]}), {len(unexpected)} unexpected (e.g. {unexpected[:3]})")
    network.load_state_dict(state, assign=True)
    return nn.Sequential(Normalize(IMAGENET_MEAN, IMAGENET_STD), network)


def check_zoo_weights(
    entry: ZooEntry, weights_dir: str | os.PathLike | None = None, *, download: bool = False
) -> list[Path]:
    """The files the loader reads for `entry`, all in place (or `WeightsUnavailableError`);
    `download` fetches the missing ones first ($STUDY_WEIGHTS_URL_BASE, else robustbench's own
    download, torchvision's host for a torchvision file)."""
    base = weights_url_base()
    if entry.source == "torchvision":
        path = zoo_file(entry, weights_dir)
        if download and not path.is_file():
            _http_download(f"{base or TORCHVISION_URL_BASE}/{entry.file if base else Path(str(entry.file)).name}",
                           path, entry)
        return [_torchvision_file(entry, weights_dir)]
    model_dir = resolve_weights_dir(weights_dir)
    utils = import_robustbench()
    record = _zoo_record(utils, entry)
    files = zoo_files(entry, model_dir, record)
    missing = [p for p in files if not p.is_file()]
    if missing and download:
        if base:  # a site's mirror in robustbench's layout: the same relative places under the URL
            for path in missing:
                _http_download(f"{base}/{path.relative_to(model_dir).as_posix()}", path, entry)
        else:
            _download(utils, entry, record, missing)
        missing = [p for p in files if not p.is_file()]
    if missing:
        raise _missing_error(entry, missing[0], record)
    return files


def _good_copy(entry: ZooEntry) -> str:
    if entry.source == "torchvision":
        return f"{TORCHVISION_URL_BASE}/{Path(str(entry.file)).name}"
    return _official_copy(entry, _zoo_record(import_robustbench(), entry))


def checked_zoo_weights(
    entry: ZooEntry, weights_dir: str | os.PathLike | None = None, *, download: bool = False, read: bool = True
) -> list[CheckedFile]:
    """The files of `entry` in place (`check_zoo_weights`), each checked against its pinned
    sha256 and read with weights_only (study.models.zoo_checksums); ZooWeightsRefused otherwise."""
    files = check_zoo_weights(entry, weights_dir, download=download)
    folder, good_copy, pins = resolve_weights_dir(weights_dir), _good_copy(entry), pinned_checksums()
    return [check_file(p, p.relative_to(folder).as_posix(), pins, entry.describe(), good_copy, read) for p in files]


class _WeightsOnlyTorch:
    """robustbench.utils's `torch` while its load_model runs: torch, but `load` reads with
    weights_only=True whatever the environment says (robustbench 1.1.1 calls torch.load
    without weights_only, which $TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD would turn off)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)

    @staticmethod
    def load(f, map_location=None, **_ignored) -> Any:
        return load_torch(f, map_location=map_location or "cpu")


def _robustbench_network(utils, entry: ZooEntry, weights_dir: str | os.PathLike | None) -> nn.Module:
    real_torch = utils.torch
    utils.torch = _WeightsOnlyTorch()
    try:
        return utils.load_model(entry.name, model_dir=str(resolve_weights_dir(weights_dir)),
                                dataset=entry.dataset, threat_model=entry.threat_model)
    finally:
        utils.torch = real_torch


def load_zoo_model(
    entry: ZooEntry,
    weights_dir: str | os.PathLike | None = None,
    device: torch.device | str = "cpu",
    *,
    download: bool = False,
    expected: dict[str, str] | None = None,
) -> ZooModel:
    """`entry` from the weights folder, in eval mode: through robustbench.utils.load_model, or
    (source torchvision) torchvision's architecture with the file's state dict; every file
    checked first (`checked_zoo_weights`) and, with `expected` (place -> sha256, what
    `study zoo-run` recorded), refused if it changed since."""
    # hashed here, read once below (with weights_only, through _WeightsOnlyTorch for robustbench)
    checked = checked_zoo_weights(entry, weights_dir, download=download, read=False)
    for file in checked:
        if expected is not None and expected.get(file.relative) != file.sha256:
            raise ZooWeightsRefused(
                f"weights of {entry.describe()}: {file.relative} in {resolve_weights_dir(weights_dir)} has sha256 "
                f"{file.sha256}, but `study zoo-run` recorded {expected.get(file.relative)}: the file changed "
                "since; put the recorded file back, or run the zoo_run job again")
    try:
        if entry.source == "torchvision":
            network = _load_torchvision(entry, weights_dir)
        else:
            network = _robustbench_network(import_robustbench(), entry, weights_dir)
    except UNREADABLE as err:
        path = resolve_weights_dir(weights_dir) / checked[0].relative
        raise unsafe_file_error(path if len(checked) == 1 else path.parent, entry.describe(), _good_copy(entry),
                                err) from None
    return ZooModel(network, entry).to(device).eval()


_LEADERBOARD_DATASETS = {"CIFAR-10": "cifar10", "CIFAR-100": "cifar100", "ImageNet": "imagenet"}


def _threat_heading(line: str) -> str | None:
    text = line.lstrip("#").strip().lower()
    return "Linf" if text.startswith("linf") else "L2" if text.startswith("l2") else \
        "corruptions" if "corruptions" in text else None


def _leaderboard_row(line: str) -> tuple[str, float, float] | None:
    cells = [re.sub(r"<[^>]+>|\*", "", c).strip() for c in line.strip().strip("|").split("|")]
    if len(cells) < 5 or not cells[3].endswith("%") or not cells[4].endswith("%"):
        return None
    try:
        return cells[1], float(cells[3].rstrip("%")), float(cells[4].rstrip("%"))
    except ValueError:
        return None


def reported_accuracy() -> dict[tuple[str, str, str], dict[str, float]]:
    """RobustBench's own reported accuracies, (dataset, threat model, name) -> {clean, robust} in %.

    robustbench 1.1.1 ships no model-info JSON files; its package metadata (the README that
    PyPI shows) carries the leaderboard tables of CIFAR-10, CIFAR-100 and ImageNet (clean
    and AutoAttack accuracy; for corruptions the accuracy on the corruptions). Read from
    there, without importing robustbench; empty if the metadata is not installed."""
    from importlib import metadata

    try:
        meta = metadata.metadata("robustbench")
        # (an email Message, whose payload is the README: the PackageMetadata protocol names no payload)
        payload = meta.get_payload() if isinstance(meta, email.message.Message) else None
    except metadata.PackageNotFoundError:
        return {}
    text = payload if isinstance(payload, str) else ""
    out: dict[tuple[str, str, str], dict[str, float]] = {}
    dataset = threat = None
    for line in text.splitlines():
        if line.startswith("### "):
            dataset, threat = _LEADERBOARD_DATASETS.get(line[4:].strip()), None
        elif line.startswith("#### "):
            threat = _threat_heading(line)
        elif line.startswith("|") and dataset and threat:
            row = _leaderboard_row(line)
            if row:
                out.setdefault((dataset, threat, row[0]), {"clean": row[1], "robust": row[2]})
    return out
