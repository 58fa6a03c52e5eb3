"""CIFAR-10-C regenerated offline: the 19 common corruptions of 32x32 RGB test images with
the per-severity constants that Hendrycks & Dietterich (2019) published for CIFAR-sized
images (`make_cifar_c.py` in ImageNet-C/create_c/ of github.com/hendrycks/robustness).

Written with numpy, scipy, torch and Pillow only (no OpenCV, scikit-image or ImageMagick).
The reference's scipy and Pillow steps (ndimage.zoom, gaussian_filter, map_coordinates, JPEG,
BOX resizing) are the same calls or their exact equivalents; its scikit-image steps are the
scipy filters they wrap (gaussian) or the same formulas (HSV conversion, salt-and-pepper
noise). The random draws come from one numpy Generator per (seed, corruption, severity)
instead of the reference's unseeded global state, so a regenerated image is close to, not
bit-equal with, the official archive (study.data.cifar10c reads that one). Every result
computed from these images is labelled `regenerated`. Where the reference calls a library we
do not use, we re-implement it:

- motion_blur and snow: ImageMagick's MotionBlurImage is approximated by our own one-sided
  line kernel (`motion_kernel`): Gaussian weights exp(-i^2 / 2 sigma^2) on taps i = 0..2r
  along the angle, edge pixels repeated, the result rounded to 8 bits as the PNG round trip
  of the reference does.
- spatter (water, severities 1-3): cv2.Canny (Sobel L1 gradient, OpenCV's fixed-point
  direction sectors and tie rules, hysteresis), distanceTransform (DIST_L2 with the 5x5
  chamfer mask, OpenCV's two passes in 16-bit fixed point), blur, equalizeHist and filter2D
  with OpenCV's roundings to uint8.
- defocus_blur: cv2.GaussianBlur and filter2D are correlations with reflect-101 borders.
- elastic_transform: cv2.warpAffine is bilinear sampling at the inverse affine map, the
  positions rounded to 1/32 px as OpenCV's fixed-point INTER_LINEAR does, reflect-101 borders
  (scipy's 'mirror').
- frost: the frost photographs ship in the PyPI package `imagecorruptions`; only its image
  files are read (its code imports OpenCV), found without importing it.
"""

from __future__ import annotations

import functools
import importlib.util
import io
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from scipy import ndimage

SEVERITIES = (1, 2, 3, 4, 5)


def _gaussian_kernel(sigma: float, radius: int) -> np.ndarray:
    t = np.arange(-radius, radius + 1, dtype=np.float64)
    k = np.exp(-0.5 * (t / sigma) ** 2)
    return k / k.sum()


def _blur2d(a: np.ndarray, sigma: float, mode: str = "nearest", truncate: float = 4.0) -> np.ndarray:
    """Gaussian blur over the image axes 1, 2 of (N,H,W[,C]); skimage.filters.gaussian is
    this scipy filter ('nearest' borders, truncate 4) unless the reference says otherwise."""
    return ndimage.gaussian_filter(a, [0, sigma, sigma] + [0] * (a.ndim - 3), mode=mode, truncate=truncate)


def _zoom_weights(size: int, zoom: float) -> np.ndarray:
    """(round(size * zoom), size) matrix of scipy.ndimage.zoom(order=1) along one axis: output
    pixel o samples the input at o * (size - 1) / (out - 1), the end pixels aligned (grid_mode
    False), linearly between its two neighbours."""
    out = int(round(size * zoom))  # Python's round, as scipy's output shape
    pos = np.arange(out) * ((size - 1) / (out - 1))
    left = np.minimum(np.floor(pos).astype(int), size - 1)
    frac = pos - left
    weights = np.zeros((out, size))
    np.add.at(weights, (np.arange(out), left), 1 - frac)
    np.add.at(weights, (np.arange(out), np.minimum(left + 1, size - 1)), frac)
    return weights


