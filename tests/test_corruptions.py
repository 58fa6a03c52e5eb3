"""CIFAR-10-C: the 19 regenerated corruptions, the official-archive reader on small archives
built here in the official layout, and the choice between the two in the evaluation."""

import dataclasses
import hashlib
import io
import tarfile

import numpy as np
import pytest
import torch
from scipy import ndimage

import study.data.cifar10c as cifar10c
import study.data.corruptions as corruptions
from study.data.cifar10c import find_cifar10c, load_cifar10c, locate_cifar10c, read_cifar10c
from study.data.corruptions import CORRUPTIONS, OFFICIAL_CORRUPTIONS, SEVERITIES, corrupt, motion_kernel
from study.data.download import ChecksumError, DataUnavailableError
from study.evaluate.corruptions import evaluate_corruptions, resolve_source
from study.evaluate.records import read_records
from study.robustness_tables import corruption_table


@pytest.fixture(scope="module")
def images() -> torch.Tensor:
    """12 smooth, natural-looking 32x32 RGB images (blurred colour noise), fixed."""
    rng = np.random.default_rng(0)
    x = ndimage.gaussian_filter(rng.random((12, 32, 32, 3)), (0, 2, 2, 0))
    lo, hi = x.min(axis=(1, 2, 3), keepdims=True), x.max(axis=(1, 2, 3), keepdims=True)
    return torch.from_numpy(np.uint8((x - lo) / (hi - lo) * 230 + 10)).permute(0, 3, 1, 2).contiguous()


@pytest.fixture(scope="module")
def textured() -> torch.Tensor:
    """48 fixed 32x32 RGB images, half smooth (colour noise blurred by 2 px), half finer (1 px):
    enough images that the random corruptions' strength shows its trend, not one draw."""
    rng = np.random.default_rng(0)
    x = np.concatenate([ndimage.gaussian_filter(rng.random((24, 32, 32, 3)), (0, s, s, 0)) for s in (2, 1)])
    lo, hi = x.min(axis=(1, 2, 3), keepdims=True), x.max(axis=(1, 2, 3), keepdims=True)
    return torch.from_numpy(np.uint8((x - lo) / (hi - lo) * 230 + 10)).permute(0, 3, 1, 2).contiguous()


def mean_abs_change(corrupted: torch.Tensor, clean: torch.Tensor) -> float:
    return (corrupted.float() - clean.float()).abs().mean().item()


@pytest.fixture(scope="module")
def strength(textured) -> dict[str, list[float]]:
    """Mean absolute difference from the clean images, per corruption and severity 1..5."""
    return {name: [mean_abs_change(corrupt(textured, name, s, seed=1), textured) for s in SEVERITIES]
            for name in CORRUPTIONS}


def test_all_nineteen_official_corruptions_are_regenerated():
    assert set(CORRUPTIONS) == set(OFFICIAL_CORRUPTIONS) and len(CORRUPTIONS) == 19
    with pytest.raises(ValueError, match="glass_blur"):  # the message lists the valid names
        corrupt(torch.zeros(1, 3, 32, 32, dtype=torch.uint8), "hail", 1)


@pytest.mark.parametrize("name", OFFICIAL_CORRUPTIONS)
def test_corruption_is_uint8_deterministic_and_changes_the_image(images, name):
    for s in SEVERITIES:
        a, b = corrupt(images, name, s, seed=7), corrupt(images, name, s, seed=7)
        assert a.dtype == torch.uint8 and a.shape == images.shape, (name, s)
        assert torch.equal(a, b), (name, s)
        assert (a != images).any(), (name, s)
    if name not in ("contrast", "brightness", "saturate", "jpeg_compression", "pixelate", "gaussian_blur",
                    "defocus_blur", "zoom_blur"):  # the random ones
        assert not torch.equal(corrupt(images, name, 3, seed=7), corrupt(images, name, 3, seed=8)), name


