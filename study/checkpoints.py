"""The checkpoints a run is evaluated at: one table (`CHECKPOINT_TABLE`) of each checkpoint's
name, file, how it is selected and its label, from which the schema's `Checkpoint` names
(study.config.types), the file a run keeps it in (study.run_directory), the names its records carry
(study.record_names) and its label in the figures (study.labels) are derived.

This module imports nothing of the project: the configuration's types, the command's parser
and the workflow's DAG read it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Checkpoint:
    name: str  # in the configuration (evaluate_checkpoints) and the records' names (`pgd20@best`)
    file: str  # in the run's folder
    selected: str  # how the run's training chooses it
    label: str  # what a figure or table calls it
    #: read by the study's own comparisons: chosen without the test set. `published` is chosen on it
    #: and stands only beside a published value chosen the same way (docs/methods.md)
    in_study: bool


CHECKPOINT_TABLE: tuple[Checkpoint, ...] = (
    Checkpoint("last", "model.pt", "the model after the last epoch", "last checkpoint", in_study=True),
    Checkpoint("best", "model_best.pt", "best on the validation split (validation)", "best checkpoint",
               in_study=True),
    Checkpoint("published", "model_published.pt",
               "best on the test subset by the published protocol (published_selection)",
               "best on the test set, published protocol", in_study=False),
)

#: the checkpoints a run is evaluated at, in this order
CHECKPOINTS: tuple[str, ...] = tuple(c.name for c in CHECKPOINT_TABLE)
#: the checkpoints the study's own comparisons read (in_study)
STUDY_CHECKPOINTS: tuple[str, ...] = tuple(c.name for c in CHECKPOINT_TABLE if c.in_study)
CHECKPOINT_FILES: dict[str, str] = {c.name: c.file for c in CHECKPOINT_TABLE}
CHECKPOINT_LABELS: dict[str, str] = {c.name: c.label for c in CHECKPOINT_TABLE}
