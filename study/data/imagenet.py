"""ImageNet (ILSVRC 2012) validation set, for evaluating pretrained models; nothing is
trained on it here. It cannot be downloaded (the licence requires an account), so it is
placed by hand, in the widely used image-folder layout:

    <raw_dir>/imagenet/val/<wnid>/*.JPEG     (or <mirror>/imagenet/val/<wnid>/*.JPEG)

with the 1000 class folders named by WordNet id (n01440764, ...), 50 images each, as made
from ILSVRC2012_img_val.tar and the devkit's ground truth (e.g. by the common
`valprep.sh`). An optional `LOC_synset_mapping.txt` next to `val/` ("n01440764 tench,
Tinca tinca" per line) gives readable class names; otherwise the wnids are the names.

Labels follow the sorted wnids, which is the class order of torchvision's and
RobustBench's ImageNet models. Images get the standard evaluation view (shorter side
resized to 256, central 224 x 224 crop) and are stored as uint8; at 50,000 images that is
7.5 GB, so `per_class` keeps only the first images (by file name) of every class."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from study.data.images import resize_center_crop
from study.data.prepared import Splits
from study.data.tinyimagenet import short_names

NUM_CLASSES = 1000
FOLDER = "imagenet"
SYNSET_FILE = "LOC_synset_mapping.txt"
_EXTENSIONS = (".jpeg", ".jpg", ".png")


def find_val_folder(raw_dir: Path, mirror: Path | None) -> Path:
    """The first `imagenet/val` folder among raw_dir and the mirror; a message saying exactly
    what to place where otherwise."""
    candidates = [Path(raw_dir) / FOLDER / "val"]
    if mirror is not None:
        candidates.append(Path(mirror) / FOLDER / "val")
    for folder in candidates:
        if folder.is_dir():
            return folder
    raise FileNotFoundError(
        "the ImageNet validation set is not in place (it cannot be downloaded; place it by "
        "hand). Searched: " + ", ".join(str(c) for c in candidates) + ".\n"
        f"Put the 50,000 validation images at {candidates[0]}/<wnid>/<file>.JPEG, one folder "
        "per class named by WordNet id (n01440764 ... n15075141, 1000 folders), e.g. by "
        "extracting ILSVRC2012_img_val.tar there and sorting it into class folders with the "
        "devkit's ground truth (valprep.sh does this); optionally add "
        f"{candidates[0].parent / SYNSET_FILE} for class names. A mirror folder "
        "($STUDY_DATA_MIRROR or data.mirror) may hold the same imagenet/val tree."
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
    test_x = torch.from_numpy(np.stack(xs))
    return Splits(
        train_x=torch.zeros((0, *test_x.shape[1:]), dtype=torch.uint8),
        train_y=torch.zeros(0, dtype=torch.int64),
        test_x=test_x,
        test_y=torch.tensor(ys, dtype=torch.int64),
        class_names=_class_names(val, wnids),
        meta={
            "dataset": "imagenet", "variant": "val", "source": str(val), "wnids": wnids,
            "per_class": per_class, "resize": resize, "image_size": image_size,
            "split_note": "test = ILSVRC2012 validation set; no training split",
        },
    )


def prepare_imagenet(
    raw_dir: Path, mirror: Path | None, per_class: int | None = None, image_size: int = 224
) -> Splits:
    """Manual source of the registry: find the placed folder and load it."""
    return load_imagenet_val(find_val_folder(raw_dir, mirror), per_class, image_size)
