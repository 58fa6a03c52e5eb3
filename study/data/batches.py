"""Mini-batch index plans for one epoch, drawn from an explicit generator so that the
order of training examples is reproducible and independent of any global RNG state."""

from __future__ import annotations

import torch


def epoch_batches(
    n: int,
    batch_size: int,
    generator: torch.Generator | None,
    shuffle: bool = True,
    drop_last: bool = False,
) -> list[torch.Tensor]:
    """Index tensors (int64, CPU) covering range(n) once, `batch_size` at a time.

    With `shuffle`, the order is a permutation drawn from `generator` (a CPU generator);
    with `drop_last`, a final batch smaller than `batch_size` is left out."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if generator is not None and generator.device.type != "cpu":
        raise ValueError(f"epoch_batches needs a CPU generator, got one on {generator.device}")
    order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
    # torch.split of an empty tensor yields one empty batch; an empty epoch has none.
    batches = list(torch.split(order, batch_size)) if n else []
    if drop_last and batches and len(batches[-1]) < batch_size:
        batches.pop()
    return batches
