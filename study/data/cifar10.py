"""CIFAR-10 loaders, reading straight from the archives without extracting them.

Two variants: the official python-pickle archive, and a JPEG image-folder archive
(`train/<class>/NNNN.jpg`) whose pixels went through JPEG compression."""

from __future__ import annotations

import io
import pickle
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from study.data import archives
from study.data.classes import CIFAR10_CLASS_NAMES
from study.data.splits import Splits
from study.io import member_bytes

CLASS_NAMES = CIFAR10_CLASS_NAMES
IMAGE_SHAPE = (3, 32, 32)

OFFICIAL_ARCHIVE = archives.CIFAR10_OFFICIAL
JPEG_ARCHIVE = archives.CIFAR10_JPEG

TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCH = "test_batch"
META_FILE = "batches.meta"


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickler limited to what the CIFAR batches hold (dicts, lists, bytes, numpy arrays),
    so an archive given by path cannot run arbitrary code."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"CIFAR batch refers to {module}.{name}, not allowed")
        return super().find_class(module, name)


def _unpickle(data: bytes, member: str) -> dict[str, Any]:
    # The official batches were pickled by Python 2; "bytes" keeps their str fields as bytes.
    obj = _ArrayUnpickler(io.BytesIO(data), encoding="bytes").load()
    if not isinstance(obj, dict):
        raise ValueError(f"{member} holds a {type(obj).__name__}, expected a dict")
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in obj.items()}


