"""A small generated image dataset with known class structure, for fast end-to-end runs
and tests without real data.

Each class has a prototype image: a class colour plus a smooth spatial pattern. A sample
is its prototype plus a random colour shift and smooth random fields whose amplitude
rises with the class index, so later classes are harder. One pair of classes shares most
of its prototype, so those two are confused with each other, as cat and dog are in
CIFAR-10."""

from __future__ import annotations

import os

import numpy as np
import torch

from study.data.splits import Splits

# The class colour is what even a small CNN with global pooling picks up in an epoch or
# two; the pattern adds spatial structure. Sample noise is a colour shift plus smooth
# fields on the prototype's grid and a finer one, so it overlaps the directions that
# separate classes and cannot simply be averaged away by a classifier.
COLOUR_AMPLITUDE = 0.2
PATTERN_AMPLITUDE = 0.2
PROTOTYPE_GRID = 4
NOISE_GRIDS = (1, 4, 8)
NOISE_SCALE_EASY = 0.05
NOISE_SCALE_HARD = 0.3
PIXEL_NOISE = 0.04
PAIR_SHARE = 0.8


def confusable_pair(num_classes: int) -> tuple[int, int]:
    """The two classes that share most of their prototype (3 and 5, as cat and dog)."""
    return (3, 5) if num_classes >= 6 else (0, 1)


def noise_scales(num_classes: int) -> np.ndarray:
    """Noise amplitude per class, rising linearly with the class index."""
    return np.linspace(NOISE_SCALE_EASY, NOISE_SCALE_HARD, num_classes)


def _upsample(grid: np.ndarray, size: int) -> np.ndarray:
    """Bilinear upsampling of the last two axes from g x g to size x size.

    Written with elementwise products only (no matmul, no reductions) so that the result
    is bit-identical on every machine, whatever BLAS or SIMD it uses."""
    g = grid.shape[-1]
    t = np.arange(size) * ((g - 1) / (size - 1))
    lo = np.minimum(np.floor(t).astype(np.int64), g - 1)
    hi = np.minimum(lo + 1, g - 1)
    w = t - lo
    rows = grid[..., lo, :] * (1 - w)[:, None] + grid[..., hi, :] * w[:, None]
    return rows[..., lo] * (1 - w) + rows[..., hi] * w


def _uniform(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    # Uniform draws are exact integer-to-float conversions; normal draws call libm in the
    # tails, which may differ in the last bit between platforms.
    return rng.random(shape) * 2 - 1


# float64 images, noise field and one uniform draw alive at once, then the uint8 copy
PEAK_BYTES_PER_VALUE = 3 * 8 + 1


def _check_fits_memory(arg: str, per_class: int, num_classes: int, channels: int, image_size: int) -> None:
    """Refuse, before any allocation, a set whose generation needs more than this machine's memory."""
    per_image = channels * image_size * image_size * PEAK_BYTES_PER_VALUE
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if per_class * num_classes * per_image > memory:
        raise ValueError(f"synthetic data {arg}={per_class:,}: generating it needs about "
                         f"{per_class * num_classes * per_image / 2**30:,.0f} GiB, more than this machine's "
                         f"{memory / 2**30:,.0f} GiB of memory; valid here: {arg} <= "
                         f"{memory // (num_classes * per_image):,} (at image_size {image_size})")


def _samples(
    rng: np.random.Generator,
    prototypes: np.ndarray,
    scales: np.ndarray,
    per_class: int,
) -> tuple[np.ndarray, np.ndarray]:
    num_classes, channels, size, _ = prototypes.shape
    labels = np.repeat(np.arange(num_classes, dtype=np.int64), per_class)
    n = len(labels)
    images = prototypes[labels]
    field = np.zeros_like(images)
    for g in NOISE_GRIDS:
        field += _upsample(_uniform(rng, (n, channels, g, g)), size)
    images = images + scales[labels][:, None, None, None] * field
    images += PIXEL_NOISE * _uniform(rng, images.shape)
    images = np.rint(np.clip(images, 0.0, 1.0) * 255).astype(np.uint8)
    # Interleave classes as real datasets do, so no code can rely on class-sorted order.
    order = rng.permutation(n)
    return images[order], labels[order]


def make_synthetic(
    num_classes: int = 10,
    train_per_class: int = 100,
    test_per_class: int = 50,
    image_size: int = 32,
    channels: int = 3,
    seed: int = 0,
) -> Splits:
    """Generate the dataset; the same arguments give the same bytes on every machine."""
    for arg, value, least in (
        ("num_classes", num_classes, 2),
        ("train_per_class", train_per_class, 1),
        ("test_per_class", test_per_class, 1),
        ("image_size", image_size, 2),
        ("channels", channels, 1),
    ):
        if not isinstance(value, int) or value < least:
            raise ValueError(f"{arg} must be an int >= {least}, got {value!r}")
    for arg, value in (("train_per_class", train_per_class), ("test_per_class", test_per_class)):
        _check_fits_memory(arg, value, num_classes, channels, image_size)
    rng = np.random.default_rng(seed)

    colour = _uniform(rng, (num_classes, channels, 1, 1))
    pattern = _uniform(rng, (num_classes, channels, PROTOTYPE_GRID, PROTOTYPE_GRID))
    a, b = confusable_pair(num_classes)
    for part in (colour, pattern):
        part[b] = PAIR_SHARE * part[a] + (1 - PAIR_SHARE) * part[b]
    # Centred at mid-grey so that noise is rarely clipped away.
    prototypes = (
        0.5 + COLOUR_AMPLITUDE * colour + PATTERN_AMPLITUDE * _upsample(pattern, image_size)
    )
    scales = noise_scales(num_classes)

    train_x, train_y = _samples(rng, prototypes, scales, train_per_class)
    test_x, test_y = _samples(rng, prototypes, scales, test_per_class)
    params = {
        "num_classes": num_classes,
        "train_per_class": train_per_class,
        "test_per_class": test_per_class,
        "image_size": image_size,
        "channels": channels,
        "seed": seed,
    }
    return Splits(
        train_x=torch.from_numpy(train_x),
        train_y=torch.from_numpy(train_y),
        test_x=torch.from_numpy(test_x),
        test_y=torch.from_numpy(test_y),
        class_names=[f"class{i}" for i in range(num_classes)],
        meta={
            "dataset": "synthetic",
            "variant": "default",
            "synthetic": params,
            "noise_scales": [round(float(s), 6) for s in scales],
            "confusable_pair": [a, b],
        },
    )
