"""CIFAR-10-C: the 19 regenerated corruptions against make_cifar_c.py's formulas written out
here (calling OpenCV, scikit-image, scipy and Pillow as the reference does, numpy's global
random state replaced by a Generator), the official-archive reader on small archives built
here in the official layout, and the choice between the two in the evaluation."""

import dataclasses
import functools
import hashlib
import importlib.util
import io
import math
import tarfile
from pathlib import Path

import cv2
import numpy as np
import pytest
import skimage as sk
import torch
from PIL import Image
from scipy import ndimage
from skimage.filters import gaussian

import study.data.cifar10c as cifar10c
import study.data.corruptions as corruptions
import study.data.corruptions.weather as weather
from study.data.cifar10c import find_cifar10c, load_cifar10c, locate_cifar10c, read_cifar10c
from study.data.corruptions import (
    CORRUPTIONS,
    OFFICIAL_CORRUPTIONS,
    SEVERITIES,
    corrupt,
    corruption_rng,
    motion_kernel,
)
from study.data.corruptions.blur import clipped_zoom
from study.data.download import ChecksumError, DataUnavailableError
from study.evaluate.corruptions import evaluate_corruptions, resolve_source
from study.evaluate.records import read_records
from study.tables.robustness import corruption_table


# ---------------------------------------------------------------- make_cifar_c.py, written out
# Each ref_* corrupts one uint8 (32, 32, 3) image as the reference's function of that name,
# with `rng` where the reference calls np.random, and returns its np.uint8(...) of the result.
def _u8(a: np.ndarray) -> np.ndarray:
    return np.uint8(a)


def ref_gaussian_noise(x, s, rng):
    c = [0.04, 0.06, .08, .09, .10][s - 1]
    x = np.array(x) / 255.
    return _u8(np.clip(x + rng.normal(size=x.shape, scale=c), 0, 1) * 255)


def ref_shot_noise(x, s, rng):
    c = [500, 250, 100, 75, 50][s - 1]
    x = np.array(x) / 255.
    return _u8(np.clip(rng.poisson(x * c) / c, 0, 1) * 255)


def ref_impulse_noise(x, s, rng):
    c = [.01, .02, .03, .05, .07][s - 1]
    x = sk.util.random_noise(np.array(x) / 255., mode='s&p', amount=c, rng=rng)
    return _u8(np.clip(x, 0, 1) * 255)


def ref_speckle_noise(x, s, rng):
    c = [.06, .1, .12, .16, .2][s - 1]
    x = np.array(x) / 255.
    return _u8(np.clip(x + x * rng.normal(size=x.shape, scale=c), 0, 1) * 255)


def ref_gaussian_blur(x, s, rng):
    c = [.4, .6, 0.7, .8, 1][s - 1]
    x = gaussian(np.array(x) / 255., sigma=c, channel_axis=-1)  # multichannel=True in 2018's scikit-image
    return _u8(np.clip(x, 0, 1) * 255)


def ref_glass_blur(x, s, rng):
    c = [(0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2)][s - 1]
    x = np.uint8(gaussian(np.array(x) / 255., sigma=c[0], channel_axis=-1) * 255)
    for _ in range(c[2]):
        for h in range(32 - c[1], c[1], -1):
            for w in range(32 - c[1], c[1], -1):
                dx, dy = rng.integers(-c[1], c[1], size=(2,))
                h_prime, w_prime = h + dy, w + dx
                x[h, w], x[h_prime, w_prime] = x[h_prime, w_prime], x[h, w]
    return _u8(np.clip(gaussian(x / 255., sigma=c[0], channel_axis=-1), 0, 1) * 255)


def ref_disk(radius, alias_blur=0.1, dtype=np.float32):
    if radius <= 8:
        grid, ksize = np.arange(-8, 8 + 1), (3, 3)
    else:
        grid, ksize = np.arange(-radius, radius + 1), (5, 5)
    xx, yy = np.meshgrid(grid, grid)
    aliased_disk = np.array((xx ** 2 + yy ** 2) <= radius ** 2, dtype=dtype)
    aliased_disk /= np.sum(aliased_disk)
    return cv2.GaussianBlur(aliased_disk, ksize=ksize, sigmaX=alias_blur)


def ref_defocus_blur(x, s, rng):
    c = [(0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1)][s - 1]
    x = np.array(x) / 255.
    kernel = ref_disk(radius=c[0], alias_blur=c[1])
    channels = [cv2.filter2D(np.ascontiguousarray(x[:, :, d]), -1, kernel) for d in range(3)]
    return _u8(np.clip(np.array(channels).transpose((1, 2, 0)), 0, 1) * 255)


