import pytest
import torch
from helpers.data_archives import make_cifar10_jpeg_archive, make_cifar10_official_archive

from study.data import registry
from study.data.cifar10 import load_cifar10_jpeg, load_cifar10_official
from study.data.download import MIRROR_ENV, ArchiveSpec, DataUnavailableError
from study.data.prepared import PreparedDataError, load_prepared, prepare_dataset, save_prepared
from study.data.splits import Splits, stratified_subset


def _splits(n_train=6, n_test=4, classes=("a", "b", "c")):
    k = len(classes)
    return Splits(
        train_x=torch.arange(n_train * 12, dtype=torch.uint8).view(n_train, 3, 2, 2),
        train_y=torch.arange(n_train) % k,
        test_x=torch.zeros(n_test, 3, 2, 2, dtype=torch.uint8),
        test_y=torch.arange(n_test) % k,
        class_names=list(classes),
        meta={"dataset": "toy", "nested": {"counts": [1, 2], "ok": True}},
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"train_x": torch.zeros(6, 3, 2, 2)}, "train_x must be a uint8"),
        ({"train_y": torch.zeros(6, dtype=torch.int32)}, "train_y must be a 1-D int64"),
        ({"test_y": torch.tensor([0, 1, 2, 3])}, r"valid labels are 0\.\.2"),
        ({"test_y": torch.zeros(3, dtype=torch.int64)}, "4 images but test_y has 3"),
        ({"test_x": torch.zeros(4, 1, 2, 2, dtype=torch.uint8)}, "differ in shape"),
        ({"class_names": ["a", "a", "b"]}, "distinct"),
    ],
)
def test_splits_validation(change, message):
    fields = _splits().__dict__ | change
    with pytest.raises(ValueError, match=message):
        Splits(**fields)


def test_save_load_round_trip(tmp_path):
    splits = _splits()
    path = tmp_path / "sub" / "toy.pt"
    save_prepared(splits, path)
    back = load_prepared(path)
    for key in ("train_x", "train_y", "test_x", "test_y"):
        assert torch.equal(getattr(back, key), getattr(splits, key))
    assert back.class_names == ["a", "b", "c"]
    assert back.meta == splits.meta
    assert [p.name for p in path.parent.iterdir()] == ["toy.pt"]


def test_saving_a_view_stores_only_the_view(tmp_path):
    big = torch.zeros(2000, 3, 32, 32, dtype=torch.uint8)
    splits = _splits()
    splits.train_x = big[:6, :, :2, :2].contiguous()[:6]
    splits.test_x = big[:4, :, :2, :2].contiguous()
    save_prepared(splits, tmp_path / "v.pt")
    assert (tmp_path / "v.pt").stat().st_size < 100_000


def test_meta_that_cannot_be_loaded_safely_is_refused(tmp_path):
    splits = _splits()
    splits.meta["path"] = tmp_path
    with pytest.raises(TypeError, match="meta.path"):
        save_prepared(splits, tmp_path / "x.pt")


def test_missing_and_corrupt_files_name_path_and_command(tmp_path):
    missing = tmp_path / "nope.pt"
    with pytest.raises(FileNotFoundError, match="study prepare") as err:
        load_prepared(missing)
    assert str(missing) in str(err.value)

    corrupt = tmp_path / "corrupt.pt"
    save_prepared(_splits(), corrupt)
    corrupt.write_bytes(corrupt.read_bytes()[:200])
    with pytest.raises(PreparedDataError, match="study prepare") as err:
        load_prepared(corrupt)
    assert str(corrupt) in str(err.value)

    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, other)
    with pytest.raises(PreparedDataError, match="not a prepared dataset"):
        load_prepared(other)


def test_stratified_subset_takes_first_per_class_in_order():
    labels = torch.tensor([2, 0, 1, 0, 2, 1, 0, 2, 1, 0])
    idx = stratified_subset(labels, 2)
    assert idx.tolist() == [0, 1, 2, 3, 4, 5]
    assert torch.bincount(labels[idx]).tolist() == [2, 2, 2]
    assert stratified_subset(labels, 1, offset=1).tolist() == [3, 4, 5]
    assert stratified_subset(labels, None, offset=2).tolist() == [6, 7, 8, 9]
    assert stratified_subset(labels, None).tolist() == list(range(10))


def test_stratified_subset_error_names_class_and_counts():
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2])
    with pytest.raises(ValueError, match=r"'cat' \(label 1\) has 2 samples") as err:
        stratified_subset(labels, 2, offset=1, class_names=["dog", "cat", "cow"])
    assert "1 skipped + 2 taken" in str(err.value)
    with pytest.raises(ValueError, match="label 1 has 2 samples"):
        stratified_subset(labels, 3)


def test_prepare_synthetic_writes_file_with_counts(tmp_path):
    out = tmp_path / "prepared" / "synthetic.pt"
    splits = prepare_dataset(
        "synthetic",
        "default",
        tmp_path / "raw",
        None,
        out,
        synthetic={"train_per_class": 4, "test_per_class": 2, "seed": 3},
    )
    back = load_prepared(out)
    assert torch.equal(back.train_x, splits.train_x)
    assert back.meta["dataset"] == "synthetic" and back.meta["variant"] == "default"
    assert back.meta["num_train"] == 40 and back.meta["test_per_class"] == [2] * 10
    assert back.meta["synthetic"]["seed"] == 3


@pytest.mark.parametrize(
    ("variant", "builder", "loader", "algorithm"),
    [
        ("official", make_cifar10_official_archive, load_cifar10_official, "md5"),
        ("jpeg", make_cifar10_jpeg_archive, load_cifar10_jpeg, "sha256"),
    ],
)
def test_prepare_cifar10_from_mirror(tmp_path, monkeypatch, variant, builder, loader, algorithm):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    mirror = tmp_path / "mirror"
    path, checksum = builder(mirror / "cifar10" / "tiny-cifar.tar.gz", 2, 1)
    spec = ArchiveSpec(
        "tiny-cifar.tar.gz", None, mirror_subdirs=("cifar10",), **{algorithm: checksum}
    )
    monkeypatch.setitem(
        registry.SOURCES, ("cifar10", variant), registry.DataSource((spec,), loader)
    )
    out = tmp_path / "cifar10.pt"
    splits = prepare_dataset("cifar10", variant, tmp_path / "raw", mirror, out, progress=False)
    assert (tmp_path / "raw" / "tiny-cifar.tar.gz").read_bytes() == path.read_bytes()
    assert splits.meta["archives"] == [{"filename": "tiny-cifar.tar.gz", algorithm: checksum}]
    assert splits.meta["variant"] == variant and splits.meta["num_train"] == 20
    assert load_prepared(out).meta == splits.meta


def test_prepare_without_data_raises_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    out = tmp_path / "cifar10.pt"
    with pytest.raises(DataUnavailableError, match="cifar10-jpeg.tar.gz"):
        prepare_dataset("cifar10", "jpeg", tmp_path / "raw", None, out, progress=False)
    assert not out.exists()
    with pytest.raises(ValueError, match="valid variants"):
        prepare_dataset("cifar10", "tiff", tmp_path / "raw", None, out)
