"""The published protocol: the checkpoint CFA's code (Wei et al. 2023, PKU-ML/CFA train.py)
would have reported, chosen on the per-epoch class-wise records of the fixed TEST subset.

CFA evaluates PGD-10 on the test set after every epoch and, from the first epoch after half
of the run, saves every epoch whose index (mean plus worst-class robust accuracy) is at least
the best index so far minus 0.02; the reported "best" is the highest index among them. Here the
records are the study's own (`epochs.csv`: robust accuracy under `train.epoch_eval.attack` on
`epoch_eval.per_class` test images per class), so the choice can be recomputed from that file.

A value chosen on the test set is biased upwards: this checkpoint exists only to stand beside a
published best value. The study's claims use `best`, chosen on validation. Both apply the rules
of study.train.selection (the index, the epoch window, the band); this module keeps the
protocol's choice over the records and its evidence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from study.config.types import PublishedSelection
from study.metrics.epoch_selection import eligible_epoch, first_eligible_epoch, index_value
from study.metrics.worst import worst_value
from study.train.selection import beats, in_band

#: the split the protocol reads, as the evidence file names it
SPLIT = "test"


@dataclass(frozen=True)
class EpochIndex:
    """One epoch's standing under the protocol."""

    epoch: int
    mean: float
    worst: float
    index: float
    eligible: bool
    #: within the band of the best index so far (an eligible epoch CFA's code saves)
    candidate: bool


@dataclass(frozen=True)
class PublishedChoice:
    epochs: tuple[EpochIndex, ...]
    #: the eligible epoch of the highest index (the earlier on ties); None before the first eligible one
    chosen_epoch: int | None

    @property
    def candidates(self) -> list[int]:
        return [e.epoch for e in self.epochs if e.candidate]

    def record(self, selection: PublishedSelection, total_epochs: int, attack: Mapping | None,
               per_class: int) -> dict:
        """The evidence kept beside model_published.pt (published.json)."""
        return {
            "protocol": "published",
            "split": SPLIT,
            "test_per_class": per_class,
            "attack": dict(attack) if attack is not None else None,
            **selection.model_dump(),
            "first_eligible_epoch": first_eligible_epoch(total_epochs, selection.from_epoch),
            "epochs": [asdict(e) for e in self.epochs],
            "candidates": self.candidates,
            "chosen_epoch": self.chosen_epoch,
        }


def epoch_index(rows: Sequence[Mapping], index: str) -> tuple[float, float, float]:
    """(mean, worst, index) of one epoch's per-class records: the mean over the subset's images,
    the study's worst-class figure (study.metrics.worst), and the protocol's index of them."""
    n = np.array([float(r["n"]) for r in rows])
    acc = np.array([float(r["robust_acc"]) for r in rows])
    if np.isnan(acc).any() or not n.sum():
        epoch = rows[0]["epoch"] if rows else "?"
        raise ValueError(f"epoch {epoch}: the published protocol needs robust accuracy on the test subset "
                         "(train.epoch_eval.attack); the records have none")
    mean = float((acc * n).sum() / n.sum())
    worst = float(worst_value(acc))
    return mean, worst, index_value(mean, worst, index)


def choose_published(records: Sequence[Mapping], epochs: int, selection: PublishedSelection) -> PublishedChoice:
    """The protocol applied to per-class records (`epochs.csv` rows: epoch, n, robust_acc) of a
    run of `epochs` epochs, in epoch order."""
    by_epoch: dict[int, list[Mapping]] = {}
    for row in records:
        by_epoch.setdefault(int(row["epoch"]), []).append(row)
    running = -math.inf
    chosen, chosen_index = None, -math.inf
    out = []
    for epoch in sorted(by_epoch):
        mean, worst, index = epoch_index(by_epoch[epoch], selection.index)
        eligible = eligible_epoch(epoch, epochs, selection.from_epoch)
        candidate = eligible and in_band(index, running, selection.band)
        if eligible:
            running = max(running, index)
            if beats(index, chosen_index):
                chosen, chosen_index = epoch, index
        out.append(EpochIndex(epoch, mean, worst, index, eligible, candidate))
    return PublishedChoice(tuple(out), chosen)
