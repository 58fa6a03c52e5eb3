"""Training-time augmentation on whole uint8 batches, on the batch's own device.

Working on uint8 batches on the GPU avoids a per-image CPU pipeline (and torchvision);
the random numbers come from a caller-owned generator so a seeded run repeats exactly."""

from __future__ import annotations

import torch


def _check_batch(x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor) or x.dtype != torch.uint8 or x.dim() != 4:
        got = f"{x.dtype} tensor of shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else x
        raise ValueError(f"expected a uint8 batch of shape (B, C, H, W), got {got}")


def crop_flip_at(
    x: torch.Tensor,
    top: torch.Tensor,
    left: torch.Tensor,
    flip: torch.Tensor,
    padding: int,
) -> torch.Tensor:
    """Crop each image of `x`, zero-padded by `padding`, at the given per-image corner
    (`top`, `left` in [0, 2 * padding]) back to H x W, then mirror it where `flip` is true.

    `top == left == padding` with no flip returns the image unchanged."""
    _check_batch(x)
    if padding < 0:
        raise ValueError(f"padding must be >= 0, got {padding}")
    b, _, h, w = x.shape
    for name, t in (("top", top), ("left", left), ("flip", flip)):
        if t.shape != (b,):
            raise ValueError(f"{name} must have shape ({b},), got {tuple(t.shape)}")
    top, left, flip = top.to(x.device).long(), left.to(x.device).long(), flip.to(x.device)
    if b and (int(top.min()) < 0 or int(top.max()) > 2 * padding):
        raise ValueError(f"top offsets must lie in [0, {2 * padding}]")
    if b and (int(left.min()) < 0 or int(left.max()) > 2 * padding):
        raise ValueError(f"left offsets must lie in [0, {2 * padding}]")
    return _gather_crop(x, top, left, flip, padding)


def _gather_crop(x: torch.Tensor, top: torch.Tensor, left: torch.Tensor, flip: torch.Tensor,
                 padding: int) -> torch.Tensor:
    """crop_flip_at without its range checks (each reads values back to the host)."""
    b, _, h, w = x.shape
    padded = torch.nn.functional.pad(x, (padding, padding, padding, padding))
    rows = top[:, None] + torch.arange(h, device=x.device)  # (B, H)
    cols = left[:, None] + torch.arange(w, device=x.device)  # (B, W)
    # Flipping the crop equals reading its columns right to left.
    cols = torch.where(flip.bool()[:, None], cols.flip(1), cols)
    batch = torch.arange(b, device=x.device)[:, None, None]
    # Channels-last view so one advanced index gathers (B, H, W, C) in a single pass.
    out = padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]]
    return out.permute(0, 3, 1, 2).contiguous()


def random_crop_flip(
    x: torch.Tensor,
    padding: int = 4,
    generator: torch.Generator | None = None,
    flip: bool = True,
) -> torch.Tensor:
    """Zero-padded random crop back to H x W plus (if `flip`) a horizontal flip with
    probability 1/2.

    Random numbers come from `generator`, which must live on `x`'s device."""
    _check_batch(x)
    if generator is not None and generator.device.type != x.device.type:
        raise ValueError(
            f"generator is on {generator.device} but the batch is on {x.device}; "
            "create the generator on the batch's device"
        )
    b = x.shape[0]
    top = torch.randint(0, 2 * padding + 1, (b,), generator=generator, device=x.device)
    left = torch.randint(0, 2 * padding + 1, (b,), generator=generator, device=x.device)
    flips = torch.randint(0, 2, (b,), generator=generator, device=x.device).bool()
    if not flip:
        flips = torch.zeros_like(flips)
    if padding < 0:
        raise ValueError(f"padding must be >= 0, got {padding}")
    # Offsets drawn in range by construction: no checks, so no host sync on a GPU.
    return _gather_crop(x, top, left, flips, padding)


def to_float(x: torch.Tensor) -> torch.Tensor:
    """uint8 images to float32 in [0, 1]."""
    if x.dtype != torch.uint8:
        # A float input here usually means images were already scaled once.
        raise ValueError(f"to_float expects uint8 images, got {x.dtype}")
    return x.float().div_(255)