def _clipped_zoom(a: np.ndarray, zoom: float) -> np.ndarray:
    """The reference's clipped_zoom for a batch (N,H,W[,C]) of square images: the centre crop
    of ceil(H / zoom) pixels, zoomed by scipy.ndimage.zoom(order=1), the surplus trimmed
    (floor of half of it from the top and left). scipy's bilinear zoom is separable and the
    same for every image, so it is applied as one weight matrix per axis (float64, like
    scipy's own arithmetic) instead of one scipy call per image."""
    h = a.shape[1]
    ch = int(np.ceil(h / zoom))
    top = (h - ch) // 2
    weights = _zoom_weights(ch, zoom)
    trim = (weights.shape[0] - h) // 2
    weights = weights[trim : trim + h]
    crop = a[:, top : top + ch, top : top + ch].astype(np.float64)
    rows = np.einsum("ij,njk...->nik...", weights, crop, optimize=True)
    return np.einsum("ij,nkj...->nki...", weights, rows, optimize=True)


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
    return _blur2d(x, [0.4, 0.6, 0.7, 0.8, 1.0][s - 1])


def defocus_blur(x, s, rng):
    radius, alias_blur = [(0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1)][s - 1]
    grid = np.arange(-8, 9)  # the reference's 17x17 grid for radii up to 8
    xx, yy = np.meshgrid(grid, grid)
    disk = ((xx**2 + yy**2) <= radius**2).astype(np.float32)
    disk /= disk.sum()
    # the reference antialiases the float32 disk with cv2.GaussianBlur, 3x3, reflect-101 borders
    k = _gaussian_kernel(alias_blur, 1)
    disk = ndimage.correlate(disk, np.outer(k, k).astype(np.float32), mode="mirror")
    # Rows and columns of exact zeros add nothing, so dropping them leaves the result as is.
    rows, cols = np.flatnonzero(disk.any(1)), np.flatnonzero(disk.any(0))
    disk = disk[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1].astype(np.float64)
    # cv2.filter2D: correlation per channel, reflect-101 borders (scipy's 'mirror')
    return ndimage.correlate(x, disk[None, :, :, None], mode="mirror")


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
    # np.arange's float steps give 7, 12, 16, 21, 26 factors (1.00 up to 1.06, 1.11, 1.15, 1.20, 1.25),
    # as in the reference, which writes the same expressions.
    zooms = np.arange(1, [1.06, 1.11, 1.16, 1.21, 1.26][s - 1], 0.01)
    x = x.astype(np.float32)  # the reference works in float32: each zoom stored as float32, summed in float32
    out = np.zeros_like(x)
    for z in zooms:
        out += _clipped_zoom(x, z).astype(np.float32)
    return (x + out) / (len(zooms) + 1)


# ---------------------------------------------------------------- the seven added in full
def glass_blur(x: np.ndarray, s: int, rng: np.random.Generator) -> np.ndarray:
    sigma, delta, iterations = [(0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2)][s - 1]
    n, h, w, _ = x.shape
    x = np.floor(_blur2d(x, sigma) * 255) / 255  # the reference stores the first blur as uint8
    spots = [(i, j) for i in range(h - delta, delta, -1) for j in range(w - delta, delta, -1)]
    # offsets from randint(-delta, delta): the upper bound is excluded, as in the reference
    shifts = rng.integers(-delta, delta, size=(iterations, len(spots), 2, n), dtype=np.int8)  # small for 10k images
    img = np.arange(n)
    for it in range(iterations):
        for (i, j), (dx, dy) in zip(spots, shifts[it], strict=True):
            # The reference's tuple "swap" of two numpy views copies the neighbour onto the
            # pixel and leaves the neighbour as it was; the published images carry that, so copy.
            x[img, i, j] = x[img, i + dy, j + dx]
    return _blur2d(x, sigma)