def ref_motion(layer, radius, sigma, angle):
    """ImageMagick's motion blur through its PNG round trip, as `imagecorruptions` replaces it
    (the documented stand-in): 2 radius + 1 Gaussian taps along the angle, each a copy of the
    image shifted with its edge repeated, summed; the PNG's 8 bits rounded."""
    width = radius * 2 + 1
    kernel = np.exp(-np.arange(width) ** 2 / (2 * sigma ** 2))
    kernel /= kernel.sum()
    point = (width * np.sin(np.deg2rad(angle)), width * np.cos(np.deg2rad(angle)))
    hypot = math.hypot(*point)
    blurred = np.zeros(layer.shape)
    h, w = layer.shape[:2]
    for i in range(width):
        dy = math.ceil(i * point[0] / hypot - 0.5)
        dx = math.ceil(i * point[1] / hypot - 0.5)
        rows, cols = np.clip(np.arange(h) + dy, 0, h - 1), np.clip(np.arange(w) + dx, 0, w - 1)
        blurred += kernel[i] * layer[rows][:, cols]
    return np.clip(np.round(blurred), 0, 255).astype(np.uint8)


def ref_motion_blur(x, s, rng):
    c = [(6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5)][s - 1]
    return ref_motion(np.array(x).astype(np.float64), c[0], c[1], rng.uniform(-45, 45))


def ref_clipped_zoom(img, zoom_factor):
    h = img.shape[0]
    ch = int(np.ceil(h / zoom_factor))
    top = (h - ch) // 2
    img = ndimage.zoom(img[top:top + ch, top:top + ch], (zoom_factor, zoom_factor, 1), order=1)
    trim_top = (img.shape[0] - h) // 2
    return img[trim_top:trim_top + h, trim_top:trim_top + h]


def ref_zoom_blur(x, s, rng):
    c = [np.arange(1, 1.06, 0.01), np.arange(1, 1.11, 0.01), np.arange(1, 1.16, 0.01),
         np.arange(1, 1.21, 0.01), np.arange(1, 1.26, 0.01)][s - 1]
    x = (np.array(x) / 255.).astype(np.float32)
    out = np.zeros_like(x)
    for zoom_factor in c:
        out += ref_clipped_zoom(x, zoom_factor)
    return _u8(np.clip((x + out) / (len(c) + 1), 0, 1) * 255)


