"""Tiny dataset archives in the official formats, built on the fly for tests.

Each builder returns the archive path and its checksum, so a test can describe the
archive with its own `ArchiveSpec`. The expected contents are exposed too, so a loader's
output can be compared pixel for pixel (official format) or colour for colour (JPEG)."""

from __future__ import annotations

import gzip
import hashlib
import io
import pickle
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
from PIL import Image

CIFAR10_CLASSES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)


def digest(path: str | Path, algorithm: str) -> str:
    return hashlib.new(algorithm, Path(path).read_bytes()).hexdigest()


def write_tar_gz(path: str | Path, members: Iterable[tuple[str, bytes]]) -> Path:
    """Write (name, content) pairs, in the given order, into a gzipped tar at `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def cifar10_official_contents(
    per_class_train: int, per_class_test: int, seed: int = 0
) -> dict[str, np.ndarray]:
    """Random images (N, 3, 32, 32) and interleaved labels that the official builder stores."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for split, per_class in (("train", per_class_train), ("test", per_class_test)):
        labels = rng.permutation(np.repeat(np.arange(10), per_class))
        out[f"{split}_x"] = rng.integers(0, 256, (len(labels), 3, 32, 32), dtype=np.uint8)
        out[f"{split}_y"] = labels.astype(np.int64)
    return out


def _batch_pickle(x: np.ndarray, y: np.ndarray, label: bytes) -> bytes:
    # Bytes keys and protocol 2, as in the Python 2 pickles of the official archive.
    batch = {
        b"batch_label": label,
        b"labels": [int(v) for v in y],
        b"data": x.reshape(len(x), -1),
        b"filenames": [f"img_{i}.png".encode() for i in range(len(x))],
    }
    return pickle.dumps(batch, protocol=2)


def make_cifar10_official_archive(
    path: str | Path,
    per_class_train: int,
    per_class_test: int,
    seed: int = 0,
    omit: Iterable[str] = (),
    label_names: Iterable[str] = CIFAR10_CLASSES,
) -> tuple[Path, str]:
    """`cifar-10-python.tar.gz` layout with the training set split over data_batch_1..5.

    `omit` leaves members out (e.g. "test_batch"); returns (path, md5)."""
    data = cifar10_official_contents(per_class_train, per_class_test, seed)
    omit = set(omit)
    members: list[tuple[str, bytes]] = [("cifar-10-batches-py/readme.html", b"<html></html>")]
    meta = {
        b"num_cases_per_batch": 10000,
        b"label_names": [n.encode() for n in label_names],
        b"num_vis": 3072,
    }
    members.append(("cifar-10-batches-py/batches.meta", pickle.dumps(meta, protocol=2)))
    chunks = np.array_split(np.arange(len(data["train_y"])), 5)
    for i, idx in enumerate(chunks, start=1):
        blob = _batch_pickle(data["train_x"][idx], data["train_y"][idx], b"training batch")
        members.append((f"cifar-10-batches-py/data_batch_{i}", blob))
    blob = _batch_pickle(data["test_x"], data["test_y"], b"testing batch 1 of 1")
    members.append(("cifar-10-batches-py/test_batch", blob))
    members = [(name, blob) for name, blob in members if name.rsplit("/", 1)[-1] not in omit]
    write_tar_gz(path, members)
    return Path(path), digest(path, "md5")


def jpeg_colour(split: str, label: int, index: int) -> tuple[int, int, int]:
    """The flat colour of image `index` of class `label` in the JPEG test archive; flat
    colours survive JPEG almost exactly, so they identify each image after decoding."""
    return (20 * label + 10, (12 * index + 6) % 250, 60 if split == "train" else 180)


def _jpeg_bytes(colour: tuple[int, int, int], size: tuple[int, int], mode: str) -> bytes:
    img = Image.new("RGB", size, colour)
    if mode != "RGB":
        img = img.convert(mode)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=95)
    return buf.getvalue()


def make_cifar10_jpeg_archive(
    path: str | Path,
    per_class_train: int,
    per_class_test: int,
    top_folder: str | None = "cifar10-jpeg",
    classes: Iterable[str] = CIFAR10_CLASSES,
    image_size: tuple[int, int] = (32, 32),
    mode: str = "RGB",
    extra_members: Mapping[str, bytes] | None = None,
    seed: int = 0,
) -> tuple[Path, str]:
    """Image-folder archive `[top/]train|test/<class>/NNNN.jpg`, members in shuffled order
    so that a loader must sort them. Image i of class k has colour `jpeg_colour(...)`,
    with k the index of the class in CIFAR10_CLASSES. Returns (path, sha256)."""
    prefix = f"{top_folder}/" if top_folder else ""
    members: list[tuple[str, bytes]] = []
    for split, per_class in (("train", per_class_train), ("test", per_class_test)):
        for cls in classes:
            label = CIFAR10_CLASSES.index(cls) if cls in CIFAR10_CLASSES else 0
            for i in range(per_class):
                colour = jpeg_colour(split, label, i)
                name = f"{prefix}{split}/{cls}/{i:04d}.jpg"
                members.append((name, _jpeg_bytes(colour, image_size, mode)))
    order = np.random.default_rng(seed).permutation(len(members))
    members = [members[i] for i in order]
    members.extend((extra_members or {}).items())
    write_tar_gz(path, members)
    return Path(path), digest(path, "sha256")