def _motion_taps(radius: float, sigma: float, angle: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weights (T,) and row/column offsets (N,T) of ImageMagick's motion blur, one angle per image."""
    taps = np.arange(2 * int(np.ceil(radius)) + 1)  # GetOptimalKernelWidth1D for radius > 0
    weights = np.exp(-(taps**2) / (2.0 * sigma**2))
    a = np.deg2rad(np.asarray(angle, dtype=np.float64))[..., None]
    # ImageMagick rounds each offset with ceil(v - 0.5)
    dy = np.ceil(taps * np.sin(a) - 0.5).astype(int)
    dx = np.ceil(taps * np.cos(a) - 0.5).astype(int)
    return weights / weights.sum(), dy, dx


def motion_kernel(radius: float, sigma: float, angle: float) -> np.ndarray:
    """The motion-blur kernel for one angle (degrees) as a 2-D array centred on the pixel:
    a one-sided line of Gaussian weights summing to 1."""
    weights, dy, dx = _motion_taps(radius, sigma, np.array([angle]))
    centre = len(weights) - 1
    kernel = np.zeros((2 * centre + 1, 2 * centre + 1))
    np.add.at(kernel, (centre + dy[0], centre + dx[0]), weights)
    return kernel


def _motion_blur(x: np.ndarray, radius: float, sigma: float, angle: np.ndarray) -> np.ndarray:
    """Motion blur of (N,H,W,C) with one angle per image; pixels outside repeat the edge."""
    weights, dy, dx = _motion_taps(radius, sigma, angle)
    n, h, w = x.shape[:3]
    img, rows, cols = np.arange(n)[:, None, None], np.arange(h)[None, :, None], np.arange(w)[None, None, :]
    out = np.zeros_like(x)
    for t, weight in enumerate(weights):
        r = np.clip(rows + dy[:, t, None, None], 0, h - 1)
        c = np.clip(cols + dx[:, t, None, None], 0, w - 1)
        out += weight * x[img, r, c]
    return np.round(np.clip(out, 0, 1) * 255) / 255  # ImageMagick writes 8-bit PNG


def motion_blur(x: np.ndarray, s: int, rng: np.random.Generator) -> np.ndarray:
    radius, sigma = [(6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5)][s - 1]
    return _motion_blur(x, radius, sigma, rng.uniform(-45, 45, size=len(x)))


def snow(x: np.ndarray, s: int, rng: np.random.Generator) -> np.ndarray:
    loc, scale, zoom, threshold, radius, sigma, keep = [
        (0.1, 0.2, 1, 0.6, 8, 3, 0.95), (0.1, 0.2, 1, 0.5, 10, 4, 0.9), (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9),
        (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85), (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8)][s - 1]
    flakes = _clipped_zoom(rng.normal(loc, scale, size=x.shape[:3]), zoom)
    flakes[flakes < threshold] = 0
    flakes = np.floor(np.clip(flakes, 0, 1) * 255)[..., None] / 255  # an 8-bit greyscale PNG in the reference
    flakes = _motion_blur(flakes, radius, sigma, rng.uniform(-135, -45, size=len(x)))
    grey = x @ np.array([0.299, 0.587, 0.114])  # cv2 RGB2GRAY
    x = keep * x + (1 - keep) * np.maximum(x, grey[..., None] * 1.5 + 0.5)
    return x + flakes + np.rot90(flakes, 2, axes=(1, 2))


# cv2.imread of the reference drops the PNGs' alpha; it draws randint(5), so frost6 never.
FROST_FILES = ("frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg")


@functools.lru_cache(maxsize=1)
def _frost_photos() -> tuple[np.ndarray, ...]:
    # find_spec locates the package without running its __init__, which needs OpenCV.
    spec = importlib.util.find_spec("imagecorruptions")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the frost corruption needs the frost photographs of the PyPI package "
                                  "'imagecorruptions', which is not installed: pip install --no-deps imagecorruptions")
    folder = Path(next(iter(spec.submodule_search_locations))) / "frost"
    photos = []
    for name in FROST_FILES:
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder / name} is missing: reinstall the PyPI package 'imagecorruptions'")
        with Image.open(folder / name) as im:
            rgb = np.asarray(im.convert("RGB"), dtype=np.float64) / 255
        # cv2.resize(fx=fy=0.2, INTER_LINEAR) samples source pixel 5k + 2 exactly (no interpolation)
        photos.append(rgb[2::5, 2::5])
    return tuple(photos)


