"""Tiny ImageNet (CS231n): `tiny-imagenet-200.zip`, 200 classes of 64 x 64 images, 500
training and 50 validation images per class. The official test split has no labels, so the
validation split serves as the test set here.

Layout inside the zip (under `tiny-imagenet-200/`): `wnids.txt` (the 200 WordNet ids),
`words.txt` (wnid, tab, comma-separated names, for all of WordNet),
`train/<wnid>/images/*.JPEG`, `val/images/*.JPEG` and `val/val_annotations.txt` (file name,
tab, wnid, then a bounding box). Labels follow the sorted wnids (the image-folder order
used by torchvision and most published code); class names are the first of each wnid's
names in words.txt."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import torch

from study.data import archives
from study.data.classes import TINYIMAGENET_IMAGE_SIZE, TINYIMAGENET_NUM_CLASSES
from study.data.images import decode_rgb
from study.data.splits import Splits

ARCHIVE = archives.TINYIMAGENET
NUM_CLASSES, IMAGE_SIZE = TINYIMAGENET_NUM_CLASSES, TINYIMAGENET_IMAGE_SIZE


def short_names(wnids: list[str], words: dict[str, str]) -> list[str]:
    """First name of each wnid; a name shared by several wnids gets its wnid appended."""
    missing = [w for w in wnids if w not in words]
    if missing:
        raise ValueError(f"words.txt has no names for {missing[:5]}")
    names = [words[w].split(",")[0].strip() for w in wnids]
    return [f"{n} ({w})" if names.count(n) > 1 else n for n, w in zip(names, wnids, strict=True)]


def _text(zf: zipfile.ZipFile, member: str, archive: Path) -> str:
    try:
        return zf.read(member).decode("utf-8")
    except KeyError:
        raise ValueError(f"{archive} lacks {member}; is it tiny-imagenet-200.zip?") from None


def _read_labels(zf: zipfile.ZipFile, archive: Path) -> tuple[list[str], dict[str, str], dict[str, int]]:
    """(sorted wnids, their words, validation file name -> label)."""
    top = "tiny-imagenet-200/"
    wnids = sorted(w.strip() for w in _text(zf, top + "wnids.txt", archive).split() if w.strip())
    if len(wnids) != NUM_CLASSES or len(set(wnids)) != NUM_CLASSES:
        raise ValueError(f"{archive}: wnids.txt lists {len(set(wnids))} distinct ids, expected 200")
    label = {w: i for i, w in enumerate(wnids)}
    words = {}
    for line in _text(zf, top + "words.txt", archive).splitlines():
        wnid, _, names = line.partition("\t")
        if wnid in label:
            words[wnid] = names
    val_labels = {}
    for line in _text(zf, top + "val/val_annotations.txt", archive).splitlines():
        fields = line.split("\t")
        if len(fields) >= 2:
            if fields[1] not in label:
                raise ValueError(f"{archive}: val_annotations.txt names unknown wnid {fields[1]!r}")
            val_labels[fields[0]] = label[fields[1]]
    return wnids, words, val_labels


def _member_split(name: str, label: dict[str, int], val_labels: dict[str, int], archive: Path):
    """("train" or "test", label) of a JPEG member, or None for one outside the labelled splits."""
    parts = name.split("/")
    if len(parts) == 5 and parts[1] == "train" and parts[3] == "images":
        if parts[2] not in label:
            raise ValueError(f"{archive}: {name} is in an unknown class folder {parts[2]!r}")
        return "train", label[parts[2]]
    if len(parts) == 4 and parts[1:3] == ["val", "images"]:
        if parts[3] not in val_labels:
            raise ValueError(f"{archive}: {name} has no line in val_annotations.txt")
        return "test", val_labels[parts[3]]
    return None  # test/images (unlabelled) and anything else


def load_tinyimagenet(archive: str | Path) -> Splits:
    archive = Path(archive)
    with zipfile.ZipFile(archive) as zf:
        wnids, words, val_labels = _read_labels(zf, archive)
        label = {w: i for i, w in enumerate(wnids)}
        items: dict[str, list[tuple[int, str, np.ndarray]]] = {"train": [], "test": []}
        for info in zf.infolist():
            name = info.filename
            if info.is_dir() or not name.lower().endswith(".jpeg"):
                continue
            where = _member_split(name, label, val_labels, archive)
            if where is not None:
                split, y = where
                items[split].append((y, name.split("/")[-1],
                                     decode_rgb(zf.read(info), f"{archive}:{name}", IMAGE_SIZE)))

    arrays: dict[str, torch.Tensor] = {}
    for split, found in items.items():
        if not found:
            raise ValueError(f"{archive} holds no {split} images at the expected places")
        found.sort(key=lambda item: (item[0], item[1]))  # by class, then file name
        arrays[f"{split}_x"] = torch.from_numpy(np.stack([x for _, _, x in found]))
        arrays[f"{split}_y"] = torch.tensor([y for y, _, _ in found], dtype=torch.int64)
    return Splits(
        **arrays,
        class_names=short_names(wnids, words),
        meta={"dataset": "tinyimagenet", "variant": "official", "wnids": wnids,
              "test_split": "val (the official test split has no labels)"},
    )
