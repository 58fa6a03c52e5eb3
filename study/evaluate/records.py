"""Per-sample evaluation records: one parquet file per (run, evaluation).

Columns: index (test-sample index), label, pred, and logit_0..logit_{C-1} where kept;
AutoAttack and Square records add broken_by (the attack that broke the sample, 'clean' if
it was misclassified without attack, '' if no attack broke it).
The file's metadata holds the evaluation's provenance (run, attack settings, data variant),
so a record is self-describing when copied out of its run directory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from study.io import atomic_path

_META_KEY = b"study"
#: what the metadata of every record `study evaluate` (and `study corruptions`) writes holds
RECORD_METADATA = ("run_id", "evaluation", "class_names")


def records_frame(
    index: np.ndarray,
    labels: np.ndarray,
    pred: np.ndarray,
    logits: np.ndarray | None,
    broken_by: np.ndarray | None = None,
) -> pd.DataFrame:
    columns: dict[str, np.ndarray] = {
        "index": index.astype(np.int64), "label": labels.astype(np.int64), "pred": pred.astype(np.int64)
    }
    if logits is not None:
        # Built in one go: adding 1000 ImageNet logit columns one by one fragments the frame.
        columns.update({f"logit_{k}": logits[:, k].astype(np.float32) for k in range(logits.shape[1])})
    if broken_by is not None:
        columns["broken_by"] = pd.Series(broken_by, dtype=str).to_numpy()
    return pd.DataFrame(columns)


def write_records(df: pd.DataFrame, path: str | Path, meta: Mapping) -> None:
    table = pa.Table.from_pandas(df, preserve_index=False)
    existing = table.schema.metadata or {}
    table = table.replace_schema_metadata({**existing, _META_KEY: json.dumps(dict(meta), default=str).encode()})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def replace_record_metadata(path: str | Path, meta: Mapping) -> None:
    """A record written again with `meta` as its metadata, its rows as they are."""
    table = pq.read_table(path)
    existing = table.schema.metadata or {}
    table = table.replace_schema_metadata({**existing, _META_KEY: json.dumps(dict(meta), default=str).encode()})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def _metadata(schema: pa.Schema) -> dict | None:
    """The study's metadata of a record's schema (None where it is not JSON)."""
    try:
        return json.loads((schema.metadata or {}).get(_META_KEY, b"{}"))
    except json.JSONDecodeError:
        return None


def record_meta(path: str | Path) -> dict:
    """The metadata of a record file, without reading its rows."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"evaluation record {path} does not exist; it is made by `study evaluate`")
    return _metadata(pq.read_schema(path)) or {}


def check_record_owner(path: str | Path, meta: Mapping | None = None, run_id: str | None = None) -> None:
    """That a record is its run's: the run id it holds is the one recomputed from the run
    config it holds, that of `run_id` where given (the run it is read for), and that of the
    run folder it lies in (`.../evaluations/<run id>/...`); ValueError of one line otherwise."""
    from study.config.spec import ConfigSpec
    from study.run_directory import expected_run_id

    path = Path(path)
    meta = record_meta(path) if meta is None else meta
    require_record_metadata(path, meta, (*RECORD_METADATA, "run_config"))
    held = meta.get("run_id")
    made_by = expected_run_id(ConfigSpec.parse(meta.get("run_config"), f"{path}: run_config"))
    redo = "evaluate the run again (`study evaluate`) and remove this record"
    if held != made_by:
        raise ValueError(f"{path} holds records under run id {held} made with the config of run {made_by}: {redo}")
    if run_id is not None and held != run_id:
        raise ValueError(f"{path} holds records of run {held}, not of run {run_id}: give run {run_id}'s own records")
    parts = path.parent.parts  # the last `evaluations` above the file: the folder of the run's records
    at = max((i for i, part in enumerate(parts[:-1]) if part == "evaluations"), default=None)
    folder = parts[at + 1] if at is not None else None
    if folder is not None and folder != held:
        raise ValueError(f"{path} holds records of run {held}, but lies in the evaluations folder of run {folder}: "
                         f"move it to evaluations/{held}/, or {redo}")


def read_records(path: str | Path, require: tuple[str, ...] = RECORD_METADATA) -> tuple[pd.DataFrame, dict]:
    """The record's frame and metadata; a ValueError line if the metadata lacks a key of `require`
    (a parquet file written by other means: a frame saved again with pandas drops it)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"evaluation record {path} does not exist; it is made by `study evaluate`")
    table = pq.read_table(path)
    meta = require_record_metadata(path, _metadata(table.schema), require)
    return table.to_pandas(), meta


def require_record_metadata(path: Path, meta: object, require: tuple[str, ...]) -> dict:
    """`meta` ({} where the file holds none and nothing is required); else one line naming the
    record and the keys its metadata lacks, and how to make it again."""
    missing = list(require) if not isinstance(meta, dict) else [k for k in require if k not in meta]
    if missing:
        raise ValueError(f"{path} lacks the study's record metadata ({', '.join(missing)} missing; the parquet "
                         f"key {_META_KEY.decode()!r} holds it): it was written by other means (a frame saved again "
                         "drops it); remove it and make it again with `study evaluate` (or rerun its job)")
    return meta if isinstance(meta, dict) else {}