def frost(x: np.ndarray, s: int, rng: np.random.Generator) -> np.ndarray:
    keep, amount = [(1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45)][s - 1]
    photos = _frost_photos()
    n, h, w, _ = x.shape
    which = rng.integers(len(photos), size=n)
    tops = rng.integers(0, [photos[k].shape[0] - h for k in which])
    lefts = rng.integers(0, [photos[k].shape[1] - w for k in which])
    ice = np.stack([photos[k][t : t + h, left : left + w] for k, t, left in zip(which, tops, lefts, strict=True)])
    return keep * x + amount * ice


def _plasma_fractal(n: int, size: int, decay: float, rng: np.random.Generator) -> np.ndarray:
    """(n, size, size) diamond-square height maps in [0, 1], wrapping at the borders
    (size a power of two): each new point is the mean of its four neighbours plus uniform
    noise of half-width wibble^2, wibble starting at 100 and divided by `decay` per level."""
    hm = np.zeros((n, size, size))
    step, wibble = size, 100.0
    while step >= 2:
        half = step // 2

        def fill(total: np.ndarray, wibble: float = wibble) -> np.ndarray:
            return total / 4 + wibble * rng.uniform(-wibble, wibble, total.shape)

        corners = hm[:, ::step, ::step]
        around = corners + np.roll(corners, -1, axis=1)
        hm[:, half::step, half::step] = fill(around + np.roll(around, -1, axis=2))
        centres = hm[:, half::step, half::step]
        # points between two corners of a row: the centres above and below, the corners left and right
        hm[:, ::step, half::step] = fill(centres + np.roll(centres, 1, axis=1) + corners + np.roll(corners, -1, axis=2))
        # points between two corners of a column: the centres left and right, the corners above and below
        hm[:, half::step, ::step] = fill(centres + np.roll(centres, 1, axis=2) + corners + np.roll(corners, -1, axis=1))
        step, wibble = half, wibble / decay
    hm -= hm.min(axis=(1, 2), keepdims=True)
    return hm / hm.max(axis=(1, 2), keepdims=True)


def fog(x: np.ndarray, s: int, rng: np.random.Generator) -> np.ndarray:
    strength, decay = [(0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75)][s - 1]
    n, h, w, _ = x.shape
    size = 1 << int(np.ceil(np.log2(max(h, w, 2))))  # the reference's 32x32 map, cropped
    haze = _plasma_fractal(n, size, decay, rng)[:, :h, :w, None]
    peak = x.max(axis=(1, 2, 3), keepdims=True)  # each image's brightest value is kept
    return (x + strength * haze) * peak / (peak + strength)


_SOBEL_Y = np.array([[[-1, -2, -1], [0, 0, 0], [1, 2, 1]]], dtype=np.float64)