def idx_bytes(array: np.ndarray) -> bytes:
    """An uint8 array in IDX format: zero bytes, type 0x08, ndim, big-endian uint32 sizes."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(n).to_bytes(4, "big") for n in array.shape
    )
    return header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def make_mnist_files(
    folder: str | Path, n_train: int, n_test: int, seed: int = 0
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The four official `*-idx?-ubyte.gz` files of random MNIST-like data in `folder`.

    Returns the arrays ({train,test}_{x,y}, images (N, 28, 28)) and the md5 of each file's
    uncompressed content, keyed by the .gz file name."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    md5s: dict[str, str] = {}
    for split, prefix, n in (("train", "train", n_train), ("test", "t10k", n_test)):
        arrays[f"{split}_x"] = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        arrays[f"{split}_y"] = (np.arange(n) % 10).astype(np.uint8)
        for kind, key, dims in (("images", "x", 3), ("labels", "y", 1)):
            raw = idx_bytes(arrays[f"{split}_{key}"])
            name = f"{prefix}-{kind}-idx{dims}-ubyte.gz"
            (folder / name).write_bytes(gzip.compress(raw, mtime=0))
            md5s[name] = hashlib.md5(raw).hexdigest()
    return arrays, md5s


def make_svhn_mat(path: str | Path, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A cropped-digits .mat (MATLAB v5) file: X (32, 32, 3, n) uint8, y (n, 1) in 1..10.

    Returns images (n, 3, 32, 32) and digits 0..9 as the loader should give them."""
    from scipy.io import savemat

    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
    digits = np.arange(n) % 10
    mat_y = np.where(digits == 0, 10, digits).reshape(-1, 1).astype(np.uint8)
    savemat(str(path), {"X": images.transpose(2, 3, 1, 0), "y": mat_y}, format="5")
    return images, digits


def make_cifar100_archive(
    path: str | Path, fine_names: list[str], coarse_names: list[str], fine_to_coarse: list[int],
    per_class_train: int = 1, per_class_test: int = 1, seed: int = 0, corrupt_coarse: bool = False,
) -> tuple[Path, dict[str, np.ndarray]]:
    """`cifar-100-python.tar.gz` layout (train, test, meta pickles with bytes keys)."""
    rng = np.random.default_rng(seed)
    members: list[tuple[str, bytes]] = []
    contents: dict[str, np.ndarray] = {}
    for split, per_class in (("train", per_class_train), ("test", per_class_test)):
        fine = rng.permutation(np.repeat(np.arange(len(fine_names)), per_class))
        coarse = np.asarray(fine_to_coarse)[fine]
        if corrupt_coarse:
            coarse = (coarse + 1) % len(coarse_names)
        x = rng.integers(0, 256, (len(fine), 3, 32, 32), dtype=np.uint8)
        contents[f"{split}_x"], contents[f"{split}_y"] = x, fine
        batch = {
            b"filenames": [f"{i}.png".encode() for i in range(len(fine))],
            b"batch_label": split.encode(),
            b"fine_labels": [int(v) for v in fine],
            b"coarse_labels": [int(v) for v in coarse],
            b"data": x.reshape(len(x), -1),
        }
        members.append((f"cifar-100-python/{split}", pickle.dumps(batch, protocol=2)))
    meta = {
        b"fine_label_names": [n.encode() for n in fine_names],
        b"coarse_label_names": [n.encode() for n in coarse_names],
    }
    members.append(("cifar-100-python/meta", pickle.dumps(meta, protocol=2)))
    write_tar_gz(path, members)
    return Path(path), contents


def flat_jpeg(colour: tuple[int, int, int], size: tuple[int, int], mode: str = "RGB") -> bytes:
    return _jpeg_bytes(colour, size, mode)


def tiny_colour(label: int, index: int, split: str) -> tuple[int, int, int]:
    return (label + 30, 30 * index + 15, 60 if split == "train" else 200)


def make_tinyimagenet_zip(
    path: str | Path, wnids: list[str], names: dict[str, str], per_class_train: int = 2,
    per_class_val: int = 1,
) -> Path:
    """`tiny-imagenet-200.zip` layout, with `wnids` (any count) and flat-colour 64x64 JPEGs.

    The training image i of the k-th *sorted* wnid has colour tiny_colour(k, i, "train");
    the first class's images are grayscale JPEGs, as some real ones are."""
    import zipfile

    top = "tiny-imagenet-200/"
    order = sorted(wnids)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(top + "wnids.txt", "\n".join(wnids) + "\n")
        words = "".join(f"{w}\t{names[w]}\n" for w in wnids) + "n99999999\tunrelated, other\n"
        zf.writestr(top + "words.txt", words)
        annotations = []
        for k, wnid in enumerate(order):
            mode = "L" if k == 0 else "RGB"
            for i in range(per_class_train):
                jpeg = flat_jpeg(tiny_colour(k, i, "train"), (64, 64), mode)
                zf.writestr(f"{top}train/{wnid}/images/{wnid}_{i}.JPEG", jpeg)
            zf.writestr(f"{top}train/{wnid}/{wnid}_boxes.txt", "")
            for i in range(per_class_val):
                name = f"val_{k * per_class_val + i}.JPEG"
                zf.writestr(f"{top}val/images/{name}", flat_jpeg(tiny_colour(k, i, "val"), (64, 64)))
                annotations.append(f"{name}\t{wnid}\t0\t0\t63\t63")
        zf.writestr(top + "val/val_annotations.txt", "\n".join(annotations) + "\n")
        zf.writestr(top + "test/images/test_0.JPEG", flat_jpeg((1, 2, 3), (64, 64)))
    return Path(path)