def ref_plasma_fractal(rng, mapsize=32, wibbledecay=3):
    maparray = np.empty((mapsize, mapsize), dtype=np.float64)
    maparray[0, 0] = 0
    stepsize = mapsize
    wibble = 100

    def wibbledmean(array):
        return array / 4 + wibble * rng.uniform(-wibble, wibble, array.shape)

    def fillsquares():
        cornerref = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        squareaccum = cornerref + np.roll(cornerref, shift=-1, axis=0)
        squareaccum += np.roll(squareaccum, shift=-1, axis=1)
        maparray[stepsize // 2:mapsize:stepsize, stepsize // 2:mapsize:stepsize] = wibbledmean(squareaccum)

    def filldiamonds():
        drgrid = maparray[stepsize // 2:mapsize:stepsize, stepsize // 2:mapsize:stepsize]
        ulgrid = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        ltsum = drgrid + np.roll(drgrid, 1, axis=0) + ulgrid + np.roll(ulgrid, -1, axis=1)
        maparray[0:mapsize:stepsize, stepsize // 2:mapsize:stepsize] = wibbledmean(ltsum)
        ttsum = drgrid + np.roll(drgrid, 1, axis=1) + ulgrid + np.roll(ulgrid, -1, axis=0)
        maparray[stepsize // 2:mapsize:stepsize, 0:mapsize:stepsize] = wibbledmean(ttsum)

    while stepsize >= 2:
        fillsquares()
        filldiamonds()
        stepsize //= 2
        wibble /= wibbledecay
    maparray -= maparray.min()
    return maparray / maparray.max()


def ref_fog(x, s, rng):
    c = [(.2, 3), (.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75)][s - 1]
    x = np.array(x) / 255.
    max_val = x.max()
    x += c[0] * ref_plasma_fractal(rng, wibbledecay=c[1])[:32, :32][..., np.newaxis]
    return _u8(np.clip(x * max_val / (max_val + c[0]), 0, 1) * 255)


@functools.cache
def _frost_photo(filename: str) -> np.ndarray:
    """cv2.imread and cv2.resize(fx=fy=0.2) of one of the photographs that imagecorruptions ships (read once)."""
    folder = Path(importlib.util.find_spec("imagecorruptions").submodule_search_locations[0]) / "frost"
    return cv2.resize(cv2.imread(str(folder / filename)), (0, 0), fx=0.2, fy=0.2)


def ref_frost(x, s, rng):
    c = [(1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45)][s - 1]
    idx = rng.integers(5)
    frost = _frost_photo(['frost1.png', 'frost2.png', 'frost3.png', 'frost4.jpg', 'frost5.jpg', 'frost6.jpg'][idx])
    x_start, y_start = rng.integers(0, frost.shape[0] - 32), rng.integers(0, frost.shape[1] - 32)
    frost = frost[x_start:x_start + 32, y_start:y_start + 32][..., [2, 1, 0]]
    return _u8(np.clip(c[0] * np.array(x) + c[1] * frost, 0, 255))


def ref_snow(x, s, rng):
    c = [(0.1, 0.2, 1, 0.6, 8, 3, 0.95), (0.1, 0.2, 1, 0.5, 10, 4, 0.9), (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9),
         (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85), (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8)][s - 1]
    x = np.array(x, dtype=np.float32) / 255.
    snow_layer = rng.normal(size=x.shape[:2], loc=c[0], scale=c[1])
    snow_layer = ref_clipped_zoom(snow_layer[..., np.newaxis], c[2])
    snow_layer[snow_layer < c[3]] = 0
    snow_layer = (np.clip(snow_layer.squeeze(), 0, 1) * 255).astype(np.uint8)
    snow_layer = ref_motion(snow_layer.astype(np.float64), c[4], c[5], rng.uniform(-135, -45)) / 255.
    snow_layer = snow_layer[..., np.newaxis]
    x = c[6] * x + (1 - c[6]) * np.maximum(x, cv2.cvtColor(x, cv2.COLOR_RGB2GRAY).reshape(32, 32, 1) * 1.5 + 0.5)
    return _u8(np.clip(x + snow_layer + np.rot90(snow_layer, k=2), 0, 1) * 255)


def ref_spatter(x, s, rng):
    c = [(0.62, 0.1, 0.7, 0.7, 0.5, 0), (0.65, 0.1, 0.8, 0.7, 0.5, 0), (0.65, 0.3, 1, 0.69, 0.5, 0),
         (0.65, 0.1, 0.7, 0.69, 0.6, 1), (0.65, 0.1, 0.5, 0.68, 0.6, 1)][s - 1]
    x = np.array(x, dtype=np.float32) / 255.
    liquid_layer = rng.normal(size=x.shape[:2], loc=c[0], scale=c[1])
    liquid_layer = gaussian(liquid_layer, sigma=c[2])
    liquid_layer[liquid_layer < c[3]] = 0
    if c[5] == 0:
        liquid_layer = (liquid_layer * 255).astype(np.uint8)
        dist = 255 - cv2.Canny(liquid_layer, 50, 150)
        dist = cv2.distanceTransform(dist, cv2.DIST_L2, 5)
        _, dist = cv2.threshold(dist, 20, 20, cv2.THRESH_TRUNC)
        dist = cv2.blur(dist, (3, 3)).astype(np.uint8)
        dist = cv2.equalizeHist(dist)
        ker = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]])
        dist = cv2.filter2D(dist, cv2.CV_8U, ker)
        dist = cv2.blur(dist, (3, 3)).astype(np.float32)
        m = cv2.cvtColor(liquid_layer * dist, cv2.COLOR_GRAY2BGRA)
        m /= np.max(m, axis=(0, 1))
        m *= c[4]
        color = np.concatenate((175 / 255. * np.ones_like(m[..., :1]), 238 / 255. * np.ones_like(m[..., :1]),
                                238 / 255. * np.ones_like(m[..., :1])), axis=2)
        color = cv2.cvtColor(color, cv2.COLOR_BGR2BGRA)
        x = cv2.cvtColor(x, cv2.COLOR_BGR2BGRA)
        return _u8(cv2.cvtColor(np.clip(x + m * color, 0, 1), cv2.COLOR_BGRA2BGR) * 255)
    m = np.where(liquid_layer > c[3], 1, 0)
    m = gaussian(m.astype(np.float32), sigma=c[4])
    m[m < 0.8] = 0
    color = np.concatenate((63 / 255. * np.ones_like(x[..., :1]), 42 / 255. * np.ones_like(x[..., :1]),
                            20 / 255. * np.ones_like(x[..., :1])), axis=2)
    color *= m[..., np.newaxis]
    x *= (1 - m[..., np.newaxis])
    return _u8(np.clip(x + color, 0, 1) * 255)


def ref_contrast(x, s, rng):
    c = [.75, .5, .4, .3, 0.15][s - 1]
    x = np.array(x) / 255.
    means = np.mean(x, axis=(0, 1), keepdims=True)
    return _u8(np.clip((x - means) * c + means, 0, 1) * 255)


def ref_brightness(x, s, rng):
    c = [.05, .1, .15, .2, .3][s - 1]
    x = sk.color.rgb2hsv(np.array(x) / 255.)
    x[:, :, 2] = np.clip(x[:, :, 2] + c, 0, 1)
    return _u8(np.clip(sk.color.hsv2rgb(x), 0, 1) * 255)


def ref_saturate(x, s, rng):
    c = [(0.3, 0), (0.1, 0), (1.5, 0), (2, 0.1), (2.5, 0.2)][s - 1]
    x = sk.color.rgb2hsv(np.array(x) / 255.)
    x[:, :, 1] = np.clip(x[:, :, 1] * c[0] + c[1], 0, 1)
    return _u8(np.clip(sk.color.hsv2rgb(x), 0, 1) * 255)


def ref_jpeg_compression(x, s, rng):
    c = [80, 65, 58, 50, 40][s - 1]
    output = io.BytesIO()
    Image.fromarray(x).save(output, 'JPEG', quality=c)
    return _u8(Image.open(output))


def ref_pixelate(x, s, rng):
    c = [0.95, 0.9, 0.85, 0.75, 0.65][s - 1]
    x = Image.fromarray(x).resize((int(32 * c), int(32 * c)), Image.BOX)
    return _u8(x.resize((32, 32), Image.BOX))


def ref_elastic_transform(image, s, rng):
    c = [(32 * 0, 32 * 0, 32 * 0.08), (32 * 0.05, 32 * 0.2, 32 * 0.07), (32 * 0.08, 32 * 0.06, 32 * 0.06),
         (32 * 0.1, 32 * 0.04, 32 * 0.05), (32 * 0.1, 32 * 0.03, 32 * 0.03)][s - 1]
    image = np.array(image, dtype=np.float32) / 255.
    shape = image.shape
    shape_size = shape[:2]
    center_square = np.float32(shape_size) // 2
    square_size = min(shape_size) // 3
    pts1 = np.float32([center_square + square_size, [center_square[0] + square_size, center_square[1] - square_size],
                       center_square - square_size])
    pts2 = pts1 + rng.uniform(-c[2], c[2], size=pts1.shape).astype(np.float32)
    M = cv2.getAffineTransform(pts1, pts2)
    image = cv2.warpAffine(image, M, shape_size[::-1], borderMode=cv2.BORDER_REFLECT_101)
    dx = (gaussian(rng.uniform(-1, 1, size=shape[:2]), c[1], mode='reflect', truncate=3) * c[0]).astype(np.float32)
    dy = (gaussian(rng.uniform(-1, 1, size=shape[:2]), c[1], mode='reflect', truncate=3) * c[0]).astype(np.float32)
    dx, dy = dx[..., np.newaxis], dy[..., np.newaxis]
    x, y, z = np.meshgrid(np.arange(shape[1]), np.arange(shape[0]), np.arange(shape[2]))
    indices = np.reshape(y + dy, (-1, 1)), np.reshape(x + dx, (-1, 1)), np.reshape(z, (-1, 1))
    out = ndimage.map_coordinates(image, indices, order=1, mode='reflect').reshape(shape)
    return _u8(np.clip(out, 0, 1) * 255)


REFERENCE = {name: globals()[f"ref_{name}"] for name in OFFICIAL_CORRUPTIONS}


# ---------------------------------------------------------------- test images
def _smooth(rng: np.random.Generator, n: int, sigma: float) -> np.ndarray:
    """n smooth, natural-looking images (colour noise blurred by sigma px) spanning 10..240."""
    x = ndimage.gaussian_filter(rng.random((n, 32, 32, 3)), (0, sigma, sigma, 0))
    lo, hi = x.min(axis=(1, 2, 3), keepdims=True), x.max(axis=(1, 2, 3), keepdims=True)
    return np.uint8((x - lo) / (hi - lo) * 230 + 10)


@pytest.fixture(scope="module")
def fixed() -> np.ndarray:
    """Six fixed (32, 32, 3) uint8 images: three smooth, a colour ramp, sharp-edged squares, a dark one."""
    yy, xx = np.mgrid[0:32, 0:32]
    ramp = np.stack([8 * xx, 8 * yy, 255 - 4 * (xx + yy)], -1)
    squares = np.where(((yy // 8) + (xx // 8))[..., None] % 2 == 1, [200, 40, 90], [30, 180, 220])
    dark = _smooth(np.random.default_rng(2), 1, 1)[0] // 6
    return np.concatenate([_smooth(np.random.default_rng(1), 3, 1.5), np.stack([ramp, squares, dark])]).astype(np.uint8)


@pytest.fixture(scope="module")
def textured() -> np.ndarray:
    """24 fixed images, half smooth (blurred by 2 px), half finer (1 px): enough that the random
    corruptions' statistics show, not one draw."""
    rng = np.random.default_rng(0)
    return np.concatenate([_smooth(rng, 12, 2), _smooth(rng, 12, 1)])


def as_tensor(images: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()


def as_images(tensor: torch.Tensor) -> np.ndarray:
    return tensor.permute(0, 2, 3, 1).numpy()


def reference_batch(name: str, images: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    return np.stack([REFERENCE[name](image.copy(), severity, rng) for image in images])


# ---------------------------------------------------------------- against make_cifar_c.py
# These draw for the whole batch at once (scikit-image's two passes, glass blur's pixel by
# pixel, fog's level by level): one image alone gets the reference's draws, a batch does not.
BATCH_DRAWS = ("impulse_noise", "glass_blur", "fog")


def test_all_nineteen_official_corruptions_are_regenerated():
    assert set(CORRUPTIONS) == set(OFFICIAL_CORRUPTIONS) == set(REFERENCE) and len(CORRUPTIONS) == 19
    with pytest.raises(ValueError, match="glass_blur"):  # the message lists the valid names
        corrupt(torch.zeros(1, 3, 32, 32, dtype=torch.uint8), "hail", 1)
    with pytest.raises(ValueError, match=r"severity must be one of \(1, 2, 3, 4, 5\), got 6"):
        corrupt(torch.zeros(1, 3, 32, 32, dtype=torch.uint8), "fog", 6)


@pytest.mark.parametrize("name", OFFICIAL_CORRUPTIONS)
def test_corruption_is_the_reference_formula_with_the_same_draws(fixed, name):
    """At every severity, the corrupted images equal make_cifar_c.py's formula run with the
    Generator `corrupt` draws from in place of np.random (within a level in a thousandth of
    the values: float rounding before the uint8 truncation); the deterministic corruptions
    draw nothing, so this is the plain formula for them."""
    for s in SEVERITIES:
        if name in BATCH_DRAWS:
            ours = np.concatenate([as_images(corrupt(as_tensor(im[None]), name, s, seed=k))
                                   for k, im in enumerate(fixed)])
            theirs = np.concatenate([reference_batch(name, im[None], s, corruption_rng(name, s, k))
                                     for k, im in enumerate(fixed)])
        else:
            ours = as_images(corrupt(as_tensor(fixed), name, s, seed=5))
            theirs = reference_batch(name, fixed, s, corruption_rng(name, s, 5))
        diff = np.abs(ours.astype(int) - theirs)
        assert diff.mean() < 1 and (diff > 1).mean() < 1e-3 and (diff > 0).mean() < 1e-3, (name, s, diff.max())


@pytest.mark.parametrize("name", BATCH_DRAWS)
def test_batch_draws_have_the_reference_statistics(textured, name):
    """A batch drawn at once changes the images as much as the reference's image-by-image
    draws from its own Generator: the mean absolute and the spread of the change from the clean
    images agree within 10%, at every severity (each severity is 25-100% stronger than the
    last for these three)."""
    clean = textured.astype(float)
    for s in SEVERITIES:
        ours = as_images(corrupt(as_tensor(textured), name, s, seed=11)) - clean
        theirs = reference_batch(name, textured, s, np.random.default_rng(2019)) - clean
        for stat in (lambda d: np.abs(d).mean(), np.std):
            assert stat(ours) == pytest.approx(stat(theirs), rel=0.1), (name, s, stat(ours), stat(theirs))


@pytest.mark.parametrize("name", OFFICIAL_CORRUPTIONS)
def test_corruption_is_uint8_deterministic_and_changes_the_image(fixed, name):
    images = as_tensor(fixed)
    for s in SEVERITIES:
        a, b = corrupt(images, name, s, seed=7), corrupt(images, name, s, seed=7)
        assert a.dtype == torch.uint8 and a.shape == images.shape, (name, s)
        assert torch.equal(a, b), (name, s)
        assert (a != images).any(), (name, s)
    if name not in ("contrast", "brightness", "saturate", "jpeg_compression", "pixelate", "gaussian_blur",
                    "defocus_blur", "zoom_blur"):  # the random ones
        assert not torch.equal(corrupt(images, name, 3, seed=7), corrupt(images, name, 3, seed=8)), name


def test_clipped_zoom_of_a_batch_is_scipys_zoom_of_each_centre_crop():
    layers = np.random.default_rng(4).random((3, 32, 32, 2)).astype(np.float32)
    for z in [*np.arange(1, 1.26, 0.01), 1.75, 2.25]:  # the zoom_blur factors and the snow ones
        ours = clipped_zoom(layers, z)
        assert ours.shape == layers.shape, z
        for layer, zoomed in zip(layers, ours, strict=True):
            assert np.array_equal(zoomed, ref_clipped_zoom(layer, z)), z


def test_motion_kernel_is_a_normalised_one_sided_line():
    k = motion_kernel(6, 1, 0)  # severity 1 of motion_blur, horizontal
    assert k.shape == (25, 25) and k.sum() == pytest.approx(1)
    weights = np.exp(-np.arange(13) ** 2 / 2)
    assert np.allclose(k[12, 12:], weights / weights.sum()) and k[12, 12] == pytest.approx(0.5703, abs=1e-4)
    assert np.count_nonzero(k) == 13 and np.count_nonzero(k[12]) == 13
    assert np.allclose(motion_kernel(6, 1, 90), k.T)  # vertical
    diagonal = motion_kernel(9, 2.5, 45)
    rows, cols = np.nonzero(diagonal)
    assert diagonal.sum() == pytest.approx(1) and (rows == cols).all() and rows.min() == 18
    flat = torch.full((2, 3, 32, 32), 100, dtype=torch.uint8)
    assert torch.equal(corrupt(flat, "motion_blur", 5), flat)  # weights sum to 1, edges repeat


def test_fog_keeps_the_brightest_value_and_darkens_by_its_formula():
    # fog: (x + c * haze) * max(x) / (max(x) + c), haze in [0, 1] with min 0 and max 1;
    # on a flat image v = 0.8 at severity 5 (c = 1.5): from 0.8^2 / 2.3 (70.96 -> 70) up to v (204)
    y = corrupt(torch.full((3, 3, 32, 32), 204, dtype=torch.uint8), "fog", 5)
    for im in y:
        assert im.min().item() == 70 and im.max().item() in (203, 204)
    assert torch.equal(corrupt(torch.zeros(1, 3, 32, 32, dtype=torch.uint8), "fog", 5).max(), torch.tensor(0))


def test_elastic_severity_one_is_an_affine_warp():
    # a linear ramp stays linear under an affine map with bilinear sampling (off the borders)
    yy, xx = np.mgrid[0:32, 0:32]
    ramp = np.stack([40 + 3 * xx + 2 * yy, 200 - 2 * xx - yy, 60 + 4 * yy], 0).astype(np.uint8)
    out = corrupt(torch.from_numpy(ramp)[None], "elastic_transform", 1, seed=3)[0].float().numpy()
    inner = (slice(8, 24), slice(8, 24))
    design = np.c_[xx[inner].ravel(), yy[inner].ravel(), np.ones(256)]
    for c in range(3):
        coef, *_ = np.linalg.lstsq(design, out[c][inner].ravel(), rcond=None)
        assert np.abs(design @ coef - out[c][inner].ravel()).max() < 1.01
    assert not np.array_equal(out, ramp.astype(np.float32))


def test_frost_blends_a_frost_photo_and_needs_its_package(monkeypatch):
    y = corrupt(torch.zeros(4, 3, 32, 32, dtype=torch.uint8), "frost", 1)  # 1 * 0 + 0.2 * photo
    assert 10 < y.float().mean() and y.max() <= 51
    monkeypatch.setattr(weather.importlib.util, "find_spec", lambda name: None)
    weather.frost_photos.cache_clear()
    try:
        with pytest.raises(ModuleNotFoundError, match="imagecorruptions"):
            corrupt(torch.zeros(1, 3, 32, 32, dtype=torch.uint8), "frost", 1)
    finally:
        monkeypatch.undo()
        weather.frost_photos.cache_clear()


# ---------------------------------------------------------------- strength by severity
@pytest.fixture(scope="module")
def strength(textured) -> dict[str, list[float]]:
    """Mean absolute difference from the clean images, per corruption and severity 1..5."""
    images = as_tensor(textured)
    return {name: [(corrupt(images, name, s, seed=1).float() - images.float()).abs().mean().item()
                   for s in SEVERITIES] for name in CORRUPTIONS}


# Published constants whose every step is stronger than the last.
GROWING = ("gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise", "gaussian_blur", "defocus_blur",
           "zoom_blur", "contrast", "brightness", "jpeg_compression", "pixelate", "snow", "fog")


def test_strength_grows_at_every_severity_where_every_published_step_is_stronger(strength):
    for name in GROWING:
        d = strength[name]
        assert all(a < b for a, b in zip(d, d[1:], strict=False)), (name, d)


def test_strength_of_the_other_six_follows_their_published_constants(strength):
    # The reference's own constants for these six do not make the mean absolute change grow at
    # every step, so what is checked is the shape the constants imply.
    d = strength
    assert set(GROWING) | {"motion_blur", "glass_blur", "spatter", "saturate", "frost", "elastic_transform"} == set(d)
    for name in set(CORRUPTIONS) - {"elastic_transform"}:
        assert d[name][4] > d[name][0], (name, d[name])
    # motion blur: severities 3 and 4 share sigma 2 (radius 6 vs 8 only adds taps beyond 3 sigma)
    m = d["motion_blur"]
    assert m[0] < m[1] < m[2] < m[4] and m[3] < m[4] and m[3] == pytest.approx(m[2], rel=0.1)
    # glass blur: severities 4-5 shuffle twice, 1-3 once
    assert min(d["glass_blur"][3:]) > max(d["glass_blur"][:3])
    # spatter: water (1-3) and mud (4-5) each grow
    s = d["spatter"]
    assert s[0] < s[1] < s[2] and s[3] < s[4]
    # saturate: factors 0.3, 0.1 desaturate, 1.5, 2 (+0.1), 2.5 (+0.2) saturate
    s = d["saturate"]
    assert s[0] < s[1] and s[2] < s[3] < s[4]
    # frost: 1 * x + 0.2 photo, then 0.3; from severity 3 on the image is dimmed (0.9 .. 0.75)
    # as more photo is added, which partly cancels in the difference
    f = d["frost"]
    assert f[0] < min(f[1:]) and f[0] < f[1]
    # elastic: severity 1 is a pure random affine of up to 2.56 px; higher severities shrink
    # the affine (down to 0.96 px) and add a small local displacement field
    e = d["elastic_transform"]
    assert all(a > b for a, b in zip(e, e[1:], strict=False)) and e[4] > 0, e


def test_other_image_sizes_take_only_the_size_free_corruptions():
    small = torch.zeros(2, 3, 16, 16, dtype=torch.uint8)
    for name in corruptions.SIZE_FREE:  # defined per pixel or per image mean: any size
        corruptions.check_image_size([name], small.shape[1:])
        assert corruptions.corrupt(small, name, 3).shape == small.shape
    sized = sorted(set(corruptions.OFFICIAL_CORRUPTIONS) - set(corruptions.SIZE_FREE))
    with pytest.raises(ValueError, match=f"corruption\\(s\\) {sized[0]}, {sized[1]}.* defined for 32x32 images, "
                                         "got 16x16; at other sizes valid: gaussian_noise"):
        corruptions.check_image_size(sized, small.shape[1:])
    corruptions.check_image_size(corruptions.OFFICIAL_CORRUPTIONS, (3, 32, 32))
    with pytest.raises(ValueError, match=r"RGB images \(3, H, W\), got \(1, 32, 32\)"):
        corruptions.check_image_size(["contrast"], (1, 32, 32))


# ---------------------------------------------------------------- the official archive
def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def make_archive(path, labels: np.ndarray, names=("fog", "snow"), seed=0, extra: dict | None = None):
    """CIFAR-10-C.tar in the official layout for a test set with `labels`; returns (arrays, md5)."""
    rng = np.random.default_rng(seed)
    n = len(labels)
    arrays = {name: rng.integers(0, 256, size=(5 * n, 32, 32, 3), dtype=np.uint8) for name in names}
    members = {f"CIFAR-10-C/{k}.npy": _npy(v) for k, v in arrays.items()}
    members["CIFAR-10-C/labels.npy"] = _npy(np.tile(labels.astype(np.uint8), 5))
    members.update(extra or {})
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return arrays, hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture()
def no_mirror(monkeypatch):
    monkeypatch.delenv("STUDY_DATA_MIRROR", raising=False)


def test_official_reader_reads_the_severity_slice_and_indices(tmp_path, no_mirror):
    labels = np.arange(20) % 10
    # a broken extra member: only the members asked for are read
    arrays, md5 = make_archive(tmp_path / "raw" / "CIFAR-10-C.tar", labels, extra={"CIFAR-10-C/junk.npy": b"x"})
    idx = [0, 7, 19, 3]
    x, y = load_cifar10c("snow", 3, idx, raw_dir=tmp_path / "raw", md5=md5, download=False)
    assert x.dtype == torch.uint8 and x.shape == (4, 3, 32, 32)
    assert torch.equal(x, torch.from_numpy(arrays["snow"][[40 + i for i in idx]]).permute(0, 3, 1, 2))
    assert y.tolist() == labels[idx].tolist()
    x5, _ = read_cifar10c(tmp_path / "raw" / "CIFAR-10-C.tar", "fog", 5, torch.tensor([19]))
    assert torch.equal(x5[0], torch.from_numpy(arrays["fog"][99]).permute(2, 0, 1))
    with pytest.raises(ValueError, match="frost.npy"):
        read_cifar10c(tmp_path / "raw" / "CIFAR-10-C.tar", "frost", 1, [0])
    with pytest.raises(ValueError, match="0..19"):
        read_cifar10c(tmp_path / "raw" / "CIFAR-10-C.tar", "fog", 1, [20])


def test_the_mirror_copy_is_used_first_and_in_place(tmp_path, monkeypatch):
    labels = np.arange(20) % 10
    _, md5 = make_archive(tmp_path / "mirror" / "cifar10c" / "CIFAR-10-C.tar", labels, seed=1)
    make_archive(tmp_path / "raw" / "CIFAR-10-C.tar", labels, seed=1)
    monkeypatch.setenv("STUDY_DATA_MIRROR", str(tmp_path / "mirror"))
    assert locate_cifar10c(tmp_path / "raw") == tmp_path / "mirror" / "cifar10c" / "CIFAR-10-C.tar"
    assert find_cifar10c(tmp_path / "raw", md5=md5, download=False).parent.name == "cifar10c"


def test_a_corrupt_archive_is_moved_aside_with_a_clear_error(tmp_path, no_mirror):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "CIFAR-10-C.tar").write_bytes(b"not a tar")
    with pytest.raises(ChecksumError) as err:
        find_cifar10c(raw, download=False)
    text = str(err.value)
    assert "CIFAR-10-C.tar" in text and "56bf5dcef84df0e2308c6dcbcbbd8499" in text
    assert f"Put a good copy (md5 56bf5dcef84df0e2308c6dcbcbbd8499) at {raw / 'CIFAR-10-C.tar'}" in text
    assert not (raw / "CIFAR-10-C.tar").exists() and (raw / "CIFAR-10-C.tar.corrupt").read_bytes() == b"not a tar"


def test_official_without_the_archive_fails_clearly_after_trying_the_download(tmp_path, no_mirror, monkeypatch,
                                                                            synthetic_splits):
    # The real download code, pointed at a URL that cannot answer (offline as on this machine).
    unreachable = (tmp_path / "no.tar").as_uri()
    monkeypatch.setattr(cifar10c, "ARCHIVE", dataclasses.replace(cifar10c.ARCHIVE, urls=(unreachable,)))
    with pytest.raises(DataUnavailableError) as err:
        evaluate_corruptions(tmp_path / "no-run", synthetic_splits, ["contrast"], [1], tmp_path / "c.parquet",
                             source="official", raw_dir=tmp_path / "raw")
    text = str(err.value)
    assert "CIFAR-10-C.tar (md5 56bf5dcef84df0e2308c6dcbcbbd8499) is not available" in text
    assert f"Put the file at {tmp_path / 'raw' / 'CIFAR-10-C.tar'}" in text and "no.tar" in text
    with pytest.raises(ValueError, match="auto, official, regenerated"):
        resolve_source("zenodo", synthetic_splits)


def test_auto_uses_the_archive_only_for_the_official_cifar10_test_set(tmp_path, no_mirror, monkeypatch,
                                                                      synthetic_splits):
    cifar = dataclasses.replace(synthetic_splits, meta={**synthetic_splits.meta, "dataset": "cifar10",
                                                        "variant": "official"})
    raw = tmp_path / "raw"
    assert resolve_source("auto", cifar, raw) == ("regenerated", None)  # no archive
    make_archive(raw / "CIFAR-10-C.tar", synthetic_splits.test_y.numpy())
    with pytest.raises(ChecksumError):  # found but not the official file: an error, not a silent fallback
        resolve_source("auto", cifar, raw)
    _, md5 = make_archive(raw / "CIFAR-10-C.tar", synthetic_splits.test_y.numpy())
    monkeypatch.setattr(cifar10c, "ARCHIVE", dataclasses.replace(cifar10c.ARCHIVE, md5=md5))
    assert resolve_source("auto", cifar, raw) == ("official", raw / "CIFAR-10-C.tar")
    assert resolve_source("regenerated", cifar, raw) == ("regenerated", None)
    # synthetic (or JPEG-variant) data is not in the archive's order
    assert resolve_source("auto", synthetic_splits, raw) == ("regenerated", None)


def test_records_say_which_images_were_used(standard_run, synthetic_splits, tmp_path, no_mirror, monkeypatch):
    raw, out = tmp_path / "raw", tmp_path / "corruptions.parquet"
    # (contrast: a corruption defined at any image size, the synthetic images being smaller than CIFAR's)
    # auto, no archive
    evaluate_corruptions(standard_run, synthetic_splits, ["contrast"], [2], out, per_class=3, raw_dir=raw)
    frame, meta = read_records(out)
    assert meta["corruption_variant"] == "regenerated" and meta["evaluation"]["source"] == "auto"
    # the archive for this test set (same labels, same order): `official` reads it
    _, md5 = make_archive(raw / "CIFAR-10-C.tar", synthetic_splits.test_y.numpy(), names=("contrast",))
    monkeypatch.setattr(cifar10c, "ARCHIVE", dataclasses.replace(cifar10c.ARCHIVE, md5=md5))
    evaluate_corruptions(standard_run, synthetic_splits, ["contrast"], [2], out, per_class=3, source="official",
                         raw_dir=raw)
    frame2, meta2 = read_records(out)
    assert meta2["corruption_variant"] == "official" and len(frame2) == 30
    assert frame2["index"].tolist() == frame["index"].tolist()
    table = corruption_table([out])
    assert (table["corruption_variant"] == "official").all() and set(table["severity"]) == {2}
    # a part of the other variant is not reused
    evaluate_corruptions(standard_run, synthetic_splits, ["contrast"], [2], out, per_class=3, source="regenerated",
                         raw_dir=raw)
    frame3, meta3 = read_records(out)
    assert meta3["corruption_variant"] == "regenerated" and frame3["pred"].tolist() == frame["pred"].tolist()
    # an archive for another test order is refused
    shuffled = synthetic_splits.test_y.numpy()[::-1].copy()
    _, md5 = make_archive(raw / "CIFAR-10-C.tar", shuffled, names=("contrast",))
    monkeypatch.setattr(cifar10c, "ARCHIVE", dataclasses.replace(cifar10c.ARCHIVE, md5=md5))
    with pytest.raises(ValueError, match="official CIFAR-10 test set in its order"):
        evaluate_corruptions(standard_run, synthetic_splits, ["contrast"], [3], tmp_path / "x.parquet", per_class=3,
                             source="official", raw_dir=raw)
