"""Which datasets the study knows, their variants, and where each variant comes from.

Adding a dataset is one `DATASETS` row (its class facts, display label and sizes: the params
check, the labels and the job estimates read it), plus a `SOURCES` entry per variant naming its
archives and the function that turns the fetched archive paths into `Splits` (the loader's
own code).

`DATASETS` is plain Python (class facts from `study.data.classes`): planning a study (the
params check, Snakemake's DAG, `study plan`, every table and figure job) reads it without
importing torch, which costs about 3 s of CPU per process. `SOURCES` imports the loaders,
and torch with them, the first time it is used (`sources()`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from study.data import classes

if TYPE_CHECKING:
    from study.data.download import ArchiveSpec
    from study.data.splits import Splits


@dataclass(frozen=True)
class DatasetInfo:
    """Static facts about a dataset; `variants[0]` is the default variant.

    `class_names` None means the names come with the data (TinyImageNet's words.txt,
    ImageNet's synset list). `superclass_names` and `superclass_of` (one superclass index
    per class) group classes, for datasets that define such groups (CIFAR-100).

    `label` is what figures and tables call it (study.labels; empty: the name, title-cased);
    `train_size` and `test_size` the images of its full splits and `zoo_gflops` the forward cost
    of a RobustBench model at its resolution, from which study.resources estimates a job's time
    and memory (None: the estimates' defaults). `balanced`: every class holds as many images of
    each split (`train_per_class`, `test_per_class`), so the plan can check a run's subsets of them
    (study.config.requirements)."""

    name: str
    num_classes: int
    channels: int
    image_size: int
    class_names: tuple[str, ...] | None
    variants: tuple[str, ...]
    superclass_names: tuple[str, ...] = ()
    superclass_of: tuple[int, ...] = ()
    label: str = ""
    train_size: int | None = None
    test_size: int | None = None
    balanced: bool = False
    # an upper bound (CIFAR: WideResNet-94-16 is ~55 GFLOPs; ImageNet: Swin-L ~35)
    zoo_gflops: float = 60.0

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

    @property
    def train_per_class(self) -> int | None:
        """The training images of each class, where every class has as many (None: they differ, or unknown)."""
        return self.train_size // self.num_classes if self.balanced and self.train_size is not None else None

    @property
    def test_per_class(self) -> int | None:
        """The test images of each class, where every class has as many (None: they differ, or unknown)."""
        return self.test_size // self.num_classes if self.balanced and self.test_size is not None else None


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
        class_names=classes.CIFAR10_CLASS_NAMES,
        variants=("official", "jpeg"),
        label="CIFAR-10",
        train_size=50_000,
        test_size=10_000,
        balanced=True,
    ),
    "mnist": DatasetInfo(
        name="mnist",
        num_classes=10,
        channels=1,
        image_size=28,
        class_names=classes.DIGIT_CLASS_NAMES,
        variants=("official",),
        label="MNIST",
        train_size=60_000,
        test_size=10_000,
    ),
    "svhn": DatasetInfo(
        name="svhn",
        num_classes=10,
        channels=3,
        image_size=32,
        class_names=classes.DIGIT_CLASS_NAMES,
        variants=("official",),
        label="SVHN",
        train_size=73_257,
        test_size=26_032,
    ),
    "cifar100": DatasetInfo(
        name="cifar100",
        num_classes=100,
        channels=3,
        image_size=32,
        class_names=classes.CIFAR100_CLASS_NAMES,
        variants=("official",),
        superclass_names=classes.CIFAR100_SUPERCLASS_NAMES,
        superclass_of=classes.CIFAR100_FINE_TO_COARSE,
        label="CIFAR-100",
        train_size=50_000,
        test_size=10_000,
        balanced=True,
    ),
    "tinyimagenet": DatasetInfo(
        name="tinyimagenet",
        num_classes=classes.TINYIMAGENET_NUM_CLASSES,
        channels=3,
        image_size=classes.TINYIMAGENET_IMAGE_SIZE,
        class_names=None,
        variants=("official",),
        label="Tiny ImageNet",
        train_size=100_000,
        test_size=10_000,  # the validation split, 50 per class (the test split has no labels)
        balanced=True,
    ),
    # Evaluation only (validation set, placed by hand), for pretrained models.
    "imagenet": DatasetInfo(
        name="imagenet",
        num_classes=classes.IMAGENET_NUM_CLASSES,
        channels=3,
        image_size=224,
        class_names=None,
        variants=("val",),
        label="ImageNet",
        zoo_gflops=40.0,
    ),
    "synthetic": DatasetInfo(
        name="synthetic",
        num_classes=10,
        channels=3,
        image_size=32,
        class_names=tuple(f"class{i}" for i in range(10)),
        variants=("default",),
        label="Synthetic",
    ),
}

@cache
def sources() -> dict[tuple[str, str], DataSource]:
    """(dataset, variant) -> its DataSource; the loaders are imported here, on first use."""
    from study.data import cifar10, cifar100, imagenet, mnist, svhn, tinyimagenet
    from study.data.archives import VARIANT_ARCHIVES
    from study.data.synthetic import make_synthetic

    loaders: dict[tuple[str, str], Callable[..., Splits]] = {
        ("cifar10", "official"): cifar10.load_cifar10_official,
        ("cifar10", "jpeg"): cifar10.load_cifar10_jpeg,
        ("mnist", "official"): mnist.load_mnist,
        ("svhn", "official"): svhn.load_svhn,
        ("cifar100", "official"): cifar100.load_cifar100,
        ("tinyimagenet", "official"): tinyimagenet.load_tinyimagenet,
    }
    return {
        **{key: DataSource(VARIANT_ARCHIVES[key], load) for key, load in loaders.items()},
        ("imagenet", "val"): DataSource((), imagenet.prepare_imagenet, manual=True),
        ("synthetic", "default"): DataSource((), make_synthetic),
    }


def __getattr__(name: str) -> dict[tuple[str, str], DataSource]:
    # `registry.SOURCES` is the same table, built on first access (tests patch its entries).
    if name == "SOURCES":
        return sources()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


AUTO_VARIANT = "auto"


def resolve_variant(name: str, requested: str, raw_dir: Path, mirror: Path | None) -> str:
    """The variant that `requested` names; for "auto", the first of the dataset's variants
    (official first) whose archives all lie in `raw_dir` or the mirror, else the first that
    can be downloaded (the URL base or public URLs), else the default variant (whose
    `study prepare` then says which file to place where). Variants with no archives
    (generated, hand-placed) count as held."""
    from study.data.archives import VARIANT_ARCHIVES
    from study.data.download import download_urls, held_locally

    info = get_dataset_info(name)
    if requested != AUTO_VARIANT:
        check_variant(name, requested)
        return requested
    needed = {v: VARIANT_ARCHIVES.get((name, v), ()) for v in info.variants}
    for variant, specs in needed.items():
        if all(held_locally(spec, raw_dir, mirror) for spec in specs):
            return variant
    for variant, specs in needed.items():
        if all(download_urls(spec) for spec in specs):
            return variant
    return info.default_variant


def get_source(name: str, variant: str) -> DataSource:
    """Archives and loader for one dataset variant."""
    check_variant(name, variant)
    return sources()[name, variant]


def get_superclasses(name: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(superclass names, superclass index of every class) of `name`; ValueError naming the
    datasets that have superclasses when it has none."""
    info = get_dataset_info(name)
    if not info.superclass_of:
        having = sorted(n for n, i in DATASETS.items() if i.superclass_of)
        raise ValueError(f"dataset {name!r} has no superclasses; datasets with them: {having}")
    return info.superclass_names, info.superclass_of
