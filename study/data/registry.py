"""Which datasets the study knows, their variants, and where each variant comes from.

Adding a dataset takes a `DATASETS` entry plus a `SOURCES` entry per variant naming its
archives and the function that turns the fetched archive paths into `Splits`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from study.data import cifar10, mnist
from study.data.download import ArchiveSpec
from study.data.prepared import Splits
from study.data.synthetic import make_synthetic


@dataclass(frozen=True)
class DatasetInfo:
    """Static facts about a dataset; `variants[0]` is the default variant."""

    name: str
    num_classes: int
    channels: int
    image_size: int
    class_names: tuple[str, ...]
    variants: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.class_names) != self.num_classes:
            raise ValueError(
                f"{self.name}: {len(self.class_names)} class names for {self.num_classes} classes"
            )
        if not self.variants:
            raise ValueError(f"{self.name}: at least one variant is needed")

    @property
    def default_variant(self) -> str:
        return self.variants[0]


@dataclass(frozen=True)
class DataSource:
    """How to obtain one variant. `load` gets the fetched archive paths positionally, in
    the order of `archives`; a source with no archives is generated, and `load` gets the
    generator's keyword options instead."""

    archives: tuple[ArchiveSpec, ...]
    load: Callable[..., Splits]


DATASETS: dict[str, DatasetInfo] = {
    "cifar10": DatasetInfo(
        name="cifar10",
        num_classes=10,
        channels=3,
        image_size=32,
        class_names=cifar10.CLASS_NAMES,
        variants=("official", "jpeg"),
    ),
    "mnist": DatasetInfo(
        name="mnist",
        num_classes=10,
        channels=1,
        image_size=28,
        class_names=mnist.CLASS_NAMES,
        variants=("official",),
    ),
    "synthetic": DatasetInfo(
        name="synthetic",
        num_classes=10,
        channels=3,
        image_size=32,
        class_names=tuple(f"class{i}" for i in range(10)),
        variants=("default",),
    ),
}

SOURCES: dict[tuple[str, str], DataSource] = {
    ("cifar10", "official"): DataSource(
        archives=(cifar10.OFFICIAL_ARCHIVE,), load=cifar10.load_cifar10_official
    ),
    ("cifar10", "jpeg"): DataSource(
        archives=(cifar10.JPEG_ARCHIVE,), load=cifar10.load_cifar10_jpeg
    ),
    ("mnist", "official"): DataSource(archives=mnist.ARCHIVES, load=mnist.load_mnist),
    ("synthetic", "default"): DataSource(archives=(), load=make_synthetic),
}


def get_dataset_info(name: str) -> DatasetInfo:
    """The registry entry for `name`; ValueError listing the known datasets otherwise."""
    try:
        return DATASETS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown dataset {name!r}; valid datasets: {', '.join(sorted(DATASETS))}"
        ) from None


def check_variant(name: str, variant: str) -> None:
    """Raise ValueError unless `variant` is one of the variants of dataset `name`."""
    info = get_dataset_info(name)
    if variant not in info.variants:
        raise ValueError(
            f"unknown variant {variant!r} of dataset {name!r}; valid variants: "
            f"{', '.join(info.variants)}"
        )


def get_source(name: str, variant: str) -> DataSource:
    """Archives and loader for one dataset variant."""
    check_variant(name, variant)
    return SOURCES[name, variant]
