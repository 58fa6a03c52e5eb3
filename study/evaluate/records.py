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


def read_records(path: str | Path) -> tuple[pd.DataFrame, dict]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"evaluation record {path} does not exist; it is made by `study evaluate`")
    table = pq.read_table(path)
    meta = json.loads((table.schema.metadata or {}).get(_META_KEY, b"{}"))
    return table.to_pandas(), meta
