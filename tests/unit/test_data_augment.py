import pytest
import torch

from study.data.augment import crop_flip_at, random_crop_flip, to_float


def _batch(b=6, c=3, h=8, w=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    # Values 1..255 so that any zero in the output must come from padding.
    return torch.randint(1, 256, (b, c, h, w), generator=g, dtype=torch.uint8)


def _reference(image, top, left, flip, padding):
    """Per-pixel definition: out[i, j] = image[i + top - p, j' + left - p], zero outside."""
    c, h, w = image.shape
    out = torch.zeros_like(image)
    for i in range(h):
        for j in range(w):
            jj = w - 1 - j if flip else j
            si, sj = i + top - padding, jj + left - padding
            if 0 <= si < h and 0 <= sj < w:
                out[:, i, j] = image[:, si, sj]
    return out


@pytest.mark.parametrize(
    ("top", "left", "flip"), [(4, 4, False), (0, 8, False), (7, 1, True), (4, 4, True)]
)
def test_crop_flip_at_matches_pixel_definition(top, left, flip):
    x = _batch(b=2)
    tops, lefts = torch.tensor([top, 4]), torch.tensor([left, 4])
    flips = torch.tensor([flip, False])
    out = crop_flip_at(x, tops, lefts, flips, padding=4)
    assert torch.equal(out[0], _reference(x[0], top, left, flip, 4))
    assert torch.equal(out[1], x[1])  # centre crop, no flip: unchanged


def test_known_shift_moves_pixels_and_zero_fills():
    x = _batch(b=1)
    # Corner (0, 0) of the padded image: content moves down-right by 4, top/left 4 are zero.
    out = crop_flip_at(x, torch.tensor([0]), torch.tensor([0]), torch.tensor([False]), 4)
    assert torch.equal(out[0, :, 4:, 4:], x[0, :, :4, :4])
    assert (out[0, :, :4, :] == 0).all() and (out[0, :, :, :4] == 0).all()
    flipped = crop_flip_at(x, torch.tensor([4]), torch.tensor([4]), torch.tensor([True]), 4)
    assert torch.equal(flipped[0], x[0].flip(-1))


def test_random_crop_flip_keeps_type_and_shape_and_zero_padding():
    x = _batch(b=64)
    out = random_crop_flip(x, padding=2, generator=torch.Generator().manual_seed(0))
    assert out.dtype == torch.uint8 and out.shape == x.shape and out.device == x.device
    # Inputs hold no zeros, so zeros are exactly the padding: at most 2 rows/cols per side.
    zero_rows = (out == 0).all(dim=(1, 3)).sum(dim=1)
    assert zero_rows.max() <= 2 and zero_rows.max() > 0
    assert ((out == 0).any(dim=1) == (out == 0).all(dim=1)).all()  # padding spans channels


def test_random_crop_flip_is_reproducible_and_varies():
    x = _batch(b=32)
    a = random_crop_flip(x, generator=torch.Generator().manual_seed(3))
    b = random_crop_flip(x, generator=torch.Generator().manual_seed(3))
    c = random_crop_flip(x, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert not torch.equal(a, x)


def test_random_crop_flip_draws_both_flips_and_all_offsets():
    # A 1x1 image with padding 1: the crop lands on the pixel only for offset (1, 1).
    x = torch.full((2000, 1, 1, 1), 7, dtype=torch.uint8)
    out = random_crop_flip(x, padding=1, generator=torch.Generator().manual_seed(0))
    hit_rate = (out == 7).float().mean().item()
    assert abs(hit_rate - 1 / 9) < 0.03
    # Flip probability: on a 1-row ramp with no shift room, flips reverse the row.
    ramp = torch.arange(1, 5, dtype=torch.uint8).view(1, 1, 1, 4).repeat(2000, 1, 1, 1)
    flipped = random_crop_flip(ramp, padding=0, generator=torch.Generator().manual_seed(0))
    rate = (flipped[:, 0, 0, 0] == 4).float().mean().item()
    assert abs(rate - 0.5) < 0.05


def test_bad_batch_or_generator_device_is_rejected():
    with pytest.raises(ValueError, match="uint8"):
        random_crop_flip(torch.zeros(2, 3, 4, 4))
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="device"):
            random_crop_flip(_batch().cuda(), generator=torch.Generator())


def test_offsets_out_of_range_are_rejected():
    x = _batch(b=1)
    with pytest.raises(ValueError, match=r"\[0, 8\]"):
        crop_flip_at(x, torch.tensor([9]), torch.tensor([0]), torch.tensor([False]), 4)


def test_to_float_scales_to_unit_interval():
    x = torch.tensor([0, 51, 255], dtype=torch.uint8)
    assert torch.allclose(to_float(x), torch.tensor([0.0, 0.2, 1.0]))
    assert to_float(x).dtype == torch.float32
    with pytest.raises(ValueError, match="uint8"):
        to_float(x.float())