def _canny(img: np.ndarray, low: int, high: int) -> np.ndarray:
    """Edges of a batch (N,H,W) of integer-valued images as cv2.Canny (aperture 3, L1 gradient)
    finds them: the Sobel gradient with repeated edges, thinned to its local maxima across the
    edge, kept above `high`, or above `low` when 8-connected to such."""
    # (ndimage.sobel would also smooth across the batch axis)
    gy = ndimage.correlate(img, _SOBEL_Y, mode="nearest").astype(np.int64)
    gx = ndimage.correlate(img, np.swapaxes(_SOBEL_Y, 1, 2), mode="nearest").astype(np.int64)
    ax, ay = np.abs(gx), np.abs(gy)
    mag = ax + ay
    # OpenCV's direction test in fixed point: tan(22.5 deg) as 13573 / 2^15; the rest is diagonal
    tg22 = ax * 13573
    horizontal = (ay << 15) < tg22
    vertical = (ay << 15) > tg22 + (ax << 16)
    padded = np.pad(mag, ((0, 0), (1, 1), (1, 1)))  # zero magnitude outside, as OpenCV's buffers
    h, w = mag.shape[1:]

    def at(dy: int, dx: int) -> np.ndarray:
        return padded[:, 1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w]

    # OpenCV breaks ties towards the right / lower neighbour along the axes, but on diagonals
    # keeps a pixel only if it is strictly above both neighbours.
    peak = np.where(horizontal, (mag > at(0, -1)) & (mag >= at(0, 1)),
                    np.where(vertical, (mag > at(-1, 0)) & (mag >= at(1, 0)),
                             np.where(gx * gy > 0, (mag > at(-1, -1)) & (mag > at(1, 1)),
                                      (mag > at(-1, 1)) & (mag > at(1, -1)))))
    weak = peak & (mag > low)
    connect = np.zeros((3, 3, 3))
    connect[1] = 1  # 8-connected within an image, never across images
    groups, _ = ndimage.label(weak, structure=connect)
    return weak & np.isin(groups, groups[weak & (mag > high)])


# cv2.distanceTransform(DIST_L2, 5): the 5x5 chamfer metric, steps 1, 1.4 (diagonal) and
# 2.1969 (knight's move), summed in 16-bit fixed point.
_CHAMFER = tuple(int(round(v * 65536)) for v in (1.0, 1.4, 2.1969))


def _chamfer_distance(edges: np.ndarray) -> np.ndarray:
    """Distance of every pixel of (N,H,W) to the nearest True pixel of its image, by OpenCV's
    two raster passes with the 5x5 chamfer mask; an image without edges gets OpenCV's cap 8192."""
    hv, diag, knight = _CHAMFER
    n, h, w = edges.shape
    t = np.full((n, h + 4, w + 4), 2**31 - 1, dtype=np.int64)  # two rows and columns of 'far' around
    ramp = np.arange(w) * hv
    for i in range(2, h + 2):  # top to bottom, each row from the two above, then left to right
        above = np.minimum.reduce([t[:, i - 2, 1 : w + 1] + knight, t[:, i - 2, 3 : w + 3] + knight,
                                   t[:, i - 1, 0:w] + knight, t[:, i - 1, 1 : w + 1] + diag,
                                   t[:, i - 1, 2 : w + 2] + hv, t[:, i - 1, 3 : w + 3] + diag,
                                   t[:, i - 1, 4 : w + 4] + knight])
        above[edges[:, i - 2]] = 0
        # the left neighbour's chain, d[j] = min(above[j], d[j-1] + hv), as a running minimum
        t[:, i, 2 : w + 2] = np.minimum.accumulate(above - ramp, axis=1) + ramp
    for i in range(h + 1, 1, -1):  # bottom to top, from the two rows below, then right to left
        below = np.minimum.reduce([t[:, i, 2 : w + 2], t[:, i + 2, 3 : w + 3] + knight,
                                   t[:, i + 2, 1 : w + 1] + knight, t[:, i + 1, 4 : w + 4] + knight,
                                   t[:, i + 1, 3 : w + 3] + diag, t[:, i + 1, 2 : w + 2] + hv,
                                   t[:, i + 1, 1 : w + 1] + diag, t[:, i + 1, 0:w] + knight])
        t[:, i, 2 : w + 2] = (np.minimum.accumulate(below[:, ::-1] - ramp, axis=1) + ramp)[:, ::-1]
    return np.minimum(t[:, 2:-2, 2:-2], (2**31 - 1) >> 2) / 65536


