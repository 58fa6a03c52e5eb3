"""Decoding image files into uint8 C x H x W arrays, shared by the image-folder loaders."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image


def decode_rgb(data: bytes, where: str, size: int | None = None) -> np.ndarray:
    """uint8 (3, H, W) pixels of an encoded image, grayscale or CMYK converted to RGB.

    With `size`, the image must already be `size` x `size`; ValueError naming `where` if not."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            rgb = img.convert("RGB")
    except (OSError, ValueError) as err:
        raise ValueError(f"{where} is not a readable image: {err}") from err
    if size is not None and rgb.size != (size, size):
        raise ValueError(f"{where} is {rgb.size[0]}x{rgb.size[1]}, expected {size}x{size}")
    return np.asarray(rgb, dtype=np.uint8).transpose(2, 0, 1)


def resize_center_crop(data: bytes, where: str, resize: int, crop: int) -> np.ndarray:
    """The standard ImageNet evaluation view: shorter side to `resize` (bilinear), then the
    central `crop` x `crop` square; uint8 (3, crop, crop)."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            rgb = img.convert("RGB")
    except (OSError, ValueError) as err:
        raise ValueError(f"{where} is not a readable image: {err}") from err
    w, h = rgb.size
    scale = resize / min(w, h)
    new_w, new_h = max(crop, round(w * scale)), max(crop, round(h * scale))
    rgb = rgb.resize((new_w, new_h), Image.Resampling.BILINEAR)
    left, top = (new_w - crop) // 2, (new_h - crop) // 2
    rgb = rgb.crop((left, top, left + crop, top + crop))
    return np.asarray(rgb, dtype=np.uint8).transpose(2, 0, 1)
