"""The selection protocols of an experiment group, read from the params: `validation` (the
study's: model_best.pt chosen on the validation split by train.selection) and `published`
(model_published.pt chosen on the test subset by train.published_selection, as CFA's code
chose the checkpoints behind its published table; study.train.published_protocol)."""

from __future__ import annotations

from dataclasses import dataclass

from study.config.core import ConfigError, deep_merge
from study.config.types import Params, PublishedSelection, TrainSettings, parse
from study.metrics.epoch_selection import first_eligible_epoch

_INDEX_WORDS = {"mean_plus_worst": "CFA index (mean + worst-class robust accuracy)",
                "mean": "mean robust accuracy", "worst": "worst-class robust accuracy (TRIX's best checkpoint)"}


@dataclass(frozen=True)
class PublishedProtocol:
    """The published protocol of one experiment group on one dataset, as a report names it."""

    selection: PublishedSelection
    #: the evaluation (params `evaluations`) whose per-epoch robust accuracy the index reads
    attack: str
    #: test images per class of the fixed subset the records are taken on
    test_per_class: int
    epochs: int

    @property
    def first_eligible_epoch(self) -> int:
        return first_eligible_epoch(self.epochs, self.selection.from_epoch)

    def describe(self) -> str:
        """'published protocol: test set (100 images per class, pgd10), CFA index (mean +
        worst-class robust accuracy) from epoch 101 of 200, band 0.02'."""
        return (f"published protocol: test set ({self.test_per_class} images per class, {self.attack}), "
                f"{_INDEX_WORDS[self.selection.index]} from epoch {self.first_eligible_epoch} of {self.epochs}, "
                f"band {self.selection.band:g}")


def published_protocol(params: Params, group: str, dataset: str | None = None) -> PublishedProtocol | None:
    """The published protocol of experiment group `group` on `dataset` (default: its first), from
    the group's train section over params' (the dataset's applied); None where its runs keep no
    published checkpoint (no train.published_selection). A method's own train (FRL's epochs) or
    a grid cell may differ from it; a run's own is its run config's `published_selection`."""
    try:
        found = params.group(group)
    except KeyError as err:
        raise ConfigError(str(err.args[0])) from None
    dataset = dataset if dataset is not None else found.dataset_names[0]
    raw = deep_merge(params.for_dataset(dataset).train.set_fields(), found.train)
    where = f"experiment group {group!r} on {dataset}"
    train = parse(TrainSettings, raw, f"{where}: train")
    selection = published_selection(train, where)
    if selection is None:
        return None
    return PublishedProtocol(selection, str(train.epoch_eval.attack), train.epoch_eval.per_class, train.epochs)


def published_selection(train: TrainSettings, where: str) -> PublishedSelection | None:
    """A run's published-protocol settings (None: it keeps no published checkpoint); `where`
    names the group in the error of a protocol without the robust accuracy its index reads."""
    if train.published_selection is not None and train.epoch_eval.attack is None:
        raise ConfigError(f"{where}: train.published_selection needs train.epoch_eval.attack "
                          "(its index is robust accuracy on the test subset); set one of params' evaluations")
    return train.published_selection
