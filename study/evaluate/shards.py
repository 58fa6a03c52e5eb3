"""Merge the shards of one evaluation (separate jobs over parts of the test set) into the
record that tables read, refusing parts that overlap, miss a shard or mix evaluations."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from study.evaluate.records import read_records, write_records


def merge_shards(parts: Sequence[str | Path], out: str | Path) -> Path:
    frames, metas = zip(*(read_records(p) for p in parts), strict=True) if parts else ((), ())
    if not frames:
        raise ValueError("no shard records given")
    shards = sorted(tuple(m.get("shard") or ()) for m in metas)
    n = shards[0][1] if shards[0] else None
    if n is None or shards != [(i, n) for i in range(n)]:
        raise ValueError(f"expected shards 0..{(n or 1) - 1} of {n} exactly once, got {shards}")
    for m in metas[1:]:
        if (m["run_id"], m["evaluation"]) != (metas[0]["run_id"], metas[0]["evaluation"]):
            raise ValueError(f"shards of different runs or evaluations: {m['run_id']} {m['evaluation']['name']}")
    frame = pd.concat(frames, ignore_index=True).sort_values("index", ignore_index=True)
    if frame["index"].duplicated().any():
        raise ValueError("shards overlap: some test samples appear in two shards")
    meta = {**metas[0], "shard": None, "shards": n, "n": len(frame),
            "seconds": float(sum(m.get("seconds", 0.0) for m in metas))}
    write_records(frame, out, meta)
    return Path(out)
