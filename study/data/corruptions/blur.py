"""The five blurs of CIFAR-10-C: gaussian_blur, defocus_blur, glass_blur, motion_blur and
zoom_blur, as make_cifar_c.py computes them, and the two helpers snow shares (clipped_zoom,
the motion blur of one image).

Every function takes a batch of uint8 images (N, H, W, 3), a severity 1-5 and a numpy
Generator, and returns the corrupted uint8 batch."""

from __future__ import annotations

import cv2
import numpy as np
from scipy.ndimage import zoom as scizoom
from skimage.filters import gaussian


def gaussian_images(a: np.ndarray, sigma: float, **kwargs: object) -> np.ndarray:
    """skimage.filters.gaussian of every image of a batch (N, H, W[, C]) at once: sigma 0 on the
    batch axis leaves the images apart, so this is the reference's call on each image."""
    channel_axis = -1 if a.ndim == 4 else None
    return gaussian(a, sigma=(0, sigma, sigma), channel_axis=channel_axis, **kwargs)


def gaussian_blur(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    c = [0.4, 0.6, 0.7, 0.8, 1][severity - 1]
    return (np.clip(gaussian_images(x / 255.0, c), 0, 1) * 255).astype(np.uint8)


def glass_blur(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    sigma, delta, iterations = [(0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2)][severity - 1]
    n, h, w, _ = x.shape
    x = (gaussian_images(x / 255.0, sigma) * 255).astype(np.uint8)
    img = np.arange(n)
    for _ in range(iterations):
        for i in range(h - delta, delta, -1):
            for j in range(w - delta, delta, -1):
                # one (dx, dy) per image; randint's upper bound is excluded, as in the reference
                dx, dy = rng.integers(-delta, delta, size=(2, n))
                # The reference's tuple "swap" of two numpy views copies the neighbour onto the
                # pixel and leaves the neighbour as it was; the published images carry that.
                x[img, i, j] = x[img, i + dy, j + dx]
    return (np.clip(gaussian_images(x / 255.0, sigma), 0, 1) * 255).astype(np.uint8)


def disk(radius: float, alias_blur: float) -> np.ndarray:
    """The reference's defocus kernel: a float32 disk summing to 1, antialiased by cv2.GaussianBlur."""
    grid: np.ndarray
    if radius <= 8:
        grid, ksize = np.arange(-8, 8 + 1), (3, 3)
    else:
        grid, ksize = np.arange(-radius, radius + 1), (5, 5)
    xx, yy = np.meshgrid(grid, grid)
    aliased = np.array((xx**2 + yy**2) <= radius**2, dtype=np.float32)
    aliased /= np.sum(aliased)
    return cv2.GaussianBlur(aliased, ksize=ksize, sigmaX=alias_blur)


def defocus_blur(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    radius, alias_blur = [(0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1)][severity - 1]
    kernel = disk(radius, alias_blur)
    # filter2D filters each channel of a colour image alone, as the reference's loop over channels
    out = np.stack([cv2.filter2D(im, -1, kernel) for im in x / 255.0])
    return (np.clip(out, 0, 1) * 255).astype(np.uint8)


def motion_kernel(radius: float, sigma: float, angle: float) -> np.ndarray:
    """The motion-blur kernel for one angle (degrees) as a 2-D correlation kernel centred on the
    pixel: ImageMagick's MotionBlurImage as `imagecorruptions` re-implements it, 2 * radius + 1
    Gaussian weights exp(-i^2 / 2 sigma^2) on a one-sided line, summing to 1, at offsets
    ceil(i * cos(angle) - 0.5) columns and ceil(i * sin(angle) - 0.5) rows."""
    width = 2 * int(np.ceil(radius)) + 1
    taps = np.arange(width)
    weights = np.exp(-(taps**2) / (2.0 * sigma**2))
    a = np.deg2rad(angle)
    dy = np.ceil(taps * np.sin(a) - 0.5).astype(int)
    dx = np.ceil(taps * np.cos(a) - 0.5).astype(int)
    centre = width - 1
    kernel = np.zeros((2 * centre + 1, 2 * centre + 1))
    np.add.at(kernel, (centre + dy, centre + dx), weights / weights.sum())
    return kernel


def motion_blur_image(image: np.ndarray, radius: float, sigma: float, angle: float) -> np.ndarray:
    """One uint8 image (H, W[, C]) motion-blurred: the pixels outside repeat the edge (as the
    shifts of imagecorruptions do), the result rounded to uint8 as the reference's PNG from
    ImageMagick is."""
    return cv2.filter2D(image, -1, motion_kernel(radius, sigma, angle), borderType=cv2.BORDER_REPLICATE)


def motion_blur(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    radius, sigma = [(6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5)][severity - 1]
    angles = rng.uniform(-45, 45, size=len(x))
    return np.stack([motion_blur_image(im, radius, sigma, a) for im, a in zip(x, angles, strict=True)])


def clipped_zoom(img: np.ndarray, zoom_factor: float) -> np.ndarray:
    """The reference's clipped_zoom of a batch (N, H, W, C) of square images: the centre crop of
    ceil(H / zoom) px, scipy.ndimage.zoom(order=1) by (zoom, zoom, 1), the surplus trimmed.
    The images are stacked along the channel axis for one call: a factor of 1 there samples
    whole positions, so each image comes out as the reference's call on it alone."""
    n, h, _, channels = img.shape
    ch = int(np.ceil(h / zoom_factor))
    top = (h - ch) // 2
    stacked = np.moveaxis(img[:, top : top + ch, top : top + ch], 0, 2).reshape(ch, ch, n * channels)
    zoomed = scizoom(stacked, (zoom_factor, zoom_factor, 1), order=1)
    trim_top = (zoomed.shape[0] - h) // 2
    zoomed = zoomed[trim_top : trim_top + h, trim_top : trim_top + h]
    return np.moveaxis(zoomed.reshape(h, h, n, channels), 2, 0)


def zoom_blur(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    # np.arange's float steps give 7, 12, 16, 21, 26 factors (1.00 up to 1.06, 1.11, 1.15, 1.20, 1.25)
    c = np.arange(1, [1.06, 1.11, 1.16, 1.21, 1.26][severity - 1], 0.01)
    x = (x / 255.0).astype(np.float32)
    out = np.zeros_like(x)
    for zoom_factor in c:
        out += clipped_zoom(x, zoom_factor)
    x = (x + out) / (len(c) + 1)
    return (np.clip(x, 0, 1) * 255).astype(np.uint8)
