"""What "best" means: the rules that choose a run's checkpoints, in one place.

- **The index** an epoch is ranked by (`index_value`, study.metrics.epoch_selection): mean
  robust accuracy (Rice et al.), or mean plus worst-class robust accuracy (`mean_plus_worst`,
  CFA's index); the worst class is the study's worst-class statistic (study.metrics.worst),
  the one FAWA's threshold reads too; or the worst class alone (`worst`, the rule of TRIX's "best checkpoint").
- **The epoch window**: only epochs after the first from_epoch x epochs may be chosen, as CFA's
  train.py counts (`eligible_epoch`, study.metrics.epoch_selection, which the configuration's
  description of a protocol reads too).
- **The winner**: the eligible epoch of the highest index; a tie keeps the earlier (`beats`).
- **The band** of the published protocol: the eligible epochs whose index is at least the best
  index so far minus `band` are the candidates CFA's code saves (`in_band`).

The study's checkpoint, model_best.pt, applies them to the validation split, by the run's
`selection` (`validation_score`, `best_on_validation`; study.train.engine keeps
the file and validation.json). The published protocol's, model_published.pt, applies them to
the fixed test subset's records, by the run's `published_selection`
(study.train.published_protocol: its choice and published.json).
"""

from __future__ import annotations

from study.config.types import SelectionSettings
from study.metrics.epoch_selection import eligible_epoch, index_value
from study.metrics.worst import worst_value
from study.train.policies import EpochStats

# an index equal to the band's edge counts as inside it, whatever the float rounding of the subtraction
_EDGE = 1e-9


def beats(index: float, best: float) -> bool:
    """Whether an eligible epoch's index displaces the best so far (a tie keeps the earlier epoch)."""
    return index > best


def in_band(index: float, best_so_far: float, band: float) -> bool:
    """Whether an index lies within `band` of the best index so far (the edge counts as inside)."""
    return index >= best_so_far - band - _EDGE


def validation_score(val_out: EpochStats, has_attack: bool, score: str = "mean") -> dict:
    """The parts and the value of the best checkpoint's criterion on the validation split:
    robust accuracy (clean accuracy without an epoch attack), never the test set."""
    n, clean, robust = val_out.validation_counts("the validation score")
    correct = robust if has_attack else clean
    mean = float(correct.sum() / n.sum())
    worst = float(worst_value((correct / n.clamp_min(1)).numpy()))
    return {"mean": mean, "worst": worst, "score": index_value(mean, worst, score)}


def best_on_validation(epoch: int, epochs: int, score: float, best_score: float,
                       selection: SelectionSettings) -> tuple[bool, bool]:
    """(eligible, a new best) for 1-based `epoch` of `epochs` with validation `score`, the best
    score so far `best_score`, under the run's `selection` (its run config's)."""
    eligible = eligible_epoch(epoch, epochs, selection.from_epoch)
    return eligible, eligible and beats(score, best_score)
