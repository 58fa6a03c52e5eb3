"""The real CIFAR-10 JPEG archive of the mirror, prepared and checked."""

import os
from pathlib import Path

import pytest
import torch

from study.data.cifar10 import (
    JPEG_ARCHIVE,
    load_cifar10_jpeg,
)

# The real archive, where a mirror is set (CI sets one; README, "Data").
REAL_JPEG = Path(os.environ.get("STUDY_DATA_MIRROR") or "/nonexistent", "cifar10-jpeg", "cifar10-jpeg.tar.gz")


@pytest.mark.skipif(not REAL_JPEG.is_file(), reason=f"{REAL_JPEG} is not present")
def test_real_jpeg_archive():
    splits = load_cifar10_jpeg(REAL_JPEG)
    assert splits.train_x.shape == (50000, 3, 32, 32)
    assert splits.test_x.shape == (10000, 3, 32, 32)
    assert torch.bincount(splits.train_y).tolist() == [5000] * 10
    assert torch.bincount(splits.test_y).tolist() == [1000] * 10
    # Per-channel means of the CIFAR-10 training set are well known (0.4914, 0.4822, 0.4465).
    means = splits.train_x.float().mean(dim=(0, 2, 3)) / 255
    assert torch.allclose(means, torch.tensor([0.4914, 0.4822, 0.4465]), atol=0.003)
    assert JPEG_ARCHIVE.filename == REAL_JPEG.name