# Published constants whose every step is stronger than the last.
GROWING = ("gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise", "gaussian_blur", "defocus_blur",
           "zoom_blur", "contrast", "brightness", "jpeg_compression", "pixelate", "snow", "fog")


def test_strength_grows_at_every_severity_where_every_published_step_is_stronger(strength):
    for name in GROWING:
        d = strength[name]
        assert all(a < b for a, b in zip(d, d[1:], strict=False)), (name, d)


def test_strength_of_the_other_six_follows_their_published_constants(strength):
    # The reference's own constants for these six do not make the mean absolute change grow at
    # every step (saturate and the blend of frost are deterministic in that respect), so what
    # is checked is the shape the constants imply.
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
    assert f[0] < min(f[1:]) and f[0] < f[1] < f[2]
    # elastic: severity 1 is a pure random affine of up to 2.56 px; higher severities shrink
    # the affine (down to 0.96 px) and add a small local displacement field
    e = d["elastic_transform"]
    assert all(a > b for a, b in zip(e, e[1:], strict=False)) and e[4] > 0, e


def _reference_zoom_blur(image: np.ndarray, severity: int) -> np.ndarray:
    """zoom_blur of one HxWx3 uint8 image written out from make_cifar_c.py's formula: float32
    image; per zoom factor the centre crop of ceil(H / z) px, scipy.ndimage.zoom(order=1) by z,
    trimmed to H x W from (excess // 2); the image and the zooms averaged; clipped, to uint8."""
    factors = np.arange(1, [1.06, 1.11, 1.16, 1.21, 1.26][severity - 1], 0.01)
    x = (image / 255.0).astype(np.float32)
    total = np.zeros_like(x)
    h = x.shape[0]
    for z in factors:
        side = int(np.ceil(h / z))
        top = (h - side) // 2
        big = ndimage.zoom(x[top : top + side, top : top + side], (z, z, 1), order=1)
        cut = (big.shape[0] - h) // 2
        total += big[cut : cut + h, cut : cut + h]
    return np.uint8(np.clip((x + total) / (len(factors) + 1), 0, 1) * 255)


@pytest.fixture(scope="module")
def zoom_pairs(textured) -> list[tuple[np.ndarray, np.ndarray]]:
    """(ours, reference) zoom_blur of the textured images as (N,H,W,3) uint8, per severity."""
    clean = textured.permute(0, 2, 3, 1).numpy()
    return [(corrupt(textured, "zoom_blur", s).permute(0, 2, 3, 1).numpy(),
             np.stack([_reference_zoom_blur(im, s) for im in clean])) for s in SEVERITIES]


def test_zoom_blur_strength_agrees_with_the_reference_formula(textured, zoom_pairs):
    # The former torch F.interpolate zoom (half-pixel centres, scale_factor z) was 33% weaker
    # than this at severity 1 and 4% at severity 5: scipy's zoom aligns the crop's end pixels,
    # so for small z it shifts the image rather than leaving it almost in place.
    clean = textured.permute(0, 2, 3, 1).numpy().astype(np.float64)
    for s, (ours, ref) in zip(SEVERITIES, zoom_pairs, strict=True):
        ours_strength, ref_strength = np.abs(ours - clean).mean(), np.abs(ref - clean).mean()
        assert ours_strength == pytest.approx(ref_strength, rel=0.05), (s, ours_strength, ref_strength)


def test_zoom_blur_agrees_with_the_reference_formula_per_pixel(zoom_pairs):
    for s, (ours, ref) in zip(SEVERITIES, zoom_pairs, strict=True):
        diff = np.abs(ours.astype(int) - ref.astype(int))
        # float rounding in another order may move a value across an integer before the truncation
        assert diff.max() <= 1 and (diff > 0).mean() < 1e-3, (s, diff.max(), (diff > 0).mean())


