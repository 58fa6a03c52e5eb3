"""Record naming: what an evaluation's records and a model's metrics files are called (what a
reader sees is study.labels').

An evaluation's records are named `<evaluation>` for the last checkpoint, `<evaluation>@best`
for the best on validation and `<evaluation>@published` for the best on the test subset by the
published protocol (the stem of the record's file, and the `eval` column of the tables).
`record_name` and `split_record_name` are the only code that formats and parses that name; every
other reader takes the checkpoint from its field (a record's `evaluation.checkpoint`, a table's
`checkpoint` column).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from study.checkpoints import CHECKPOINTS

if TYPE_CHECKING:  # the workflow's DAG process imports this module; pandas only types it here
    import pandas as pd

_CHECKPOINT_MARK = "@"


def _known_checkpoint(checkpoint: object, name: object) -> str:
    if checkpoint not in CHECKPOINTS:
        raise ValueError(f"checkpoint {checkpoint!r} of evaluation {name!r} is unknown; "
                         f"valid: {', '.join(CHECKPOINTS)}")
    return str(checkpoint)


def record_name(evaluation: str, checkpoint: str = "last") -> str:
    """The name of an evaluation's records at a checkpoint: ('pgd20', 'last') -> 'pgd20',
    ('pgd20', 'best') -> 'pgd20@best', ('pgd20', 'published') -> 'pgd20@published'."""
    checkpoint = _known_checkpoint(checkpoint, evaluation)
    return str(evaluation) if checkpoint == "last" else f"{evaluation}{_CHECKPOINT_MARK}{checkpoint}"


#: the study's finding in two numbers, beside the models' files (results/<preset>/metrics/headline.json,
#: study.tables.classwise.headline_numbers): short names no model's file uses, so that `dvc exp show`
#: prints them as they are, in an 80-column terminal
HEADLINE_FILE = "headline.json"


def metrics_stem(dataset: str, model: str, method: str, train_data: str = "original") -> str:
    """The name of a model's headline metrics file (results/<preset>/metrics/<stem>.json, study.tables):
    dataset__model__method, and __<train data> for a model trained on a constructed dataset;
    the workflow names the files the tables job must write by it."""
    return "__".join(str(k) for k in (dataset, model, method, train_data) if k != "original")


def split_record_name(name: str) -> tuple[str, str]:
    """(evaluation, checkpoint) of a record's name: 'pgd20@best' -> ('pgd20', 'best'), 'pgd20' -> ('pgd20', 'last')."""
    base, mark, checkpoint = str(name).partition(_CHECKPOINT_MARK)
    return base, _known_checkpoint(checkpoint, name) if mark else "last"


def checkpoint_of(evaluation: Mapping) -> str:
    """The checkpoint an evaluation record's metadata (`evaluation`: its name and `checkpoint`)
    comes from; records written before the field existed have it in their name only."""
    by_name = split_record_name(evaluation["name"])[1]
    stated = evaluation.get("checkpoint", by_name)
    if stated != by_name:
        raise ValueError(f"evaluation {evaluation['name']!r} records checkpoint {stated!r} "
                         f"but its name says {by_name!r}")
    return by_name


def table_checkpoints(table: pd.DataFrame) -> pd.Series:
    """The checkpoint of each row of a table of evaluations: its `checkpoint` column; a table
    written before that column existed has the checkpoint in its records' names (`eval`) only."""
    if "checkpoint" in table:
        return table["checkpoint"]
    return table["eval"].map(lambda name: split_record_name(name)[1])