def _batch_arrays(batch: dict[str, Any], member: str) -> tuple[np.ndarray, np.ndarray]:
    if "data" not in batch or "labels" not in batch:
        raise ValueError(f"{member} lacks 'data' or 'labels' (keys: {sorted(batch)})")
    data = np.asarray(batch["data"])
    labels = np.asarray(batch["labels"], dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != int(np.prod(IMAGE_SHAPE)):
        raise ValueError(
            f"{member} data must be uint8 of shape (N, 3072), got {data.dtype} {data.shape}"
        )
    if labels.shape != (len(data),):
        raise ValueError(f"{member} has {len(data)} images but {labels.size} labels")
    if labels.size and (labels.min() < 0 or labels.max() >= len(CLASS_NAMES)):
        raise ValueError(
            f"{member} has labels in [{labels.min()}, {labels.max()}], "
            f"valid 0..{len(CLASS_NAMES) - 1}"
        )
    # Rows are channel-major (1024 red, 1024 green, 1024 blue), each a row-major 32x32 plane.
    return data.reshape(-1, *IMAGE_SHAPE), labels


def read_pickled_members(archive: Path, wanted: list[str], what: str) -> dict[str, dict[str, Any]]:
    """The unpickled members `wanted` (by file name) of a CIFAR python archive, read from the
    tar stream without extracting; each must be present exactly once."""
    found: dict[str, dict[str, Any]] = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            name = member.name.rsplit("/", 1)[-1]
            if member.isfile() and name in wanted:
                if name in found:
                    raise ValueError(f"{archive} holds {name} twice")
                found[name] = _unpickle(member_bytes(tar, member), name)
    missing = [m for m in wanted if m not in found]
    if missing:
        raise ValueError(f"{archive} lacks {missing}; is it the {what} python archive?")
    return found


def load_cifar10_official(archive: str | Path) -> Splits:
    """Load `cifar-10-python.tar.gz`: data_batch_1..5 are the training set, in order."""
    archive = Path(archive)
    found = read_pickled_members(archive, [*TRAIN_BATCHES, TEST_BATCH, META_FILE], "CIFAR-10")

    raw_names = found[META_FILE].get("label_names", [])
    label_names = [n.decode() if isinstance(n, bytes) else n for n in raw_names]
    if tuple(label_names) != CLASS_NAMES:
        raise ValueError(f"{archive} names classes {label_names}, expected {list(CLASS_NAMES)}")

    train = [_batch_arrays(found[b], b) for b in TRAIN_BATCHES]
    test_x, test_y = _batch_arrays(found[TEST_BATCH], TEST_BATCH)
    return Splits(
        train_x=torch.from_numpy(np.concatenate([x for x, _ in train])),
        train_y=torch.from_numpy(np.concatenate([y for _, y in train])),
        test_x=torch.from_numpy(test_x.copy()),
        test_y=torch.from_numpy(test_y),
        class_names=list(CLASS_NAMES),
        meta={"dataset": "cifar10", "variant": "official", "archive": archive.name},
    )


def _image_key(name: str) -> tuple[int, int | str]:
    # Numeric stems sort by value so an unpadded 10000.jpg would still follow 9999.jpg.
    stem = name.rsplit(".", 1)[0]
    return (0, int(stem)) if stem.isdigit() else (1, stem)


def _jpeg_location(member_name: str, archive: Path) -> tuple[str, str, str]:
    """(split, class, file name) of an image member, with or without one top-level folder."""
    # Plain string splitting: pathlib here costs seconds over 60,000 members.
    parts = [p for p in member_name.split("/") if p not in ("", ".")]
    if len(parts) == 4:
        parts = parts[1:]
    if len(parts) != 3 or parts[0] not in ("train", "test"):
        raise ValueError(
            f"{archive}: image {member_name!r} is not at [<top>/]train|test/<class>/<file>.jpg"
        )
    if parts[1] not in CLASS_NAMES:
        raise ValueError(
            f"{archive}: unknown class folder {parts[1]!r} in {member_name!r}; "
            f"valid classes: {', '.join(CLASS_NAMES)}"
        )
    return parts[0], parts[1], parts[2]


def _decode_jpeg(data: bytes, member_name: str, archive: Path) -> bytes:
    """Raw H x W x C pixel bytes of one image, after checking it is 32 x 32 RGB."""
    with Image.open(io.BytesIO(data)) as img:
        if img.mode != "RGB" or img.size != IMAGE_SHAPE[1:]:
            raise ValueError(
                f"{archive}: {member_name} is {img.size[0]}x{img.size[1]} {img.mode}, "
                f"expected 32x32 RGB"
            )
        return img.tobytes()


def load_cifar10_jpeg(archive: str | Path) -> Splits:
    """Load the JPEG variant: labels follow the alphabetical order of the class folders
    (which is the official order), images within a class are sorted by file name."""
    archive = Path(archive)
    images: dict[tuple[str, str], list[tuple[tuple[int, int | str], bytes]]] = {
        (split, c): [] for split in ("train", "test") for c in CLASS_NAMES
    }
    seen: set[str] = set()
    # Streaming mode ("r|gz") reads the archive once, front to back, with no seeking.
    with tarfile.open(archive, "r|gz") as tar:
        for member in tar:
            base = member.name.rsplit("/", 1)[-1]
            if not member.isfile() or base.startswith(".") or not base.lower().endswith(".jpg"):
                continue
            split, cls, fname = _jpeg_location(member.name, archive)
            if f"{split}/{cls}/{fname}" in seen:
                raise ValueError(f"{archive} holds {split}/{cls}/{fname} twice")
            seen.add(f"{split}/{cls}/{fname}")
            pixels = _decode_jpeg(member_bytes(tar, member), member.name, archive)
            images[split, cls].append((_image_key(fname), pixels))

    empty = [f"{split}/{cls}" for (split, cls), items in images.items() if not items]
    if empty:
        raise ValueError(
            f"{archive} has no images in class folders {empty}; every split needs all of "
            f"{', '.join(CLASS_NAMES)}"
        )

    arrays: dict[str, torch.Tensor] = {}
    for split in ("train", "test"):
        xs: list[bytes] = []
        ys: list[np.ndarray] = []
        # CLASS_NAMES is alphabetical, which is how this archive's folders define labels.
        for label, cls in enumerate(CLASS_NAMES):
            items = sorted(images[split, cls], key=lambda item: item[0])
            xs.extend(pixels for _, pixels in items)
            ys.append(np.full(len(items), label, dtype=np.int64))
        # PIL gives H x W x C bytes; the project's tensors are C x H x W.
        hwc = np.frombuffer(b"".join(xs), dtype=np.uint8).reshape(
            len(xs), *IMAGE_SHAPE[1:], IMAGE_SHAPE[0]
        )
        arrays[f"{split}_x"] = torch.from_numpy(hwc.transpose(0, 3, 1, 2).copy())
        arrays[f"{split}_y"] = torch.from_numpy(np.concatenate(ys))
    return Splits(
        **arrays,
        class_names=list(CLASS_NAMES),
        meta={
            "dataset": "cifar10",
            "variant": "jpeg",
            "archive": archive.name,
            # The folder layout cannot record the official interleaving of classes.
            "order": "grouped by class, official order within each class",
        },
    )
