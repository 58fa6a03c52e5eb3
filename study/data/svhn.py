"""SVHN (Netzer et al. 2011), cropped-digits format: `train_32x32.mat` and
`test_32x32.mat`, MATLAB v5 files holding `X` (32, 32, 3, N) uint8 and `y` (N, 1) with
labels 1..10, where 10 stands for the digit 0. The `extra` set is not used."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from study.data import archives
from study.data.classes import DIGIT_CLASS_NAMES
from study.data.splits import Splits

CLASS_NAMES = DIGIT_CLASS_NAMES
IMAGE_SHAPE = (3, 32, 32)

TRAIN_ARCHIVE, TEST_ARCHIVE = archives.SVHN_TRAIN, archives.SVHN_TEST


def read_svhn_mat(path: str | Path) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 images (N, 3, 32, 32) and int64 labels 0..9 of one cropped-digits file."""
    # scipy is imported here so the rest of the package does not need it to load.
    from scipy.io import loadmat

    path = Path(path)
    mat = loadmat(path)
    missing = [k for k in ("X", "y") if k not in mat]
    if missing:
        raise ValueError(f"{path} lacks the variable(s) {missing}; an SVHN file holds X and y")
    x, y = mat["X"], np.asarray(mat["y"]).reshape(-1)
    if x.dtype != np.uint8 or x.ndim != 4 or x.shape[:3] != (32, 32, 3):
        raise ValueError(f"{path}: X is {x.dtype} {x.shape}, expected uint8 (32, 32, 3, N)")
    if len(y) != x.shape[3]:
        raise ValueError(f"{path}: {len(y)} labels for {x.shape[3]} images")
    if len(y) and (int(y.min()) < 1 or int(y.max()) > 10):
        raise ValueError(f"{path}: labels span {int(y.min())}..{int(y.max())}, expected 1..10")
    labels = y.astype(np.int64) % 10  # SVHN writes the digit 0 as label 10
    images = np.ascontiguousarray(x.transpose(3, 2, 0, 1))
    return torch.from_numpy(images), torch.from_numpy(labels)


def load_svhn(train: str | Path, test: str | Path) -> Splits:
    train_x, train_y = read_svhn_mat(train)
    test_x, test_y = read_svhn_mat(test)
    return Splits(
        train_x=train_x, train_y=train_y, test_x=test_x, test_y=test_y,
        class_names=list(CLASS_NAMES), meta={"dataset": "svhn", "variant": "official"},
    )
