"""The in-memory dataset of the study: train and test images as uint8 tensors with their
labels (`Splits`), and the class-stratified subsets every step takes of them. Loaders build
a `Splits`; nothing here knows any loader."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class Splits:
    """Train and test images (uint8, N x C x H x W) with int64 labels indexing `class_names`."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    class_names: list[str]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.class_names = list(self.class_names)
        if not self.class_names or not all(isinstance(c, str) for c in self.class_names):
            raise ValueError(f"class_names must be a non-empty list of str, got {self.class_names}")
        if len(set(self.class_names)) != len(self.class_names):
            raise ValueError(f"class_names must be distinct, got {self.class_names}")
        if not isinstance(self.meta, dict):
            raise ValueError(f"meta must be a dict, got {type(self.meta).__name__}")
        for split in ("train", "test"):
            self._check_split(split)
        if self.train_x.shape[1:] != self.test_x.shape[1:]:
            raise ValueError(
                f"train and test images differ in shape: {tuple(self.train_x.shape[1:])} vs "
                f"{tuple(self.test_x.shape[1:])}"
            )

    def _check_split(self, split: str) -> None:
        x, y = getattr(self, f"{split}_x"), getattr(self, f"{split}_y")
        if not isinstance(x, torch.Tensor) or x.dtype != torch.uint8 or x.dim() != 4:
            raise ValueError(
                f"{split}_x must be a uint8 tensor of shape (N, C, H, W), got {_describe(x)}"
            )
        if not isinstance(y, torch.Tensor) or y.dtype != torch.int64 or y.dim() != 1:
            raise ValueError(f"{split}_y must be a 1-D int64 tensor, got {_describe(y)}")
        if len(x) != len(y):
            raise ValueError(f"{split}_x has {len(x)} images but {split}_y has {len(y)} labels")
        if len(y) and (int(y.min()) < 0 or int(y.max()) >= len(self.class_names)):
            raise ValueError(
                f"{split}_y holds labels in [{int(y.min())}, {int(y.max())}]; valid labels are "
                f"0..{len(self.class_names) - 1} for classes {self.class_names}"
            )

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        c, h, w = self.train_x.shape[1:]
        return int(c), int(h), int(w)


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{value.dtype} tensor of shape {tuple(value.shape)}"
    return type(value).__name__


def stratified_subset(
    labels: torch.Tensor,
    per_class: int | None,
    offset: int = 0,
    class_names: Sequence[str] | None = None,
) -> torch.Tensor:
    """Sorted indices of the first `per_class` samples of each class, in dataset order,
    after skipping the first `offset` of each class. `per_class=None` keeps all the rest.

    Classes are the labels present in `labels`; `class_names` only improves error messages."""
    if labels.dim() != 1 or labels.dtype not in (torch.int64, torch.int32, torch.int16):
        raise ValueError(f"labels must be a 1-D integer tensor, got {_describe(labels)}")
    if per_class is not None and per_class < 0:
        raise ValueError(f"per_class must be >= 0 or None, got {per_class}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    labels = labels.cpu().long()
    if len(labels) == 0:
        return torch.zeros(0, dtype=torch.int64)
    if int(labels.min()) < 0:
        raise ValueError(f"labels must be >= 0, found {int(labels.min())}")

    counts = torch.bincount(labels)
    present = torch.nonzero(counts).flatten()
    needed = offset + (per_class or 0)
    for c in present.tolist():
        if int(counts[c]) < needed:
            name = f"{class_names[c]!r} (label {c})" if class_names is not None else f"label {c}"
            wanted = f"{offset} skipped + {per_class} taken" if per_class else f"{offset} skipped"
            raise ValueError(f"class {name} has {int(counts[c])} samples, fewer than {wanted}")

    # Rank of each sample within its class, computed without a per-class loop.
    order = torch.argsort(labels, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.empty_like(labels)
    rank[order] = torch.arange(len(labels)) - starts[labels[order]]
    keep = rank >= offset
    if per_class is not None:
        keep &= rank < offset + per_class
    return torch.nonzero(keep).flatten()
