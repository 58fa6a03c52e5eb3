"""The four noises of CIFAR-10-C: gaussian_noise, shot_noise, impulse_noise (scikit-image's
salt and pepper) and speckle_noise, as make_cifar_c.py computes them, drawing from the numpy
Generator given instead of numpy's global state.

Every function takes a batch of uint8 images (N, H, W, 3), a severity 1-5 and the Generator,
and returns the corrupted uint8 batch. For one image the draws are the reference's, in its
order; gaussian, shot and speckle noise draw value after value, so a batch gets the draws of
its images one after the other, while impulse noise's two passes go over the whole batch."""

from __future__ import annotations

import numpy as np
from skimage.util import random_noise


def gaussian_noise(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    c = [0.04, 0.06, 0.08, 0.09, 0.10][severity - 1]
    x = x / 255.0
    return (np.clip(x + rng.normal(size=x.shape, scale=c), 0, 1) * 255).astype(np.uint8)


def shot_noise(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    c = [500, 250, 100, 75, 50][severity - 1]
    x = x / 255.0
    return (np.clip(rng.poisson(x * c) / c, 0, 1) * 255).astype(np.uint8)


def impulse_noise(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    c = [0.01, 0.02, 0.03, 0.05, 0.07][severity - 1]
    # scikit-image draws which values flip, then salt or pepper, each over the whole array given
    x = random_noise(x / 255.0, mode="s&p", amount=c, rng=rng)
    return (np.clip(x, 0, 1) * 255).astype(np.uint8)


def speckle_noise(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    c = [0.06, 0.1, 0.12, 0.16, 0.2][severity - 1]
    x = x / 255.0
    return (np.clip(x + x * rng.normal(size=x.shape, scale=c), 0, 1) * 255).astype(np.uint8)