def _equalize_hist(img: np.ndarray) -> np.ndarray:
    """cv2.equalizeHist of each image of (N,H,W), integer-valued in 0..255: the lookup table is
    round(float32(count below or at v, less the lowest value's count) * float32(255 / rest))."""
    n = len(img)
    v = img.reshape(n, -1).astype(np.int64)
    size = v.shape[1]
    hist = np.bincount((v + 256 * np.arange(n)[:, None]).ravel(), minlength=256 * n).reshape(n, 256)
    first = np.argmax(hist > 0, axis=1)
    lowest = hist[np.arange(n), first]
    rest = np.maximum(size - lowest, 1).astype(np.float32)
    lut = np.round((np.cumsum(hist, axis=1) - lowest[:, None]).astype(np.float32) * (np.float32(255) / rest)[:, None])
    lut = np.where((lowest == size)[:, None], np.arange(256), np.clip(lut, 0, 255))  # one value only: unchanged
    return np.take_along_axis(lut, v, axis=1).reshape(img.shape).astype(np.float64)


_BOX = np.ones((1, 3, 3))
_EMBOSS = np.array([[[-2, -1, 0], [-1, 1, 1], [0, 1, 2]]], dtype=np.float64)


def _water(liquid: np.ndarray) -> np.ndarray:
    """Shading of the liquid layers (N,H,W), as the reference's water branch draws them, in [0, 1].
    Every cv2 filter below uses reflect-101 borders (scipy's 'mirror')."""
    # The reference continues on the uint8 layer; a value above 1 (rare) is kept at 255
    # where its astype would wrap around.
    layer = np.floor(np.minimum(liquid, 1) * 255)
    dist = np.minimum(_chamfer_distance(_canny(layer, 50, 150)), 20)  # THRESH_TRUNC at 20
    # cv2.blur of float32: the 3x3 sum in double times 1/9, stored as float32; astype(uint8) truncates
    box = ndimage.correlate(dist, _BOX, mode="mirror") * (1.0 / 9)
    dist = np.floor(box.astype(np.float32)).astype(np.float64)
    dist = _equalize_hist(dist)
    dist = np.clip(np.round(ndimage.correlate(dist, _EMBOSS, mode="mirror")), 0, 255)  # filter2D to uint8
    dist = np.round(ndimage.correlate(dist, _BOX, mode="mirror") / 9)  # cv2.blur of uint8 rounds to uint8
    shade = layer * dist
    peak = shade.max(axis=(1, 2), keepdims=True)
    # the reference divides by zero when no drop has shading (its image turns to NaN); leave those unshaded
    return np.divide(shade, peak, out=np.zeros_like(shade), where=peak > 0)


def spatter(x: np.ndarray, s: int, rng: np.random.Generator) -> np.ndarray:
    loc, scale, sigma, threshold, intensity, mud = [
        (0.62, 0.1, 0.7, 0.7, 0.5, 0), (0.65, 0.1, 0.8, 0.7, 0.5, 0), (0.65, 0.3, 1, 0.69, 0.5, 0),
        (0.65, 0.1, 0.7, 0.69, 0.6, 1), (0.65, 0.1, 0.5, 0.68, 0.6, 1)][s - 1]
    liquid = _blur2d(rng.normal(loc, scale, size=x.shape[:3]), sigma)
    liquid[liquid < threshold] = 0
    if not mud:  # water, pale turquoise, shaded along the drops' outlines
        shade = _water(liquid)[..., None] * intensity
        return x + shade * np.array([175, 238, 238]) / 255
    # mud, brown, covering the drops (blurred by `intensity`) where they are dense
    cover = _blur2d((liquid > threshold).astype(np.float64), intensity)
    cover[cover < 0.8] = 0
    cover = cover[..., None]
    return x * (1 - cover) + cover * np.array([63, 42, 20]) / 255


