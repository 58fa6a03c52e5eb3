"""MNIST from its four official IDX files (gzip-compressed, read without extracting).

IDX: a big-endian header (two zero bytes, a type code, the number of dimensions, then one
uint32 size per dimension) followed by the raw array. MNIST images are uint8 (N, 28, 28)
(type 0x08, 3 dims) and labels uint8 (N,) (type 0x08, 1 dim)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import torch

from study.data import archives
from study.data.classes import DIGIT_CLASS_NAMES
from study.data.splits import Splits

CLASS_NAMES = DIGIT_CLASS_NAMES
IMAGE_SHAPE = (1, 28, 28)

ARCHIVES = archives.MNIST

_UBYTE = 0x08


def read_idx(path: str | Path) -> np.ndarray:
    """A uint8 IDX array from a gzip-compressed file; ValueError naming the file otherwise."""
    path = Path(path)
    with gzip.open(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path} is not an IDX file (its first two bytes must be zero)")
    dtype_code, ndim = data[2], data[3]
    if dtype_code != _UBYTE:
        raise ValueError(f"{path} holds IDX type 0x{dtype_code:02x}; MNIST files are 0x08 (uint8)")
    header = 4 + 4 * ndim
    shape = struct.unpack(f">{ndim}I", data[4:header])
    expected = int(np.prod(shape))
    if len(data) - header != expected:
        raise ValueError(
            f"{path}: header announces shape {shape} ({expected} bytes) but "
            f"{len(data) - header} data bytes follow"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def _split(images_path: Path, labels_path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.ndim != 3 or images.shape[1:] != IMAGE_SHAPE[1:]:
        raise ValueError(f"{images_path} holds images of shape {images.shape[1:]}, expected 28x28")
    if labels.ndim != 1 or len(labels) != len(images):
        raise ValueError(
            f"{labels_path} holds {labels.shape} labels for {len(images)} images in {images_path}"
        )
    if len(labels) and int(labels.max()) > 9:
        raise ValueError(f"{labels_path} holds label {int(labels.max())}; MNIST labels are 0-9")
    x = torch.from_numpy(images.copy()).unsqueeze(1)
    return x, torch.from_numpy(labels.astype(np.int64))


def load_mnist(
    train_images: str | Path, train_labels: str | Path, test_images: str | Path, test_labels: str | Path
) -> Splits:
    """Load the four files (in the order of `ARCHIVES`) into uint8 (N, 1, 28, 28) splits."""
    train_x, train_y = _split(Path(train_images), Path(train_labels))
    test_x, test_y = _split(Path(test_images), Path(test_labels))
    return Splits(
        train_x=train_x, train_y=train_y, test_x=test_x, test_y=test_y,
        class_names=list(CLASS_NAMES),
        meta={"dataset": "mnist", "variant": "official"},
    )
