"""Every dataset archive the study can fetch: file name, checksums, download URLs, mirror
folders, and which archives make up each (dataset, variant).

Plain data, free of torch, so that planning (`variants: auto`, `study plan`, Snakemake's
DAG) can ask which archives a variant needs without importing the loaders.

URLs are tried in order, each download checked against the one published checksum. MNIST's
original host (yann.lecun.com) has refused downloads for years; like torchvision, we try the
copy that the PyTorch project keeps first."""

from __future__ import annotations

from study.data.download import ArchiveSpec

CIFAR10_OFFICIAL = ArchiveSpec(
    filename="cifar-10-python.tar.gz",
    urls=("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
    md5="c58f30108f718f92721af3b95e74349a",
    mirror_subdirs=("cifar10",),
)
# CIFAR-10 re-encoded as JPEG (quality 75) in an image-folder layout: no public URL, it is
# placed in a local mirror (README, "Data").
CIFAR10_JPEG = ArchiveSpec(
    filename="cifar10-jpeg.tar.gz",
    urls=(),
    sha256="10d8231fd3928e23960a12819a296e500bfadba9d242d0abab55e7b30f54c9ee",
    mirror_subdirs=("cifar10-jpeg",),
)

CIFAR100 = ArchiveSpec(
    filename="cifar-100-python.tar.gz",
    urls=("https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",),
    md5="eb9058c3a382ffc7106e4002c42a8d85",
    mirror_subdirs=("cifar100",),
)

_MNIST_HOSTS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")
# The official MD5s are of the uncompressed files (published with torchvision and others);
# checking the content lets a re-compressed mirror copy pass.
_MNIST_FILES = (
    ("train-images-idx3-ubyte", "6bbc9ace898e44ae57da46a324031adb"),
    ("train-labels-idx1-ubyte", "a25bea736e30d166cdddb491f175f624"),
    ("t10k-images-idx3-ubyte", "2646ac647ad5339dbf082846283269ea"),
    ("t10k-labels-idx1-ubyte", "27ae3e4e09519cfbb04c329615203637"),
)
MNIST: tuple[ArchiveSpec, ...] = tuple(
    ArchiveSpec(
        filename=f"{stem}.gz",
        urls=tuple(f"{host}{stem}.gz" for host in _MNIST_HOSTS),
        md5=md5,
        mirror_subdirs=("mnist",),
        gunzipped_checksums=True,
    )
    for stem, md5 in _MNIST_FILES
)

_SVHN_HOST = "http://ufldl.stanford.edu/housenumbers/"
SVHN_TRAIN = ArchiveSpec(
    filename="train_32x32.mat",
    urls=(f"{_SVHN_HOST}train_32x32.mat",),
    md5="e26dedcc434d2e4c54c9b2d4a06d8373",
    mirror_subdirs=("svhn",),
)
SVHN_TEST = ArchiveSpec(
    filename="test_32x32.mat",
    urls=(f"{_SVHN_HOST}test_32x32.mat",),
    md5="eb5a983be6a315427106f1b164d9cef3",
    mirror_subdirs=("svhn",),
)

TINYIMAGENET = ArchiveSpec(
    filename="tiny-imagenet-200.zip",
    urls=("http://cs231n.stanford.edu/tiny-imagenet-200.zip",),
    md5="90528d7ca1a48142e341f4ef8d21d0de",
    mirror_subdirs=("tinyimagenet",),
)

CIFAR10C = ArchiveSpec(
    filename="CIFAR-10-C.tar",
    urls=("https://zenodo.org/record/2535967/files/CIFAR-10-C.tar",),
    md5="56bf5dcef84df0e2308c6dcbcbbd8499",
    mirror_subdirs=("cifar10c",),
)

# No URL: the files are only given out to registered users of image-net.org.
IMAGENET_VAL = ArchiveSpec("ILSVRC2012_img_val.tar", (), md5="29b22e2961454d5413ddabcf34fc5622")
IMAGENET_DEVKIT = ArchiveSpec("ILSVRC2012_devkit_t12.tar.gz", (), md5="fa75699e90414af021442c21a62c3abf")

#: The archives of each (dataset, variant) fetched by `study prepare`, in the order its loader
#: takes them. Generated (synthetic) and hand-placed (ImageNet) variants have none here.
VARIANT_ARCHIVES: dict[tuple[str, str], tuple[ArchiveSpec, ...]] = {
    ("cifar10", "official"): (CIFAR10_OFFICIAL,),
    ("cifar10", "jpeg"): (CIFAR10_JPEG,),
    ("mnist", "official"): MNIST,
    ("svhn", "official"): (SVHN_TRAIN, SVHN_TEST),
    ("cifar100", "official"): (CIFAR100,),
    ("tinyimagenet", "official"): (TINYIMAGENET,),
}
