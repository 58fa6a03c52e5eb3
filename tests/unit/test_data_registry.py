import pytest

from study.data.download import ArchiveSpec
from study.data.registry import (
    DATASETS,
    SOURCES,
    DatasetInfo,
    check_variant,
    get_dataset_info,
    get_source,
)


def test_cifar10_and_synthetic_entries():
    cifar = get_dataset_info("cifar10")
    assert cifar.variants == ("official", "jpeg")
    assert cifar.default_variant == "official"
    assert cifar.class_names[:3] == ("airplane", "automobile", "bird")
    assert cifar.class_names[-1] == "truck"
    assert (cifar.num_classes, cifar.channels, cifar.image_size) == (10, 3, 32)
    synthetic = get_dataset_info("synthetic")
    assert synthetic.variants == ("default",)
    assert synthetic.class_names == tuple(f"class{i}" for i in range(10))


def test_unknown_dataset_lists_valid_names():
    with pytest.raises(ValueError, match="'emnist'") as err:
        get_dataset_info("emnist")
    assert "cifar10, cifar100, imagenet, mnist, svhn, synthetic, tinyimagenet" in str(err.value)


def test_unknown_variant_lists_valid_variants():
    check_variant("cifar10", "jpeg")
    with pytest.raises(ValueError, match="'png'") as err:
        check_variant("cifar10", "png")
    assert "official, jpeg" in str(err.value)
    with pytest.raises(ValueError, match="valid datasets"):
        check_variant("imagenet21k", "official")


def test_every_variant_has_a_source_and_no_source_is_orphaned():
    declared = {(name, v) for name, info in DATASETS.items() for v in info.variants}
    assert declared == set(SOURCES)
    for name, variant in declared:
        source = get_source(name, variant)
        assert callable(source.load)
        assert all(isinstance(spec, ArchiveSpec) for spec in source.archives)
    assert get_source("cifar10", "official").archives[0].md5 == "c58f30108f718f92721af3b95e74349a"
    assert get_source("cifar10", "jpeg").archives[0].mirror_subdirs == ("cifar10-jpeg",)


def test_dataset_info_checks_class_count():
    with pytest.raises(ValueError, match="2 class names for 3 classes"):
        DatasetInfo("x", 3, 1, 28, ("a", "b"), ("default",))
