"""The digital corruptions of CIFAR-10-C: contrast, brightness, saturate, jpeg_compression,
pixelate and elastic_transform, as make_cifar_c.py computes them.

Every function takes a batch of uint8 images (N, H, W, 3), a severity 1-5 and a numpy
Generator (only elastic_transform draws from it: image after image, in the reference's order
within an image), and returns the corrupted uint8 batch."""

from __future__ import annotations

from io import BytesIO

import cv2
import numpy as np
from PIL import Image
from scipy.ndimage import map_coordinates
from skimage.color import hsv2rgb, rgb2hsv
from skimage.filters import gaussian


def contrast(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    c = [0.75, 0.5, 0.4, 0.3, 0.15][severity - 1]
    x = x / 255.0
    means = np.mean(x, axis=(1, 2), keepdims=True)  # per image and channel
    return (np.clip((x - means) * c + means, 0, 1) * 255).astype(np.uint8)


def brightness(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    c = [0.05, 0.1, 0.15, 0.2, 0.3][severity - 1]
    x = rgb2hsv(x / 255.0)  # pixel by pixel: a batch converts as its images do
    x[..., 2] = np.clip(x[..., 2] + c, 0, 1)
    return (np.clip(hsv2rgb(x), 0, 1) * 255).astype(np.uint8)


def saturate(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    c = [(0.3, 0), (0.1, 0), (1.5, 0), (2, 0.1), (2.5, 0.2)][severity - 1]
    x = rgb2hsv(x / 255.0)
    x[..., 1] = np.clip(x[..., 1] * c[0] + c[1], 0, 1)
    return (np.clip(hsv2rgb(x), 0, 1) * 255).astype(np.uint8)


def jpeg_compression(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    quality = [80, 65, 58, 50, 40][severity - 1]
    out = np.empty_like(x)
    for k, image in enumerate(x):
        buffer = BytesIO()
        Image.fromarray(image).save(buffer, "JPEG", quality=quality)
        out[k] = np.asarray(Image.open(buffer))
    return out


def pixelate(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    c = [0.95, 0.9, 0.85, 0.75, 0.65][severity - 1]
    out = np.empty_like(x)
    for k, image in enumerate(x):
        im = Image.fromarray(image)
        w, h = im.size
        box = Image.Resampling.BOX
        out[k] = np.asarray(im.resize((int(w * c), int(h * c)), box).resize((w, h), box))
    return out


def _elastic_image(image: np.ndarray, c: tuple[float, float, float], rng: np.random.Generator) -> np.ndarray:
    """One uint8 image (H, W, 3) warped: a random affine map of three points around the centre
    (cv2.getAffineTransform, cv2.warpAffine with reflect-101 borders), then a smooth random
    displacement field (skimage gaussian of uniform noise) sampled by scipy's map_coordinates."""
    image = np.array(image, dtype=np.float32) / 255.0
    shape = image.shape
    shape_size = shape[:2]
    center_square = np.array(shape_size, dtype=np.float32) // 2
    square_size = min(shape_size) // 3
    pts1 = np.array([center_square + square_size,
                     [center_square[0] + square_size, center_square[1] - square_size],
                     center_square - square_size], dtype=np.float32)
    pts2 = pts1 + rng.uniform(-c[2], c[2], size=pts1.shape).astype(np.float32)
    matrix = cv2.getAffineTransform(pts1, pts2)
    image = cv2.warpAffine(image, matrix, shape_size[::-1], borderMode=cv2.BORDER_REFLECT_101)
    dx = (gaussian(rng.uniform(-1, 1, size=shape[:2]), c[1], mode="reflect", truncate=3) * c[0]).astype(np.float32)
    dy = (gaussian(rng.uniform(-1, 1, size=shape[:2]), c[1], mode="reflect", truncate=3) * c[0]).astype(np.float32)
    dx, dy = dx[..., np.newaxis], dy[..., np.newaxis]
    x, y, z = np.meshgrid(np.arange(shape[1]), np.arange(shape[0]), np.arange(shape[2]))
    indices = np.reshape(y + dy, (-1, 1)), np.reshape(x + dx, (-1, 1)), np.reshape(z, (-1, 1))
    warped = map_coordinates(image, indices, order=1, mode="reflect").reshape(shape)
    return (np.clip(warped, 0, 1) * 255).astype(np.uint8)


def elastic_transform(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    # (displacement scale, its smoothing sigma, affine jitter), the reference's fractions of its 32 px
    c = [(32 * 0, 32 * 0, 32 * 0.08), (32 * 0.05, 32 * 0.2, 32 * 0.07), (32 * 0.08, 32 * 0.06, 32 * 0.06),
         (32 * 0.1, 32 * 0.04, 32 * 0.05), (32 * 0.1, 32 * 0.03, 32 * 0.03)][severity - 1]
    return np.stack([_elastic_image(image, c, rng) for image in x])
