"""Where the inputs that a user places by hand are looked for (the ImageNet validation set),
free of torch: the plan (study.config.zoo) asks whether they are there before any job runs,
and the loader (study.data.imagenet) reads what this finds."""

from __future__ import annotations

from pathlib import Path

from study.data.archives import IMAGENET_DEVKIT, IMAGENET_VAL

IMAGENET_FOLDER = "imagenet"


def imagenet_roots(raw_dir: str | Path, mirror: str | Path | None) -> list[Path]:
    """The folders searched, in order: <raw_dir>/imagenet, then <mirror>/imagenet."""
    return [Path(raw_dir) / IMAGENET_FOLDER] + ([Path(mirror) / IMAGENET_FOLDER] if mirror is not None else [])


def locate_imagenet(raw_dir: str | Path, mirror: str | Path | None) -> tuple[Path, ...] | None:
    """(val folder,) or (val tar, devkit) from the first root that holds either form; None if none does."""
    for root in imagenet_roots(raw_dir, mirror):
        if (root / "val").is_dir():
            return (root / "val",)
        if (root / IMAGENET_VAL.filename).is_file() and (root / IMAGENET_DEVKIT.filename).is_file():
            return root / IMAGENET_VAL.filename, root / IMAGENET_DEVKIT.filename
    return None


def imagenet_how_to_place(raw_dir: str | Path) -> str:
    """One line: what to put where (the first root), or which env var / config key names a mirror."""
    first = Path(raw_dir) / IMAGENET_FOLDER
    return (f"put {IMAGENET_VAL.filename} + {IMAGENET_DEVKIT.filename} in {first}/, or the images at "
            f"{first}/val/<wnid>/*.JPEG (or the same imagenet/ folder in $STUDY_DATA_MIRROR / data.mirror)")
