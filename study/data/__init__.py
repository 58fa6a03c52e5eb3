"""Datasets of the study: fetching archives, loading them, prepared tensors, augmentation."""

from study.data.augment import crop_flip_at, random_crop_flip, to_float
from study.data.batches import epoch_batches
from study.data.cifar10 import load_cifar10_jpeg, load_cifar10_official
from study.data.download import (
    ArchiveSpec,
    ChecksumError,
    DataUnavailableError,
    fetch_archive,
    file_checksums,
    resolve_mirror,
)
from study.data.prepared import (
    PreparedDataError,
    Splits,
    load_prepared,
    prepare_dataset,
    save_prepared,
    stratified_subset,
)
from study.data.registry import (
    DATASETS,
    SOURCES,
    DatasetInfo,
    DataSource,
    check_variant,
    get_dataset_info,
    get_source,
)
from study.data.synthetic import make_synthetic

__all__ = [
    "DATASETS",
    "SOURCES",
    "ArchiveSpec",
    "ChecksumError",
    "DataSource",
    "DataUnavailableError",
    "DatasetInfo",
    "PreparedDataError",
    "Splits",
    "check_variant",
    "crop_flip_at",
    "epoch_batches",
    "fetch_archive",
    "file_checksums",
    "get_dataset_info",
    "get_source",
    "load_cifar10_jpeg",
    "load_cifar10_official",
    "load_prepared",
    "make_synthetic",
    "prepare_dataset",
    "random_crop_flip",
    "resolve_mirror",
    "save_prepared",
    "stratified_subset",
    "to_float",
]
