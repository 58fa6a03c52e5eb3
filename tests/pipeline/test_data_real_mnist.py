"""The real MNIST files of the mirror, prepared and loaded (the mirror holds the archives)."""

import os
from pathlib import Path

import pytest
import torch

from study.data.prepared import load_prepared, prepare_dataset

# The real files, where a mirror is set (CI sets one; README, "Data").
REAL_MIRROR = Path(os.environ.get("STUDY_DATA_MIRROR") or "/nonexistent")


@pytest.mark.skipif(not (REAL_MIRROR / "mnist").is_dir(), reason=f"{REAL_MIRROR}/mnist absent")
def test_real_mnist_loads_through_the_mirror(tmp_path):
    out = tmp_path / "mnist.pt"
    prepare_dataset("mnist", "official", tmp_path / "raw", REAL_MIRROR, out, progress=False)
    splits = load_prepared(out)
    assert splits.train_x.shape == (60000, 1, 28, 28)
    assert splits.test_x.shape == (10000, 1, 28, 28)
    assert torch.bincount(splits.test_y).tolist() == [
        980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009
    ]
    # The well-known MNIST training mean pixel value is 0.1307.
    assert abs(splits.train_x.float().mean().item() / 255 - 0.1307) < 1e-3
