
import numpy as np
import pytest
import torch
from helpers.data_archives import (
    cifar10_official_contents,
    jpeg_colour,
    make_cifar10_jpeg_archive,
    make_cifar10_official_archive,
)

from study.data.cifar10 import (
    CLASS_NAMES,
    load_cifar10_jpeg,
    load_cifar10_official,
)


def test_official_archive_loads_exact_pixels_and_order(tmp_path):
    path, _ = make_cifar10_official_archive(tmp_path / "c.tar.gz", 3, 2, seed=4)
    expected = cifar10_official_contents(3, 2, seed=4)
    splits = load_cifar10_official(path)
    assert splits.class_names == list(CLASS_NAMES)
    assert splits.train_x.shape == (30, 3, 32, 32)
    assert splits.test_x.shape == (20, 3, 32, 32)
    for key in ("train_x", "train_y", "test_x", "test_y"):
        assert np.array_equal(getattr(splits, key).numpy(), expected[key]), key
    assert splits.meta["variant"] == "official"


def test_official_archive_missing_batch_is_named(tmp_path):
    path, _ = make_cifar10_official_archive(tmp_path / "c.tar.gz", 1, 1, omit=["data_batch_3"])
    with pytest.raises(ValueError, match="data_batch_3"):
        load_cifar10_official(path)


def test_official_archive_with_other_class_names_is_rejected(tmp_path):
    names = [*CLASS_NAMES[:-1], "lorry"]
    path, _ = make_cifar10_official_archive(tmp_path / "c.tar.gz", 1, 1, label_names=names)
    with pytest.raises(ValueError, match="lorry"):
        load_cifar10_official(path)


def _check_jpeg_splits(splits, per_class_train, per_class_test):
    assert splits.class_names == list(CLASS_NAMES)
    for split, per_class in (("train", per_class_train), ("test", per_class_test)):
        x, y = getattr(splits, f"{split}_x"), getattr(splits, f"{split}_y")
        assert x.dtype == torch.uint8 and x.shape == (10 * per_class, 3, 32, 32)
        assert y.tolist() == [k for k in range(10) for _ in range(per_class)]
        # Each image is flat; its colour says which class folder and file it came from.
        colours = x.float().mean(dim=(2, 3))
        expected = torch.tensor(
            [jpeg_colour(split, k, i) for k in range(10) for i in range(per_class)],
            dtype=torch.float32,
        )
        assert (colours - expected).abs().max() < 4


@pytest.mark.parametrize("top_folder", ["cifar10-jpeg", None])
def test_jpeg_archive_loads_in_class_and_file_order(tmp_path, top_folder):
    path, _ = make_cifar10_jpeg_archive(
        tmp_path / "j.tar.gz",
        12,
        3,
        top_folder=top_folder,
        extra_members={"README.txt": b"not an image"},
    )
    splits = load_cifar10_jpeg(path)
    _check_jpeg_splits(splits, 12, 3)
    assert splits.meta["variant"] == "jpeg"


def test_jpeg_missing_class_folder_is_named(tmp_path):
    classes = [c for c in CLASS_NAMES if c != "frog"]
    path, _ = make_cifar10_jpeg_archive(tmp_path / "j.tar.gz", 1, 1, classes=classes)
    with pytest.raises(ValueError, match="train/frog"):
        load_cifar10_jpeg(path)


def test_jpeg_unknown_class_folder_lists_valid_classes(tmp_path):
    path, _ = make_cifar10_jpeg_archive(
        tmp_path / "j.tar.gz", 1, 1, classes=[*CLASS_NAMES, "unicorn"]
    )
    with pytest.raises(ValueError, match="unicorn") as err:
        load_cifar10_jpeg(path)
    assert "airplane, automobile" in str(err.value)


@pytest.mark.parametrize(
    ("size", "mode", "found"), [((32, 31), "RGB", "32x31 RGB"), ((32, 32), "L", "32x32 L")]
)
def test_jpeg_wrong_size_or_mode_is_rejected(tmp_path, size, mode, found):
    path, _ = make_cifar10_jpeg_archive(tmp_path / "j.tar.gz", 1, 1, image_size=size, mode=mode)
    with pytest.raises(ValueError, match=found):
        load_cifar10_jpeg(path)


def test_jpeg_image_outside_layout_is_rejected(tmp_path):
    path, _ = make_cifar10_jpeg_archive(
        tmp_path / "j.tar.gz", 1, 1, extra_members={"stray/x.jpg": b""}
    )
    with pytest.raises(ValueError, match="stray/x.jpg"):
        load_cifar10_jpeg(path)


