"""SVHN, CIFAR-100, TinyImageNet and the hand-placed ImageNet validation set, each loaded
from a tiny copy in its official format."""

import numpy as np
import pytest
import torch
from helpers.data_archives import (
    digest,
    flat_jpeg,
    make_cifar100_archive,
    make_svhn_mat,
    make_tinyimagenet_zip,
    tiny_colour,
)
from PIL import Image

from study.data import cifar100, imagenet, registry, svhn, tinyimagenet
from study.data.download import ArchiveSpec
from study.data.prepared import load_prepared, prepare_dataset


def _use_archives(monkeypatch, key, specs, load):
    """Point a registry source at test archives (same loader, checksums of the test files)."""
    monkeypatch.setitem(registry.SOURCES, key, registry.DataSource(archives=tuple(specs), load=load))


def test_svhn_mat_files_load_with_label_10_as_digit_0(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror" / "svhn"
    mirror.mkdir(parents=True)
    train_x, train_digits = make_svhn_mat(mirror / "train_32x32.mat", 12, seed=1)
    test_x, test_digits = make_svhn_mat(mirror / "test_32x32.mat", 10, seed=2)
    specs = [
        ArchiveSpec(s.filename, None, md5=digest(mirror / s.filename, "md5"), mirror_subdirs=("svhn",))
        for s in (svhn.TRAIN_ARCHIVE, svhn.TEST_ARCHIVE)
    ]
    _use_archives(monkeypatch, ("svhn", "official"), specs, svhn.load_svhn)
    out = tmp_path / "svhn.pt"
    prepare_dataset("svhn", "official", tmp_path / "raw", tmp_path / "mirror", out, progress=False)
    splits = load_prepared(out)
    assert splits.train_x.shape == (12, 3, 32, 32)
    assert np.array_equal(splits.train_x.numpy(), train_x)
    assert np.array_equal(splits.test_x.numpy(), test_x)
    assert splits.test_y.tolist() == test_digits.tolist()
    assert 0 in splits.train_y.tolist() and 10 not in splits.train_y.tolist()
    assert svhn.TRAIN_ARCHIVE.md5 == "e26dedcc434d2e4c54c9b2d4a06d8373"


def test_svhn_out_of_range_label_is_named(tmp_path):
    from scipy.io import savemat

    savemat(str(tmp_path / "bad.mat"), {"X": np.zeros((32, 32, 3, 1), np.uint8), "y": np.array([[11]])})
    with pytest.raises(ValueError, match=r"labels span 11\.\.11, expected 1\.\.10"):
        svhn.read_svhn_mat(tmp_path / "bad.mat")


def test_cifar100_fine_labels_and_superclasses(tmp_path, monkeypatch):
    path, contents = make_cifar100_archive(
        tmp_path / "mirror" / cifar100.ARCHIVE.filename, list(cifar100.CLASS_NAMES),
        list(cifar100.SUPERCLASS_NAMES), list(cifar100.FINE_TO_COARSE), 2, 1, seed=5,
    )
    spec = ArchiveSpec(cifar100.ARCHIVE.filename, None, md5=digest(path, "md5"))
    _use_archives(monkeypatch, ("cifar100", "official"), [spec], cifar100.load_cifar100)
    out = tmp_path / "c100.pt"
    prepare_dataset("cifar100", "official", tmp_path / "raw", tmp_path / "mirror", out, progress=False)
    splits = load_prepared(out)
    assert np.array_equal(splits.train_x.numpy(), contents["train_x"])
    assert np.array_equal(splits.test_y.numpy(), contents["test_y"])
    assert splits.meta["superclass_names"][0] == "aquatic_mammals"
    fine_to_coarse = splits.meta["fine_to_coarse"]
    names = splits.class_names
    # Every superclass holds five fine classes; e.g. whale is an aquatic mammal, tulip a flower.
    assert np.bincount(fine_to_coarse).tolist() == [5] * 20
    assert splits.meta["superclass_names"][fine_to_coarse[names.index("whale")]] == "aquatic_mammals"
    assert splits.meta["superclass_names"][fine_to_coarse[names.index("tulip")]] == "flowers"
    assert registry.get_superclasses("cifar100") == (cifar100.SUPERCLASS_NAMES, cifar100.FINE_TO_COARSE)
    with pytest.raises(ValueError, match="no superclasses; datasets with them: \\['cifar100'\\]"):
        registry.get_superclasses("cifar10")


def test_cifar100_inconsistent_coarse_label_is_rejected(tmp_path):
    path, _ = make_cifar100_archive(
        tmp_path / "c.tar.gz", list(cifar100.CLASS_NAMES), list(cifar100.SUPERCLASS_NAMES),
        list(cifar100.FINE_TO_COARSE), corrupt_coarse=True,
    )
    with pytest.raises(ValueError, match="with coarse label"):
        cifar100.load_cifar100(path)


WNIDS = [f"n{1000 + 7 * k:08d}" for k in range(200)][::-1]  # wnids.txt is not sorted
NAMES = {w: f"thing{k}, synonym" for k, w in enumerate(WNIDS)}
NAMES[WNIDS[5]] = "crane, bird"
NAMES[WNIDS[9]] = "crane, machine"


def test_tinyimagenet_zip_uses_val_as_test_and_short_names(tmp_path, monkeypatch):
    path = make_tinyimagenet_zip(tmp_path / "mirror" / "tiny-imagenet-200.zip", WNIDS, NAMES, 2, 1)
    spec = ArchiveSpec(tinyimagenet.ARCHIVE.filename, None, md5=digest(path, "md5"))
    _use_archives(monkeypatch, ("tinyimagenet", "official"), [spec], tinyimagenet.load_tinyimagenet)
    out = tmp_path / "tiny.pt"
    prepare_dataset("tinyimagenet", "official", tmp_path / "raw", tmp_path / "mirror", out, progress=False)
    splits = load_prepared(out)
    assert splits.train_x.shape == (400, 3, 64, 64) and splits.test_x.shape == (200, 3, 64, 64)
    assert splits.train_y.tolist() == [k for k in range(200) for _ in range(2)]
    order = sorted(WNIDS)
    assert splits.meta["wnids"] == order
    # Labels follow sorted wnids; images are identified by their flat colour.
    for k in (1, 57, 199):
        colour = splits.train_x[2 * k + 1, :, 10, 10].tolist()
        assert colour == pytest.approx(list(tiny_colour(k, 1, "train")), abs=3)
        assert splits.test_x[k, :, 5, 5].tolist() == pytest.approx(list(tiny_colour(k, 0, "val")), abs=3)
    first = splits.train_x[0, :, 3, 3].tolist()
    assert first[0] == first[1] == first[2]  # grayscale JPEG converted to RGB
    assert splits.class_names[order.index(WNIDS[0])] == "thing0"
    assert splits.class_names[order.index(WNIDS[5])] == f"crane ({WNIDS[5]})"


def _imagenet_folder(root, wnids, per_class, sizes=((200, 150), (120, 220))):
    val = root / "imagenet" / "val"
    for k, wnid in enumerate(wnids):
        (val / wnid).mkdir(parents=True)
        for i in range(per_class):
            w, h = sizes[i % len(sizes)]
            # A 3% black frame: inside the 12.5% that the 256 -> 224 centre crop cuts away.
            img = Image.new("RGB", (w, h), (0, 0, 0))
            bw, bh = w * 3 // 100, h * 3 // 100
            img.paste((30 * k + 20, 40 * i + 30, 90), (bw, bh, w - bw, h - bh))
            img.save(val / wnid / f"ILSVRC2012_val_{k * 10 + i:08d}.JPEG", quality=95)
    return val


def test_imagenet_folder_is_resized_center_cropped_and_subset(tmp_path):
    wnids = ["n03000000", "n01000000", "n02000000"]
    val = _imagenet_folder(tmp_path / "raw", wnids, 3)
    (val.parent / imagenet.SYNSET_FILE).write_text(
        "n01000000 tench, Tinca tinca\nn02000000 goldfish\nn03000000 crane\n"
    )
    splits = imagenet.load_imagenet_val(val, per_class=2, image_size=64, expected_classes=3)
    assert splits.test_x.shape == (6, 3, 64, 64) and splits.train_x.shape == (0, 3, 64, 64)
    assert splits.meta["resize"] == 73  # 64 * 256 / 224
    assert splits.test_y.tolist() == [0, 0, 1, 1, 2, 2]
    assert splits.class_names == ["tench", "goldfish", "crane"]
    # Sorted wnids: n01.. (made as k=1) is label 0. The crop holds only the coloured
    # inside, for landscape and portrait images alike; a squashed resize would keep the frame.
    for row, (k, i) in enumerate([(1, 0), (1, 1), (2, 0), (2, 1)]):
        colour = torch.tensor([30 * k + 20, 40 * i + 30, 90], dtype=torch.float32).view(3, 1, 1)
        diff = (splits.test_x[row].float() - colour).abs()
        assert diff.max() <= 8, (row, diff.max())


def test_missing_imagenet_says_what_to_place_where(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        prepare_dataset("imagenet", "val", tmp_path / "raw", tmp_path / "mirror", tmp_path / "i.pt",
                        options={"per_class": 1})
    text = str(err.value)
    assert f"Searched: {tmp_path / 'raw' / 'imagenet'}, {tmp_path / 'mirror' / 'imagenet'}." in text
    assert f"{tmp_path / 'raw' / 'imagenet'}/val/<wnid>/<file>.JPEG" in text
    assert "ILSVRC2012_img_val.tar and ILSVRC2012_devkit_t12.tar.gz" in text
    assert not (tmp_path / "i.pt").exists()


def test_imagenet_with_wrong_class_count_is_rejected(tmp_path):
    _imagenet_folder(tmp_path / "raw", ["n01000000", "n02000000"], 1)
    with pytest.raises(ValueError, match="holds 2 class folders, expected 1000"):
        prepare_dataset("imagenet", "val", tmp_path / "raw", None, tmp_path / "i.pt")


def test_registry_lists_the_new_datasets():
    assert registry.get_dataset_info("svhn").class_names == tuple("0123456789")
    info = registry.get_dataset_info("tinyimagenet")
    assert (info.num_classes, info.image_size, info.class_names) == (200, 64, None)
    assert registry.get_source("imagenet", "val").manual
    assert registry.get_source("cifar100", "official").archives[0].md5 == "eb9058c3a382ffc7106e4002c42a8d85"
    assert torch.tensor(registry.get_dataset_info("cifar100").superclass_of).bincount().tolist() == [5] * 20


def test_flat_jpeg_helper_is_decodable():
    assert flat_jpeg((1, 2, 3), (4, 4))[:2] == b"\xff\xd8"


def _official_imagenet(folder, truth, by_id):
    """ILSVRC2012_img_val.tar (flat JPEGs) and a devkit with meta.mat and the ground truth;
    image n has colour (20 * n, 90, 160) at its centre."""
    import io
    import tarfile

    from helpers.data_archives import write_tar_gz
    from scipy.io import savemat

    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / imagenet.VAL_TAR.filename, "w") as tar:
        for n in range(1, len(truth) + 1):
            data = flat_jpeg((20 * n, 90, 160), (40, 30))
            info = tarfile.TarInfo(f"ILSVRC2012_val_{n:08d}.JPEG")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    dtype = [("ILSVRC2012_ID", "O"), ("WNID", "O"), ("words", "O"), ("num_children", "O")]
    rows = [(i + 1, w, name, 0) for i, (w, name) in enumerate(by_id)]
    rows.append((1001, "n00000001", "entity", 3))  # an inner WordNet node, not a class
    meta = io.BytesIO()
    savemat(meta, {"synsets": np.array(rows, dtype=dtype)})
    write_tar_gz(folder / imagenet.DEVKIT.filename, [
        ("ILSVRC2012_devkit_t12/data/meta.mat", meta.getvalue()),
        ("ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt",
         "".join(f"{t}\n" for t in truth).encode()),
    ])
    return folder / imagenet.VAL_TAR.filename, folder / imagenet.DEVKIT.filename


def test_official_imagenet_tar_and_devkit(tmp_path):
    by_id = [("n03000000", "crane"), ("n01000000", "tench, Tinca tinca"), ("n02000000", "goldfish")]
    truth = [1, 2, 3, 1, 2, 3, 2, 1, 3]
    val_tar, devkit = _official_imagenet(tmp_path / "raw" / "imagenet", truth, by_id)
    assert imagenet.find_imagenet(tmp_path / "raw", None) == (val_tar, devkit)
    splits = imagenet.load_imagenet_tar(val_tar, devkit, per_class=2, image_size=16, expected_classes=3)
    # Labels follow sorted wnids: n01 (ILSVRC id 2) = 0, n02 (id 3) = 1, n03 (id 1) = 2.
    assert splits.class_names == ["tench", "goldfish", "crane"]
    assert splits.test_y.tolist() == [0, 0, 1, 1, 2, 2]
    # The first two images of each class in file order: id 2 -> images 2, 5; id 3 -> 3, 6; id 1 -> 1, 4.
    red = splits.test_x[:, 0, 8, 8].tolist()
    assert red == pytest.approx([40, 100, 60, 120, 20, 80], abs=4)
    with pytest.raises(ValueError, match="does not match the official file"):
        imagenet.prepare_imagenet(tmp_path / "raw", None, per_class=1)