def test_clipped_zoom_is_scipys_zoom_of_the_centre_crop():
    layers = np.random.default_rng(4).random((3, 32, 32, 2))
    # the zoom_blur factors and the snow ones
    for z in [*np.arange(1, 1.26, 0.01), 1.75, 2.25]:
        side = int(np.ceil(32 / z))
        top = (32 - side) // 2
        for layer, ours in zip(layers, corruptions._clipped_zoom(layers, z), strict=True):
            big = ndimage.zoom(layer[top : top + side, top : top + side], (z, z, 1), order=1)
            cut = (big.shape[0] - 32) // 2
            assert np.allclose(ours, big[cut : cut + 32, cut : cut + 32], rtol=0, atol=1e-12), z
    # scipy keeps a 32 px crop zoomed by 1.01 at 32 px with its end pixels aligned: unchanged
    assert np.allclose(corruptions._clipped_zoom(layers, 1.01), layers, rtol=0, atol=1e-12)


def test_chamfer_distance_uses_opencvs_5x5_steps():
    edges = np.zeros((1, 9, 9), dtype=bool)
    edges[0, 4, 4] = True
    d = corruptions._chamfer_distance(edges)[0]
    # 1 straight, 1.4 diagonal, 2.1969 knight's move; longer distances are sums of these
    expected = {(4, 4): 0, (4, 5): 1, (5, 5): 1.4, (5, 6): 2.1969, (4, 6): 2, (6, 6): 2.8, (5, 7): 3.1969,
                (6, 7): 3.5969, (0, 0): 5.6, (8, 4): 4}
    for (i, j), v in expected.items():
        assert d[i, j] == pytest.approx(v, abs=1e-4), ((i, j), d[i, j])
    assert np.allclose(d, d.T) and np.allclose(d, d[::-1, ::-1])  # symmetric around the edge pixel
    # without any edge pixel every distance is OpenCV's cap, so all end at 20 after THRESH_TRUNC
    assert corruptions._chamfer_distance(np.zeros((1, 5, 5), dtype=bool)).min() > 20


def test_equalize_hist_maps_as_opencv():
    img = np.full((1, 32, 32), 10.0)
    img[0, 16:, :16], img[0, 16:, 16:] = 20, 30
    out = corruptions._equalize_hist(img)[0]
    # lowest value to 0, highest to 255; 20 to 256 * 255 / 512 = 127.5, rounded half to even
    assert (out[:16] == 0).all() and (out[16:, :16] == 128).all() and (out[16:, 16:] == 255).all()
    assert np.array_equal(corruptions._equalize_hist(np.full((2, 4, 4), 7.0)), np.full((2, 4, 4), 7.0))


def test_elastic_affine_samples_on_opencvs_32_step_grid():
    # on a ramp equal to the column index, bilinear sampling returns the sampled column itself;
    # OpenCV's warpAffine rounds every sampling position to 1/32 px
    ramp = np.broadcast_to(np.arange(32.0)[None, None, :, None], (4, 32, 32, 3)).copy()
    out = corruptions.elastic_transform(ramp, 1, np.random.default_rng(2))[:, 6:26, 6:26]
    assert np.allclose(out * 32, np.round(out * 32), rtol=0, atol=1e-9)
    assert not np.allclose(out, ramp[:, 6:26, 6:26])  # it did move


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
    for angle in (-40.0, 17.0, 30.0):  # every tap lies within rounding of the line through the centre
        rows, cols = np.nonzero(motion_kernel(8, 2, angle))
        a = np.deg2rad(angle)
        assert np.abs((rows - 16) * np.cos(a) - (cols - 16) * np.sin(a)).max() <= 0.71
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
    monkeypatch.setattr(corruptions.importlib.util, "find_spec", lambda name: None)
    corruptions._frost_photos.cache_clear()
    try:
        with pytest.raises(ModuleNotFoundError, match="imagecorruptions"):
            corrupt(torch.zeros(1, 3, 32, 32, dtype=torch.uint8), "frost", 1)
    finally:
        monkeypatch.undo()
        corruptions._frost_photos.cache_clear()


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
