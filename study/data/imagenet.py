"""ImageNet (ILSVRC 2012) validation set, for evaluating pretrained models; nothing is
trained on it here. It cannot be downloaded (the licence requires an account), so it is
placed by hand in `<raw_dir>/imagenet/` (or `<mirror>/imagenet/`), in one of two forms:

* the official files `ILSVRC2012_img_val.tar` and `ILSVRC2012_devkit_t12.tar.gz`
  (md5-verified; labels from the devkit's ground truth, names from its meta.mat), or
* the widely used image-folder layout `val/<wnid>/*.JPEG`: 1000 class folders named by
  WordNet id (n01440764, ...), 50 images each, as `valprep.sh` makes from the tar. An
  optional `LOC_synset_mapping.txt` beside `val/` ("n01440764 tench, Tinca tinca" per
  line) gives readable class names; otherwise the wnids are the names.

Labels follow the sorted wnids, which is the class order of torchvision's and
RobustBench's ImageNet models. Images get the standard evaluation view (shorter side
resized to 256, central 224 x 224 crop) and are stored as uint8; at 50,000 images that is
7.5 GB, so `per_class` keeps only the first images (by file name) of every class."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import numpy as np
import torch

from study.data import archives
from study.data.classes import IMAGENET_NUM_CLASSES
from study.data.download import ArchiveSpec, archive_checksums
from study.data.images import resize_center_crop
from study.data.placed import IMAGENET_FOLDER, imagenet_roots, locate_imagenet
from study.data.splits import Splits
from study.data.tinyimagenet import short_names
from study.io import member_bytes

NUM_CLASSES = IMAGENET_NUM_CLASSES
FOLDER = IMAGENET_FOLDER
SYNSET_FILE = "LOC_synset_mapping.txt"
_EXTENSIONS = (".jpeg", ".jpg", ".png")
VAL_TAR, DEVKIT = archives.IMAGENET_VAL, archives.IMAGENET_DEVKIT


def _placement_help(roots: list[Path]) -> str:
    first = roots[0]
    return (
        "the ImageNet validation set is not in place (it cannot be downloaded; place it by "
        "hand). Searched: " + ", ".join(str(r) for r in roots) + ".\n"
        f"Either put the official {VAL_TAR.filename} and {DEVKIT.filename} in {first}/, or put "
        f"the 50,000 validation images at {first}/val/<wnid>/<file>.JPEG, one folder per class "
        "named by WordNet id (n01440764 ... n15075141, 1000 folders; valprep.sh makes this from "
        f"the tar), optionally with {first / SYNSET_FILE} for class names. A mirror folder "
        "($STUDY_DATA_MIRROR or data.mirror) may hold the same imagenet/ folder."
    )


def find_imagenet(raw_dir: Path, mirror: Path | None) -> tuple[Path, ...]:
    """(val folder,) or (val tar, devkit) from the first of raw_dir and the mirror that has
    either; a message saying exactly what to place where otherwise."""
    found = locate_imagenet(raw_dir, mirror)
    if found is None:
        raise FileNotFoundError(_placement_help(imagenet_roots(raw_dir, mirror)))
    return found


def _verify(path: Path, spec: ArchiveSpec) -> None:
    actual = archive_checksums(path, spec)
    if actual != spec.checksums:
        raise ValueError(
            f"{path} does not match the official file: md5 {actual.get('md5')}, expected {spec.md5}"
        )


def read_devkit(devkit: str | Path) -> tuple[list[str], dict[str, str], list[int]]:
    """(wnids by ILSVRC2012_ID - 1, names by wnid, ILSVRC2012_ID of each validation image)."""
    from scipy.io import loadmat

    devkit = Path(devkit)
    meta = truth = None
    with tarfile.open(devkit, "r:gz") as tar:
        for member in tar:
            if member.name.endswith("data/meta.mat"):
                meta = loadmat(io.BytesIO(member_bytes(tar, member)), squeeze_me=True)["synsets"]
            elif member.name.endswith("data/ILSVRC2012_validation_ground_truth.txt"):
                truth = [int(v) for v in member_bytes(tar, member).split()]
    if meta is None or truth is None:
        raise ValueError(f"{devkit} lacks data/meta.mat or data/ILSVRC2012_validation_ground_truth.txt")
    # meta.mat lists the whole WordNet subtree; the classes are its leaves (no children).
    leaves = sorted((int(s["ILSVRC2012_ID"]), str(s["WNID"]), str(s["words"]))
                    for s in meta if int(s["num_children"]) == 0)
    wnids = [w for _, w, _ in leaves]
    return wnids, {w: words for _, w, words in leaves}, truth


def load_imagenet_tar(
    val_tar: str | Path,
    devkit: str | Path,
    per_class: int | None = None,
    image_size: int = 224,
    resize: int | None = None,
    expected_classes: int = NUM_CLASSES,
) -> Splits:
    """Test split from the official tar, read once front to back (`r|`), decoding only the
    first `per_class` images (in file-name order) of every class."""
    val_tar = Path(val_tar)
    resize = round(image_size * 256 / 224) if resize is None else resize
    by_id, words, truth = read_devkit(devkit)
    if len(by_id) != expected_classes:
        raise ValueError(f"{devkit} defines {len(by_id)} classes, expected {expected_classes}")
    wnids = sorted(by_id)
    label_of_id = {i + 1: wnids.index(w) for i, w in enumerate(by_id)}
    # ILSVRC2012_val_00000001.JPEG is the first line of the ground truth, and so on.
    wanted: dict[str, int] = {}
    taken = [0] * len(wnids)
    for number, class_id in enumerate(truth, start=1):
        label = label_of_id[class_id]
        if per_class is None or taken[label] < per_class:
            wanted[f"ILSVRC2012_val_{number:08d}.JPEG"] = label
            taken[label] += 1
    if per_class is not None and min(taken) < per_class:
        raise ValueError(f"{devkit}: some class has {min(taken)} validation images, fewer than {per_class}")
    found: dict[str, np.ndarray] = {}
    with tarfile.open(val_tar, "r|") as tar:
        for member in tar:
            name = member.name.rsplit("/", 1)[-1]
            if member.isfile() and name in wanted:
                found[name] = resize_center_crop(member_bytes(tar, member), f"{val_tar}:{name}",
                                                 resize, image_size)
    missing = sorted(wanted.keys() - found.keys())
    if missing:
        raise ValueError(f"{val_tar} lacks {len(missing)} images the ground truth lists, e.g. {missing[:3]}")
    order = sorted(wanted, key=lambda n: (wanted[n], n))
    return _splits(
        np.stack([found[n] for n in order]), [wanted[n] for n in order],
        short_names(wnids, words), wnids, str(val_tar), per_class, resize, image_size,
    )


def _class_names(val: Path, wnids: list[str]) -> list[str]:
    mapping = val.parent / SYNSET_FILE
    if not mapping.is_file():
        return list(wnids)
    words = {}
    for line in mapping.read_text().splitlines():
        wnid, _, names = line.strip().partition(" ")
        words[wnid] = names
    return short_names(wnids, words)


def load_imagenet_val(
    val: str | Path,
    per_class: int | None = None,
    image_size: int = 224,
    resize: int | None = None,
    expected_classes: int = NUM_CLASSES,
) -> Splits:
    """Test split from `val/<wnid>/*`; the train split is empty (evaluation only).

    `resize` defaults to image_size * 256 / 224 (256 for 224), the usual ratio."""
    val = Path(val)
    resize = round(image_size * 256 / 224) if resize is None else resize
    if per_class is not None and per_class < 1:
        raise ValueError(f"per_class must be >= 1 or null, got {per_class}")
    wnids = sorted(d.name for d in val.iterdir() if d.is_dir())
    if len(wnids) != expected_classes:
        raise ValueError(
            f"{val} holds {len(wnids)} class folders, expected {expected_classes} (one per wnid)"
        )
    xs: list[np.ndarray] = []
    ys: list[int] = []
    for label, wnid in enumerate(wnids):
        files = sorted(
            f for f in os.listdir(val / wnid) if f.lower().endswith(_EXTENSIONS)
        )
        if per_class is not None:
            if len(files) < per_class:
                raise ValueError(f"{val / wnid} holds {len(files)} images, fewer than per_class={per_class}")
            files = files[:per_class]
        if not files:
            raise ValueError(f"{val / wnid} holds no images")
        for f in files:
            path = val / wnid / f
            xs.append(resize_center_crop(path.read_bytes(), str(path), resize, image_size))
            ys.append(label)
    return _splits(np.stack(xs), ys, _class_names(val, wnids), wnids, str(val), per_class, resize, image_size)


def _splits(
    images: np.ndarray, labels: list[int], class_names: list[str], wnids: list[str], source: str,
    per_class: int | None, resize: int, image_size: int,
) -> Splits:
    test_x = torch.from_numpy(images)
    return Splits(
        train_x=torch.zeros((0, *test_x.shape[1:]), dtype=torch.uint8),
        train_y=torch.zeros(0, dtype=torch.int64),
        test_x=test_x,
        test_y=torch.tensor(labels, dtype=torch.int64),
        class_names=class_names,
        meta={
            "dataset": "imagenet", "variant": "val", "source": source, "wnids": wnids,
            "per_class": per_class, "resize": resize, "image_size": image_size,
            "split_note": "test = ILSVRC2012 validation set; no training split",
        },
    )


def prepare_imagenet(
    raw_dir: Path, mirror: Path | None, per_class: int | None = None, image_size: int = 224
) -> Splits:
    """Manual source of the registry: find the placed files, verify the official ones, load."""
    found = find_imagenet(raw_dir, mirror)
    if len(found) == 1:
        return load_imagenet_val(found[0], per_class, image_size)
    val_tar, devkit = found
    _verify(val_tar, VAL_TAR)
    _verify(devkit, DEVKIT)
    return load_imagenet_tar(val_tar, devkit, per_class, image_size)
