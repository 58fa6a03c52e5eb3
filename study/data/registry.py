"""Which datasets the study knows, their variants, and where each variant comes from.

Adding a dataset takes a `DATASETS` entry plus a `SOURCES` entry per variant naming its
archives and the function that turns the fetched archive paths into `Splits`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from study.data import cifar10, cifar100, imagenet, mnist, svhn, tinyimagenet
from study.data.download import ArchiveSpec
from study.data.splits import Splits
from study.data.synthetic import make_synthetic


@dataclass(frozen=True)
class DatasetInfo:
    """Static facts about a dataset; `variants[0]` is the default variant.

    `class_names` None means the names come with the data (TinyImageNet's words.txt,
    ImageNet's synset list). `superclass_names` and `superclass_of` (one superclass index
    per class) group classes, for datasets that define such groups (CIFAR-100)."""

    name: str
    num_classes: int
    channels: int
    image_size: int
    class_names: tuple[str, ...] | None
    variants: tuple[str, ...]
    superclass_names: tuple[str, ...] = ()
    superclass_of: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.superclass_of and (
            len(self.superclass_of) != self.num_classes
            or not all(0 <= s < len(self.superclass_names) for s in self.superclass_of)
        ):
            raise ValueError(f"{self.name}: superclass_of must give a superclass per class")
        if self.class_names is not None and len(self.class_names) != self.num_classes:
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
    generator's keyword options instead. A `manual` source is placed by hand (no download
    is possible): `load(raw_dir, mirror, **options)` finds and reads it."""

    archives: tuple[ArchiveSpec, ...]
    load: Callable[..., Splits]
    manual: bool = False


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
    "svhn": DatasetInfo(
        name="svhn",
        num_classes=10,
        channels=3,
        image_size=32,
        class_names=svhn.CLASS_NAMES,
        variants=("official",),
    ),
    "cifar100": DatasetInfo(
        name="cifar100",
        num_classes=100,
        channels=3,
        image_size=32,
        class_names=cifar100.CLASS_NAMES,
        variants=("official",),
        superclass_names=cifar100.SUPERCLASS_NAMES,
        superclass_of=cifar100.FINE_TO_COARSE,
    ),
    "tinyimagenet": DatasetInfo(
        name="tinyimagenet",
        num_classes=tinyimagenet.NUM_CLASSES,
        channels=3,
        image_size=tinyimagenet.IMAGE_SIZE,
        class_names=None,
        variants=("official",),
    ),
    # Evaluation only (validation set, placed by hand), for pretrained models.
    "imagenet": DatasetInfo(
        name="imagenet",
        num_classes=imagenet.NUM_CLASSES,
        channels=3,
        image_size=224,
        class_names=None,
        variants=("val",),
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
    ("svhn", "official"): DataSource(
        archives=(svhn.TRAIN_ARCHIVE, svhn.TEST_ARCHIVE), load=svhn.load_svhn
    ),
    ("cifar100", "official"): DataSource(archives=(cifar100.ARCHIVE,), load=cifar100.load_cifar100),
    ("tinyimagenet", "official"): DataSource(
        archives=(tinyimagenet.ARCHIVE,), load=tinyimagenet.load_tinyimagenet
    ),
    ("imagenet", "val"): DataSource(archives=(), load=imagenet.prepare_imagenet, manual=True),
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


def get_superclasses(name: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(superclass names, superclass index of every class) of `name`; ValueError naming the
    datasets that have superclasses when it has none."""
    info = get_dataset_info(name)
    if not info.superclass_of:
        having = sorted(n for n, i in DATASETS.items() if i.superclass_of)
        raise ValueError(f"dataset {name!r} has no superclasses; datasets with them: {having}")
    return info.superclass_names, info.superclass_of
