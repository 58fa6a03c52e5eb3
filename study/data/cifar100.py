"""CIFAR-100 from the official python archive `cifar-100-python.tar.gz` (members `train`,
`test`, `meta`), read without extracting. Labels are the 100 fine classes; the 20 coarse
superclasses are kept alongside (`SUPERCLASSES`, and in the prepared data's meta) so that
results can be grouped by superclass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

# The batch format is CIFAR-10's; its restricted unpickler is reused.
from study.data import archives
from study.data.cifar10 import read_pickled_members

# The class and superclass names live where the plan and figure jobs read them without torch.
from study.data.classes import CIFAR100_CLASS_NAMES as CLASS_NAMES
from study.data.classes import CIFAR100_FINE_TO_COARSE as FINE_TO_COARSE
from study.data.classes import CIFAR100_SUPERCLASS_NAMES as SUPERCLASS_NAMES
from study.data.splits import Splits

ARCHIVE = archives.CIFAR100
IMAGE_SHAPE = (3, 32, 32)


_MEMBERS = ("train", "test", "meta")


def _names(meta: dict[str, Any], key: str) -> list[str]:
    return [n.decode() if isinstance(n, bytes) else str(n) for n in meta.get(key, [])]


def _split(batch: dict[str, Any], member: str) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    for key in ("data", "fine_labels", "coarse_labels"):
        if key not in batch:
            raise ValueError(f"{member} lacks {key!r} (keys: {sorted(batch)})")
    data = np.asarray(batch["data"])
    fine = np.asarray(batch["fine_labels"], dtype=np.int64)
    coarse = np.asarray(batch["coarse_labels"], dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != int(np.prod(IMAGE_SHAPE)):
        raise ValueError(f"{member} data must be uint8 (N, 3072), got {data.dtype} {data.shape}")
    if fine.shape != (len(data),) or coarse.shape != (len(data),):
        raise ValueError(f"{member}: {len(data)} images, {fine.size} fine and {coarse.size} coarse labels")
    if fine.size and (fine.min() < 0 or fine.max() >= len(CLASS_NAMES)):
        raise ValueError(f"{member} has fine labels in [{fine.min()}, {fine.max()}], valid 0..99")
    x = torch.from_numpy(data.reshape(-1, *IMAGE_SHAPE).copy())
    return x, torch.from_numpy(fine), coarse


def load_cifar100(archive: str | Path) -> Splits:
    """Fine-label splits; meta holds `superclass_names` and `fine_to_coarse` (per fine label)."""
    archive = Path(archive)
    found = read_pickled_members(archive, list(_MEMBERS), "CIFAR-100")
    fine_names = _names(found["meta"], "fine_label_names")
    coarse_names = _names(found["meta"], "coarse_label_names")
    if tuple(fine_names) != CLASS_NAMES or tuple(coarse_names) != SUPERCLASS_NAMES:
        raise ValueError(
            f"{archive} names {len(fine_names)} fine / {len(coarse_names)} coarse classes that "
            f"differ from CIFAR-100's (first fine: {fine_names[:3]}, expected {list(CLASS_NAMES[:3])})"
        )
    arrays: dict[str, torch.Tensor] = {}
    for split in ("train", "test"):
        x, fine, coarse = _split(found[split], split)
        # The superclass of every sample must be its fine class's superclass.
        wrong = np.nonzero(np.asarray(FINE_TO_COARSE)[fine.numpy()] != coarse)[0]
        if len(wrong):
            i = int(wrong[0])
            raise ValueError(
                f"{archive} {split}[{i}]: fine class {CLASS_NAMES[int(fine[i])]!r} with coarse label "
                f"{int(coarse[i])}, expected {FINE_TO_COARSE[int(fine[i])]} "
                f"({SUPERCLASS_NAMES[FINE_TO_COARSE[int(fine[i])]]})"
            )
        arrays[f"{split}_x"], arrays[f"{split}_y"] = x, fine
    return Splits(
        **arrays,
        class_names=list(CLASS_NAMES),
        meta={
            "dataset": "cifar100",
            "variant": "official",
            "superclass_names": list(SUPERCLASS_NAMES),
            "fine_to_coarse": list(FINE_TO_COARSE),
        },
    )
