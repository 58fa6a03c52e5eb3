"""The four weather corruptions of CIFAR-10-C: snow, frost, fog and spatter, as make_cifar_c.py
computes them, drawing from the numpy Generator given instead of numpy's global state.

Every function takes a batch of uint8 images (N, H, W, 3), a severity 1-5 and the Generator,
and returns the corrupted uint8 batch. snow, frost and spatter draw image after image, in the
reference's order within an image; fog draws each level of the height maps for the batch."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import cv2
import numpy as np

from study.data.corruptions.blur import clipped_zoom, gaussian_images, motion_blur_image

# snow: (loc, scale, zoom, threshold, blur radius, blur sigma, share of the image kept) per severity
_SNOW = [(0.1, 0.2, 1, 0.6, 8, 3, 0.95), (0.1, 0.2, 1, 0.5, 10, 4, 0.9), (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9),
         (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85), (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8)]


def _snow_layer(shape: tuple[int, int], severity: int, rng: np.random.Generator) -> np.ndarray:
    """One image's flakes in [0, 1] (H, W, 1): a zoomed normal layer kept above a threshold,
    stored as an 8-bit greyscale image and motion-blurred downwards."""
    loc, scale, zoom, threshold, radius, sigma, _ = _SNOW[severity - 1]
    layer = rng.normal(size=shape, loc=loc, scale=scale)
    layer = clipped_zoom(layer[None, ..., None], zoom)[0]
    layer[layer < threshold] = 0
    layer = (np.clip(layer[..., 0], 0, 1) * 255).astype(np.uint8)  # the reference's PIL 'L' image
    blurred = motion_blur_image(layer, radius, sigma, rng.uniform(-135, -45))
    return (blurred / 255.0)[..., None]


def snow(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    keep = _SNOW[severity - 1][6]
    out = np.empty_like(x)
    for k, image in enumerate(x):
        im = np.array(image, dtype=np.float32) / 255.0
        flakes = _snow_layer(im.shape[:2], severity, rng)
        grey = cv2.cvtColor(im, cv2.COLOR_RGB2GRAY)[..., None]
        im = keep * im + (1 - keep) * np.maximum(im, grey * 1.5 + 0.5)
        out[k] = (np.clip(im + flakes + np.rot90(flakes, k=2), 0, 1) * 255).astype(np.uint8)
    return out


# The reference's cv2.imread keeps three colour channels of the PNGs; it draws randint(5), so frost6 never.
FROST_FILES = ("frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg")


@functools.lru_cache(maxsize=1)
def frost_photos() -> tuple[np.ndarray, ...]:
    """The five frost photographs (BGR uint8), read and shrunk by 0.2 as the reference does.
    They ship in the PyPI package `imagecorruptions`; find_spec locates its folder without
    running its __init__ (which imports pkg_resources)."""
    spec = importlib.util.find_spec("imagecorruptions")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the frost corruption needs the frost photographs of the PyPI package "
                                  "'imagecorruptions', which is not installed: pip install imagecorruptions==1.1.2")
    folder = Path(next(iter(spec.submodule_search_locations))) / "frost"
    photos = []
    for name in FROST_FILES:
        photo = cv2.imread(str(folder / name))
        if photo is None:
            raise FileNotFoundError(f"{folder / name} is missing or unreadable: reinstall the PyPI package "
                                    "'imagecorruptions'")
        photos.append(cv2.resize(photo, (0, 0), fx=0.2, fy=0.2))
    return tuple(photos)


def frost(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    c = [(1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45)][severity - 1]
    photos = frost_photos()
    n, h, w, _ = x.shape
    out = np.empty_like(x)
    for k in range(n):
        photo = photos[rng.integers(len(photos))]
        top, left = rng.integers(0, photo.shape[0] - h), rng.integers(0, photo.shape[1] - w)
        ice = photo[top : top + h, left : left + w][..., [2, 1, 0]]  # BGR to RGB
        out[k] = np.clip(c[0] * x[k] + c[1] * ice, 0, 255).astype(np.uint8)
    return out


def plasma_fractal(n: int, mapsize: int, wibbledecay: float, rng: np.random.Generator) -> np.ndarray:
    """(n, mapsize, mapsize) diamond-square height maps in [0, 1], wrapping at the borders
    (mapsize a power of two), as the reference's plasma_fractal: each new point is the mean of
    its four neighbours plus uniform noise of half-width wibble^2, wibble starting at 100 and
    divided by `wibbledecay` per level. One map draws exactly the reference's numbers."""
    maps = np.zeros((n, mapsize, mapsize))
    step, wibble = mapsize, 100.0
    while step >= 2:
        half = step // 2

        def wibbled_mean(total: np.ndarray, wibble: float = wibble) -> np.ndarray:
            return total / 4 + wibble * rng.uniform(-wibble, wibble, total.shape)

        corners = maps[:, ::step, ::step]
        around = corners + np.roll(corners, -1, axis=1)
        maps[:, half::step, half::step] = wibbled_mean(around + np.roll(around, -1, axis=2))
        centres = maps[:, half::step, half::step]
        # points between two corners of a row: the centres above and below, the corners left and right
        maps[:, ::step, half::step] = wibbled_mean(centres + np.roll(centres, 1, axis=1)
                                                   + corners + np.roll(corners, -1, axis=2))
        # points between two corners of a column: the centres left and right, the corners above and below
        maps[:, half::step, ::step] = wibbled_mean(centres + np.roll(centres, 1, axis=2)
                                                   + corners + np.roll(corners, -1, axis=1))
        step, wibble = half, wibble / wibbledecay
    maps -= maps.min(axis=(1, 2), keepdims=True)
    return maps / maps.max(axis=(1, 2), keepdims=True)


