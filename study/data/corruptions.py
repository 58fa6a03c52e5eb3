"""CIFAR-10-C regenerated offline: common corruptions of 32x32 RGB test images with the
per-severity constants that Hendrycks & Dietterich (2019) published for CIFAR-sized images.

Written with numpy, torch and Pillow only (no OpenCV, scikit-image or ImageMagick); the
blur kernels, colour-space conversions and border handling follow the reference
definitions, so a regenerated image is close to, not bit-equal with, the official archive.
Every result computed from these images is labelled `regenerated`.

Corruptions here: the noise, blur, digital and colour ones whose definitions need no
external assets. Not regenerated (they need ImageMagick's motion blur, the frost photos or
random fractal/elastic fields we could not reproduce faithfully): glass_blur, motion_blur,
snow, frost, fog, spatter, elastic_transform.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

SEVERITIES = (1, 2, 3, 4, 5)


def _gaussian_kernel(sigma: float, radius: int) -> np.ndarray:
    t = np.arange(-radius, radius + 1, dtype=np.float64)
    k = np.exp(-0.5 * (t / sigma) ** 2)
    return k / k.sum()


def _conv2d(x: np.ndarray, kernel: np.ndarray, mode: str) -> np.ndarray:
    """Filter HWC float images (N,H,W,C) with a 2-D kernel, same size, padded by `mode`."""
    t = torch.from_numpy(x).permute(0, 3, 1, 2).float()
    n, c, h, w = t.shape
    kh, kw = kernel.shape
    t = F.pad(t.reshape(n * c, 1, h, w), (kw // 2, kw // 2, kh // 2, kh // 2), mode=mode)
    out = F.conv2d(t, torch.from_numpy(kernel).float()[None, None])
    return out.reshape(n, c, h, w).permute(0, 2, 3, 1).numpy().astype(np.float64)


def _gaussian_blur(x: np.ndarray, sigma: float) -> np.ndarray:
    # skimage.filters.gaussian: truncate 4 sigma, 'nearest' borders
    radius = max(1, int(4.0 * sigma + 0.5))
    k = _gaussian_kernel(sigma, radius)
    return _conv2d(x, np.outer(k, k), "replicate")


def _rgb_to_hsv(x: np.ndarray) -> np.ndarray:
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    v = x.max(-1)
    delta = v - x.min(-1)
    s = np.where(v > 0, delta / np.where(v > 0, v, 1), 0.0)
    d = np.where(delta > 0, delta, 1)
    h = np.where(v == r, (g - b) / d, np.where(v == g, 2.0 + (b - r) / d, 4.0 + (r - g) / d))
    h = np.where(delta > 0, (h / 6.0) % 1.0, 0.0)
    return np.stack([h, s, v], -1)


def _hsv_to_rgb(x: np.ndarray) -> np.ndarray:
    h, s, v = x[..., 0], x[..., 1], x[..., 2]
    i = np.floor(h * 6).astype(int) % 6
    f = h * 6 - np.floor(h * 6)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    table = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    out = np.zeros_like(x)
    for k, (r, g, b) in enumerate(table):
        sel = i == k
        out[..., 0][sel], out[..., 1][sel], out[..., 2][sel] = r[sel], g[sel], b[sel]
    return out


# Each corruption: (N,H,W,C) floats in [0,1], severity 1-5, rng -> floats in [0,1].
def gaussian_noise(x, s, rng):
    c = [0.04, 0.06, 0.08, 0.09, 0.10][s - 1]
    return x + rng.normal(size=x.shape, scale=c)


def shot_noise(x, s, rng):
    c = [500, 250, 100, 75, 50][s - 1]
    return rng.poisson(x * c) / c


def impulse_noise(x, s, rng):
    # salt and pepper on `amount` of the values, half each (skimage random_noise 's&p')
    c = [0.01, 0.02, 0.03, 0.05, 0.07][s - 1]
    out = x.copy()
    hit = rng.random(x.shape) < c
    salt = rng.random(x.shape) < 0.5
    out[hit & salt], out[hit & ~salt] = 1.0, 0.0
    return out


def speckle_noise(x, s, rng):
    c = [0.06, 0.1, 0.12, 0.16, 0.2][s - 1]
    return x + x * rng.normal(size=x.shape, scale=c)


def gaussian_blur(x, s, rng):
    return _gaussian_blur(x, [0.4, 0.6, 0.7, 0.8, 1.0][s - 1])


def defocus_blur(x, s, rng):
    radius, alias_blur = [(0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1)][s - 1]
    grid = np.arange(-8, 9)
    xx, yy = np.meshgrid(grid, grid)
    disk = ((xx**2 + yy**2) <= radius**2).astype(np.float64)
    disk /= disk.sum()
    k = _gaussian_kernel(alias_blur, 1)  # the reference smooths the disk with a 3x3 Gaussian
    disk = _conv2d(disk[None, :, :, None], np.outer(k, k), "reflect")[0, :, :, 0]
    return _conv2d(x, disk, "reflect")


def contrast(x, s, rng):
    c = [0.75, 0.5, 0.4, 0.3, 0.15][s - 1]
    means = x.mean(axis=(1, 2), keepdims=True)  # per image and channel
    return (x - means) * c + means


def brightness(x, s, rng):
    c = [0.05, 0.1, 0.15, 0.2, 0.3][s - 1]
    hsv = _rgb_to_hsv(x)
    hsv[..., 2] = np.clip(hsv[..., 2] + c, 0, 1)
    return _hsv_to_rgb(hsv)


def saturate(x, s, rng):
    c = [(0.3, 0), (0.1, 0), (1.5, 0), (2, 0.1), (2.5, 0.2)][s - 1]
    hsv = _rgb_to_hsv(x)
    hsv[..., 1] = np.clip(hsv[..., 1] * c[0] + c[1], 0, 1)
    return _hsv_to_rgb(hsv)


def _per_image(x: np.ndarray, fn: Callable[[Image.Image], Image.Image]) -> np.ndarray:
    out = [np.asarray(fn(Image.fromarray(np.uint8(np.clip(im, 0, 1) * 255 + 0.5))), dtype=np.float64) / 255
           for im in x]
    return np.stack(out)


def jpeg_compression(x, s, rng):
    quality = [80, 65, 58, 50, 40][s - 1]

    def fn(im):
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=quality)
        return Image.open(buf).convert("RGB")

    return _per_image(x, fn)


def pixelate(x, s, rng):
    c = [0.95, 0.9, 0.85, 0.75, 0.65][s - 1]

    def fn(im):
        w, h = im.size
        return im.resize((int(w * c), int(h * c)), Image.BOX).resize((w, h), Image.BOX)

    return _per_image(x, fn)


def zoom_blur(x, s, rng):
    zooms = np.arange(1, [1.06, 1.11, 1.16, 1.21, 1.26][s - 1], 0.01)
    t = torch.from_numpy(x).permute(0, 3, 1, 2).float()
    h = t.shape[-1]
    out = torch.zeros_like(t)
    for z in zooms:  # centre crop of size h/z, scaled back up to h (bilinear): a zoom by z
        ch = int(np.ceil(h / z))
        top = (h - ch) // 2
        crop = t[..., top : top + ch, top : top + ch]
        big = F.interpolate(crop, scale_factor=float(z), mode="bilinear", align_corners=False)
        trim = (big.shape[-1] - h) // 2
        out += big[..., trim : trim + h, trim : trim + h]
    return ((t + out) / (len(zooms) + 1)).permute(0, 2, 3, 1).numpy().astype(np.float64)


CORRUPTIONS: dict[str, Callable] = {
    "gaussian_noise": gaussian_noise,
    "shot_noise": shot_noise,
    "impulse_noise": impulse_noise,
    "speckle_noise": speckle_noise,
    "gaussian_blur": gaussian_blur,
    "defocus_blur": defocus_blur,
    "zoom_blur": zoom_blur,
    "contrast": contrast,
    "brightness": brightness,
    "saturate": saturate,
    "jpeg_compression": jpeg_compression,
    "pixelate": pixelate,
}
# The 19 corruptions of the official archive; those not in CORRUPTIONS are not regenerated.
OFFICIAL_CORRUPTIONS = (
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur", "zoom_blur",
    "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate", "jpeg_compression",
    "speckle_noise", "gaussian_blur", "spatter", "saturate",
)


def corrupt(images: torch.Tensor, corruption: str, severity: int, seed: int = 0) -> torch.Tensor:
    """uint8 (N,3,H,W) -> corrupted uint8 (N,3,H,W); deterministic for a seed."""
    if corruption not in CORRUPTIONS:
        missing = sorted(set(OFFICIAL_CORRUPTIONS) - set(CORRUPTIONS))
        raise ValueError(f"unknown or unavailable corruption {corruption!r}; regenerated: "
                         f"{', '.join(CORRUPTIONS)} (not regenerated offline: {', '.join(missing)})")
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {SEVERITIES}, got {severity}")
    if images.dtype != torch.uint8 or images.dim() != 4 or images.shape[1] != 3:
        raise ValueError(f"expected uint8 RGB images (N,3,H,W), got {images.dtype} {tuple(images.shape)}")
    rng = np.random.default_rng([seed, OFFICIAL_CORRUPTIONS.index(corruption), severity])
    x = images.permute(0, 2, 3, 1).numpy().astype(np.float64) / 255
    out = np.clip(CORRUPTIONS[corruption](x, severity, rng), 0, 1)
    # truncation to uint8, as the reference stores its arrays
    return torch.from_numpy(np.uint8(out * 255)).permute(0, 3, 1, 2).contiguous()