def elastic_transform(x: np.ndarray, s: int, rng: np.random.Generator) -> np.ndarray:
    # (displacement scale, its smoothing sigma, affine jitter) as fractions of the 32 px image
    scale, smooth, jitter = (32 * f for f in [(0, 0, 0.08), (0.05, 0.2, 0.07), (0.08, 0.06, 0.06),
                                               (0.1, 0.04, 0.05), (0.1, 0.03, 0.03)][s - 1])
    n, h, w, _ = x.shape
    # random affine: three points around the centre, each moved by up to `jitter` px (float32, as the reference)
    cy, cx, half = h // 2, w // 2, min(h, w) // 3
    src = np.array([[cx + half, cy + half], [cx + half, cy - half], [cx - half, cy - half]], dtype=np.float32)
    dst = src + rng.uniform(-jitter, jitter, size=(n, 3, 2)).astype(np.float32)
    coef = np.linalg.solve(np.c_[src, np.ones(3)].astype(np.float64), dst)  # (n, 3, 2): [x y 1] @ coef = [x' y']
    lin, shift = coef[:, :2, :], coef[:, 2, :]
    # warpAffine samples output pixel (x, y) at the inverse map, inv @ (x, y) + off ...
    inv = np.swapaxes(np.linalg.inv(lin), 1, 2)
    off = -np.einsum("nij,nj->ni", inv, shift)
    # ... in OpenCV's fixed point: the column and the row part rounded to 1/1024 px, their sum to
    # the nearest 1/32 px (INTER_BITS = 5), so the bilinear weights come from a 32-step table.
    out_x, out_y = np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64)[:, None]

    def fixed_point(k: int) -> np.ndarray:  # k = 0: source column, 1: source row; (n, h, w)
        along_cols = np.rint(inv[:, k, 0, None, None] * out_x * 1024).astype(np.int64)
        along_rows = np.rint((inv[:, k, 1, None, None] * out_y + off[:, k, None, None]) * 1024).astype(np.int64)
        return ((along_cols + along_rows + 16) >> 5) / 32

    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.broadcast_to(np.arange(n, dtype=np.float64)[:, None, None], (n, h, w))

    def sample(a: np.ndarray, rows: np.ndarray, cols: np.ndarray, mode: str) -> np.ndarray:
        return np.stack([ndimage.map_coordinates(a[..., c], [img, rows, cols], order=1, mode=mode)
                         for c in range(a.shape[-1])], -1)

    warped = sample(x, fixed_point(1), fixed_point(0), "mirror")  # reflect-101 borders, as cv2
    dx = _blur2d(rng.uniform(-1, 1, size=(n, h, w)), smooth, mode="reflect", truncate=3) * scale
    dy = _blur2d(rng.uniform(-1, 1, size=(n, h, w)), smooth, mode="reflect", truncate=3) * scale
    return sample(warped, ys + dy, xs + dx, "reflect")


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
    "glass_blur": glass_blur,
    "motion_blur": motion_blur,
    "snow": snow,
    "frost": frost,
    "fog": fog,
    "spatter": spatter,
    "elastic_transform": elastic_transform,
}
# The 19 corruptions of the official archive, in its order (which also seeds each one's rng).
OFFICIAL_CORRUPTIONS = (
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur", "zoom_blur",
    "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate", "jpeg_compression",
    "speckle_noise", "gaussian_blur", "spatter", "saturate",
)

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


def corrupt(images: torch.Tensor, corruption: str, severity: int, seed: int = 0) -> torch.Tensor:
    """uint8 (N,3,H,W) -> corrupted uint8 (N,3,H,W); deterministic for a seed."""
    if corruption not in CORRUPTIONS:
        raise ValueError(f"unknown corruption {corruption!r}; valid: {', '.join(OFFICIAL_CORRUPTIONS)}")
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {SEVERITIES}, got {severity}")
    if images.dtype != torch.uint8 or images.dim() != 4 or images.shape[1] != 3:
        raise ValueError(f"expected uint8 RGB images (N,3,H,W), got {images.dtype} {tuple(images.shape)}")
    rng = np.random.default_rng([seed, OFFICIAL_CORRUPTIONS.index(corruption), severity])
    x = images.permute(0, 2, 3, 1).numpy().astype(np.float64) / 255
    out = np.clip(CORRUPTIONS[corruption](x, severity, rng), 0, 1)
    # truncation to uint8, as the reference stores its arrays
    return torch.from_numpy(np.uint8(out * 255)).permute(0, 3, 1, 2).contiguous()