def fog(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    c = [(0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75)][severity - 1]
    n, h, w, _ = x.shape
    x = x / 255.0
    max_val = x.max(axis=(1, 2, 3), keepdims=True)  # each image's own brightest value
    x += c[0] * plasma_fractal(n, 32, c[1], rng)[:, :h, :w, None]
    return (np.clip(x * max_val / (max_val + c[0]), 0, 1) * 255).astype(np.uint8)


_EMBOSS = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]])


def _water_shading(liquid: np.ndarray) -> np.ndarray:
    """The reference's water shading of one liquid layer (H, W) in [0, 1] (float32 (H, W)),
    before its scaling by the severity's intensity."""
    # The reference's (liquid * 255).astype(np.uint8) wraps a value above 1 around (undefined
    # in C); it is kept at 255 here.
    layer = (np.minimum(liquid, 1) * 255).astype(np.uint8)
    dist = 255 - cv2.Canny(layer, 50, 150)
    dist = cv2.distanceTransform(dist, cv2.DIST_L2, 5)
    _, dist = cv2.threshold(dist, 20, 20, cv2.THRESH_TRUNC)
    dist = cv2.blur(dist, (3, 3)).astype(np.uint8)
    dist = cv2.equalizeHist(dist)
    dist = cv2.filter2D(dist, cv2.CV_8U, _EMBOSS)
    dist = cv2.blur(dist, (3, 3)).astype(np.float32)
    m = layer * dist
    peak = m.max()
    # the reference divides by zero where no drop has shading (its image turns to NaN); left unshaded here
    return m / peak if peak > 0 else m


def spatter(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    loc, scale, sigma, threshold, intensity, mud = [
        (0.62, 0.1, 0.7, 0.7, 0.5, 0), (0.65, 0.1, 0.8, 0.7, 0.5, 0), (0.65, 0.3, 1, 0.69, 0.5, 0),
        (0.65, 0.1, 0.7, 0.69, 0.6, 1), (0.65, 0.1, 0.5, 0.68, 0.6, 1)][severity - 1]
    out = np.empty_like(x)
    for k, image in enumerate(x):
        im = np.array(image, dtype=np.float32) / 255.0
        liquid = gaussian_images(rng.normal(size=(1, *im.shape[:2]), loc=loc, scale=scale), sigma)[0]
        liquid[liquid < threshold] = 0
        if not mud:  # water, pale turquoise, shaded along the drops' outlines
            m = _water_shading(liquid) * np.float32(intensity)
            color = np.array([175 / 255.0, 238 / 255.0, 238 / 255.0], dtype=np.float32)
            out[k] = (np.clip(im + m[..., None] * color, 0, 1) * 255).astype(np.uint8)
        else:  # mud, brown, covering the drops (blurred by `intensity`) where they are dense
            m = gaussian_images(np.where(liquid > threshold, 1, 0).astype(np.float32)[None], intensity)[0]
            m[m < 0.8] = 0
            color = np.array([63 / 255.0, 42 / 255.0, 20 / 255.0], dtype=np.float32) * m[..., None]
            out[k] = (np.clip(im * (1 - m[..., None]) + color, 0, 1) * 255).astype(np.uint8)
    return out
