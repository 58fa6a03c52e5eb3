"""CIFAR-10-C regenerated offline: the 19 common corruptions of 32x32 RGB test images with the
per-severity constants that Hendrycks & Dietterich (2019) published for CIFAR-sized images
(`make_cifar_c.py` in ImageNet-C/create_c/ of github.com/hendrycks/robustness).

Each corruption calls the libraries the reference calls (OpenCV, scikit-image, scipy.ndimage,
Pillow) in the reference's order, with its float32/float64 and uint8 steps:
`noise` (gaussian, shot, impulse, speckle), `blur` (gaussian, defocus, glass, motion, zoom),
`weather` (snow, frost, fog, spatter), `digital` (contrast, brightness, saturate, JPEG,
pixelate, elastic). Where the reference differs on purpose (docs/methods.md, CIFAR-10-C):
- ImageMagick's motion blur (the reference calls it through Wand; motion_blur, snow) is not
  installable here: `imagecorruptions`' stand-in, a one-sided line of Gaussian weights with
  the edge repeated, written as an OpenCV filter2D kernel (blur.motion_kernel).
- The random draws come from one numpy Generator per (seed, corruption, severity) instead of
  numpy's unseeded global state: a regenerated image is close to, not bit-equal with, the
  official archive (study.data.cifar10c reads that one). Results say `regenerated`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from study.data.corruptions.blur import defocus_blur, gaussian_blur, glass_blur, motion_blur, motion_kernel, zoom_blur
from study.data.corruptions.digital import brightness, contrast, elastic_transform, jpeg_compression, pixelate, saturate
from study.data.corruptions.noise import gaussian_noise, impulse_noise, shot_noise, speckle_noise
from study.data.corruptions.weather import fog, frost, snow, spatter

__all__ = ["CIFAR_SIDE", "CORRUPTIONS", "OFFICIAL_CORRUPTIONS", "SEVERITIES", "SIZE_FREE", "check_image_size",
           "corrupt", "corruption_rng", "motion_kernel"]

SEVERITIES = (1, 2, 3, 4, 5)

# Each: uint8 images (N, H, W, 3), severity 1-5, Generator -> corrupted uint8 images (N, H, W, 3).
Corruption = Callable[[np.ndarray, int, np.random.Generator], np.ndarray]

# The 19 corruptions of the official archive, in its order (which also seeds each one's rng).
CORRUPTIONS: dict[str, Corruption] = {
    "gaussian_noise": gaussian_noise,
    "shot_noise": shot_noise,
    "impulse_noise": impulse_noise,
    "defocus_blur": defocus_blur,
    "glass_blur": glass_blur,
    "motion_blur": motion_blur,
    "zoom_blur": zoom_blur,
    "snow": snow,
    "frost": frost,
    "fog": fog,
    "brightness": brightness,
    "contrast": contrast,
    "elastic_transform": elastic_transform,
    "pixelate": pixelate,
    "jpeg_compression": jpeg_compression,
    "speckle_noise": speckle_noise,
    "gaussian_blur": gaussian_blur,
    "spatter": spatter,
    "saturate": saturate,
}
OFFICIAL_CORRUPTIONS = tuple(CORRUPTIONS)

# Computed pixel by pixel or from each image's own mean: no constant of these is a length in
# pixels, so they mean the same at any image size. The others (blurs, zoom, pixelate, JPEG's
# 8x8 blocks, the weather) carry the 32x32 image in their constants.
SIZE_FREE = ("gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise", "brightness", "contrast", "saturate")
CIFAR_SIDE = 32


def check_image_size(corruptions: Sequence[str], shape: Sequence[int]) -> None:
    """Raise ValueError unless `shape` (C, H, W) is RGB and every corruption is defined at its
    size: any size for the SIZE_FREE ones, 32x32 for the rest."""
    if len(shape) != 3 or shape[0] != 3:
        raise ValueError(f"CIFAR-10-C corrupts RGB images (3, H, W), got {tuple(shape)}")
    if tuple(shape[1:]) == (CIFAR_SIDE, CIFAR_SIDE):
        return
    sized = [c for c in corruptions if c not in SIZE_FREE]
    if sized:
        raise ValueError(f"corruption(s) {', '.join(sized)} are defined for 32x32 images, got "
                         f"{shape[1]}x{shape[2]}; at other sizes valid: {', '.join(SIZE_FREE)}")


def corruption_rng(corruption: str, severity: int, seed: int = 0) -> np.random.Generator:
    """The Generator `corrupt` draws from for (seed, corruption, severity)."""
    return np.random.default_rng([seed, OFFICIAL_CORRUPTIONS.index(corruption), severity])


def corrupt(images: torch.Tensor, corruption: str, severity: int, seed: int = 0) -> torch.Tensor:
    """uint8 (N,3,H,W) -> corrupted uint8 (N,3,H,W); deterministic for a seed."""
    if corruption not in CORRUPTIONS:
        raise ValueError(f"unknown corruption {corruption!r}; valid: {', '.join(OFFICIAL_CORRUPTIONS)}")
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {SEVERITIES}, got {severity}")
    if images.dtype != torch.uint8 or images.dim() != 4 or images.shape[1] != 3:
        raise ValueError(f"expected uint8 RGB images (N,3,H,W), got {images.dtype} {tuple(images.shape)}")
    x = np.ascontiguousarray(images.permute(0, 2, 3, 1).numpy())
    out = CORRUPTIONS[corruption](x, severity, corruption_rng(corruption, severity, seed))
    return torch.from_numpy(np.ascontiguousarray(out)).permute(0, 3, 1, 2).contiguous()
