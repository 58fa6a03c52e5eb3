import gzip

import numpy as np
import pytest
from helpers.data_archives import idx_bytes, make_mnist_files

from study.data import mnist
from study.data.download import ArchiveSpec, ChecksumError, fetch_archive
from study.data.prepared import load_prepared, prepare_dataset


def _specs(md5s: dict[str, str]) -> list[ArchiveSpec]:
    return [
        ArchiveSpec(spec.filename, None, md5=md5s[spec.filename], mirror_subdirs=("mnist",),
                    gunzipped_checksums=True)
        for spec in mnist.ARCHIVES
    ]


def test_idx_files_load_exact_pixels_and_labels(tmp_path):
    arrays, _ = make_mnist_files(tmp_path, 12, 7, seed=3)
    paths = [tmp_path / spec.filename for spec in mnist.ARCHIVES]
    splits = mnist.load_mnist(*paths)
    assert splits.train_x.shape == (12, 1, 28, 28) and splits.test_x.shape == (7, 1, 28, 28)
    assert np.array_equal(splits.train_x[:, 0].numpy(), arrays["train_x"])
    assert np.array_equal(splits.test_y.numpy(), arrays["test_y"].astype(np.int64))
    assert splits.class_names == [str(d) for d in range(10)]


def test_fetch_verifies_uncompressed_content_not_gzip_bytes(tmp_path):
    _, md5s = make_mnist_files(tmp_path / "mirror" / "mnist", 4, 2)
    spec = _specs(md5s)[0]
    src = tmp_path / "mirror" / "mnist" / spec.filename
    # Re-compress with another header (mtime, level): different .gz bytes, same content.
    recompressed = gzip.compress(gzip.decompress(src.read_bytes()), compresslevel=1, mtime=123)
    assert recompressed != src.read_bytes()
    src.write_bytes(recompressed)
    got = fetch_archive(spec, tmp_path / "raw", tmp_path / "mirror", progress=False)
    assert gzip.decompress(got.read_bytes()) == gzip.decompress(recompressed)
    # Different content fails, whatever the compression.
    src.write_bytes(gzip.compress(b"\0\0\x08\x01" + b"\0\0\0\1" + b"\7", mtime=0))
    with pytest.raises(ChecksumError, match="uncompressed|md5 expected"):
        fetch_archive(spec, tmp_path / "raw2", tmp_path / "mirror", progress=False)


def test_prepare_mnist_through_mirror(tmp_path, monkeypatch):
    _, md5s = make_mnist_files(tmp_path / "mirror" / "mnist", 20, 10)
    monkeypatch.setattr(mnist, "ARCHIVES", tuple(_specs(md5s)))
    from study.data import registry

    monkeypatch.setitem(
        registry.SOURCES, ("mnist", "official"),
        registry.DataSource(archives=tuple(_specs(md5s)), load=mnist.load_mnist),
    )
    out = tmp_path / "mnist.pt"
    prepare_dataset("mnist", "official", tmp_path / "raw", tmp_path / "mirror", out, progress=False)
    splits = load_prepared(out)
    assert splits.image_shape == (1, 28, 28)
    assert splits.meta["train_per_class"] == [2] * 10


def test_bad_idx_files_are_named(tmp_path):
    bad_type = tmp_path / "a.gz"
    bad_type.write_bytes(gzip.compress(b"\0\0\x0d\x01\0\0\0\1abcd"))
    with pytest.raises(ValueError, match="0x0d"):
        mnist.read_idx(bad_type)
    short = tmp_path / "b.gz"
    short.write_bytes(gzip.compress(idx_bytes(np.zeros((3, 28, 28), np.uint8))[:-5]))
    with pytest.raises(ValueError, match=r"b.gz: header announces shape \(3, 28, 28\)"):
        mnist.read_idx(short)


def test_official_checksums_are_those_of_the_uncompressed_files():
    by_name = {spec.filename: spec for spec in mnist.ARCHIVES}
    assert by_name["train-images-idx3-ubyte.gz"].md5 == "6bbc9ace898e44ae57da46a324031adb"
    assert by_name["t10k-labels-idx1-ubyte.gz"].md5 == "27ae3e4e09519cfbb04c329615203637"
    assert all(spec.gunzipped_checksums for spec in mnist.ARCHIVES)


