"""Prepared datasets: uint8 image tensors plus labels, stored in one file per dataset
variant so that training and evaluation never touch the raw archives."""

from __future__ import annotations

import os
import pickle
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from study.data.download import fetch_archive, resolve_mirror
from study.data.registry import check_variant, get_dataset_info, get_source
from study.data.splits import Splits
from study.io import atomic_torch_save, load_torch

PREPARED_FORMAT = "study.prepared/1"
PREPARE_COMMAND = "study prepare"

_TENSOR_KEYS = ("train_x", "train_y", "test_x", "test_y")
# What the archive readers (gzip, tarfile, zipfile, pickle, scipy.io, PIL) raise for a damaged file.
_UNREADABLE = (ValueError, OSError, EOFError, KeyError, IndexError, zlib.error, tarfile.TarError,
               zipfile.BadZipFile, pickle.UnpicklingError, struct.error)


class PreparedDataError(RuntimeError):
    """A prepared dataset file is unreadable or does not hold a valid dataset."""


def _check_plain(value: Any, where: str) -> None:
    """Meta must hold only what torch.load(weights_only=True) can read back."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_plain(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"meta key {where}.{key!r} must be a str")
            _check_plain(item, f"{where}.{key}")
        return
    raise TypeError(
        f"meta value at {where} is a {type(value).__name__}; only str, int, float, bool, None, "
        "lists and dicts can be stored"
    )


def save_prepared(splits: Splits, path: str | os.PathLike) -> None:
    """Write `splits` atomically to `path` (a torch file readable with weights_only=True)."""
    _check_plain(splits.meta, "meta")
    payload: dict[str, Any] = {"format": PREPARED_FORMAT}
    for key in _TENSOR_KEYS:
        # clone() so a view into a larger tensor does not drag its whole storage along.
        payload[key] = getattr(splits, key).detach().cpu().contiguous().clone()
    payload["class_names"] = list(splits.class_names)
    payload["meta"] = splits.meta
    atomic_torch_save(payload, path)


def load_prepared(path: str | os.PathLike) -> Splits:
    """Read a file written by `save_prepared`; errors name the file and how to remake it."""
    path = Path(path)
    remake = f"run `{PREPARE_COMMAND}` to (re)create it"
    if not path.is_file():
        raise FileNotFoundError(f"prepared dataset {path} does not exist; {remake}")
    try:
        payload = load_torch(path, mmap=True)
    except Exception as err:  # torch raises several unrelated types for damaged files
        raise PreparedDataError(
            f"prepared dataset {path} could not be read ({type(err).__name__}: {err}); "
            f"delete it and {remake}"
        ) from err
    if not isinstance(payload, dict) or payload.get("format") != PREPARED_FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise PreparedDataError(
            f"{path} is not a prepared dataset of format {PREPARED_FORMAT} (found {found!r}); "
            f"{remake}"
        )
    missing = [k for k in (*_TENSOR_KEYS, "class_names", "meta") if k not in payload]
    if missing:
        raise PreparedDataError(f"prepared dataset {path} lacks {missing}; {remake}")
    try:
        return Splits(
            **{k: payload[k] for k in _TENSOR_KEYS},
            class_names=payload["class_names"],
            meta=payload["meta"],
        )
    except ValueError as err:
        raise PreparedDataError(f"prepared dataset {path} is invalid: {err}; {remake}") from err


def _add_counts(splits: Splits) -> None:
    for split in ("train", "test"):
        y = getattr(splits, f"{split}_y")
        splits.meta[f"num_{split}"] = len(y)
        splits.meta[f"{split}_per_class"] = torch.bincount(y, minlength=splits.num_classes).tolist()


def _check_loaded(name: str, variant: str, splits: Splits) -> None:
    """Loaded data must match the registry's class list (or count) and image shape."""
    info = get_dataset_info(name)
    if info.class_names is not None and tuple(splits.class_names) != info.class_names:
        raise ValueError(
            f"{name}/{variant} loaded classes {splits.class_names}, expected {info.class_names}"
        )
    if splits.num_classes != info.num_classes:
        raise ValueError(f"{name}/{variant} loaded {splits.num_classes} classes, expected {info.num_classes}")
    # A manually placed set may be prepared at another size (e.g. ImageNet at 224 or less).
    size = splits.meta.get("image_size", info.image_size)
    if splits.image_shape != (info.channels, size, size):
        raise ValueError(
            f"{name}/{variant} loaded images of shape {splits.image_shape}, expected "
            f"{(info.channels, size, size)}"
        )


def _load_archives(name: str, variant: str, load, paths: list[Path]) -> Splits:
    """The loader's result; a damaged archive (one that matches its checksum yet cannot be
    read) gives one error naming the files, unless the loader's own message names one."""
    try:
        return load(*paths)
    except _UNREADABLE as err:
        if isinstance(err, ValueError) and any(str(p) in str(err) for p in paths):
            raise
        files = ", ".join(str(p) for p in paths)
        raise PreparedDataError(
            f"{name}/{variant}: could not read {files} ({type(err).__name__}: {err}); the file is damaged or "
            f"not the {name} {variant} archive: replace it with a good copy and run `{PREPARE_COMMAND}` again"
        ) from err


def prepare_dataset(
    name: str,
    variant: str,
    raw_dir: Path,
    mirror: Path | str | None,
    out: Path,
    synthetic: Mapping[str, Any] | None = None,
    progress: bool = True,
    options: Mapping[str, Any] | None = None,
) -> Splits:
    """Fetch the archives of a dataset variant, load them, and save the result to `out`.

    `synthetic` holds keyword arguments for generated datasets (those without archives);
    datasets loaded from archives ignore it. `options` are keyword arguments of a manually
    placed dataset's loader (e.g. ImageNet's `per_class`)."""
    get_dataset_info(name)  # raises, listing the valid names, for an unknown dataset
    check_variant(name, variant)
    source = get_source(name, variant)
    if source.manual:
        splits = source.load(Path(raw_dir), resolve_mirror(mirror), **dict(options or {}))
        _check_loaded(name, variant, splits)
    elif source.archives:
        paths = [fetch_archive(spec, Path(raw_dir), mirror, progress) for spec in source.archives]
        splits = _load_archives(name, variant, source.load, paths)
        _check_loaded(name, variant, splits)
        splits.meta["archives"] = [
            {"filename": spec.filename, **spec.checksums} for spec in source.archives
        ]
    else:
        splits = source.load(**dict(synthetic or {}))
    splits.meta["dataset"] = name
    splits.meta["variant"] = variant
    _add_counts(splits)
    save_prepared(splits, out)
    return splits
