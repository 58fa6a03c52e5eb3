"""Build a constructed training set chunk by chunk, resumably, into the prepared format.

Each chunk's random numbers come from a generator seeded by (seed, chunk index), so a
construction interrupted anywhere and resumed writes exactly the chunks an uninterrupted
one would, and finished chunks are never recomputed.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from study.checkpoints import CHECKPOINT_FILES
from study.data.augment import to_float
from study.data.download import file_checksums
from study.data.prepared import save_prepared
from study.data.splits import Splits, stratified_subset
from study.features.construct import (
    REPRESENTATION_KINDS,
    check_kind,
    match_representation,
    other_indices,
    penultimate,
    relabel,
    relabel_targets,
    representation_distance,
)
from study.io import atomic_torch_save, load_torch
from study.run_directory import load_trained_model

SETTINGS_KEYS = ("per_class", "chunk_size", "seed", "representation", "relabel")


def _to_uint8(x: torch.Tensor) -> torch.Tensor:
    return (x.clamp(0, 1) * 255).round().to(torch.uint8)


def construct_chunk(
    kind: str,
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    chunk_idx: torch.Tensor,
    starts: torch.Tensor,
    num_classes: int,
    settings: Mapping,
    generator: torch.Generator,
    device: torch.device,
) -> dict:
    """One chunk of a construction: the images at `chunk_idx` moved toward the representation
    of the images at `starts` (representation kinds) or relabelled and attacked toward the new
    labels, as uint8 with the chunk's statistics (what build_constructed saves per chunk)."""
    x = to_float(images[chunk_idx].to(device))
    y = labels[chunk_idx].to(device)
    if kind in REPRESENTATION_KINDS:
        rep = settings["representation"]
        x0 = to_float(images[starts].to(device))
        with torch.no_grad():
            goal = penultimate(model, x)
        before = representation_distance(model, x0, goal)
        out = match_representation(model, x, x0, steps=int(rep["steps"]), step_size=float(rep["step_size"]))
        after = representation_distance(model, out, goal)
        new_y = y
        stats = {"distance_before": before.cpu(), "distance_after": after.cpu(), "start_index": starts.cpu()}
    else:
        rel = settings["relabel"]
        new_y = relabel_targets(kind, y, num_classes, generator)
        out = relabel(model, x, new_y, eps=float(rel["eps"]), step_size=float(rel["step_size"]),
                      steps=int(rel["steps"]))
        with torch.no_grad():
            hit = (model(out).argmax(1) == new_y).float()
        stats = {"target_hit": hit.cpu(), "original_label": y.cpu()}
    return {"images": _to_uint8(out).cpu(), "labels": new_y.long().cpu(), "index": chunk_idx.cpu(), **stats}


def build_constructed(
    kind: str,
    model: nn.Module,
    splits: Splits,
    out: str | Path,
    work_dir: str | Path,
    settings: Mapping,
    provenance: Mapping,
    *,
    device: torch.device | str = "cpu",
    progress: bool = True,
) -> Splits:
    """Construct `kind` from the training set of `splits` with `model` (eval mode); the test
    set stays the real one. Finished chunks in `work_dir` are reused."""
    check_kind(kind)
    missing = [k for k in SETTINGS_KEYS if k not in settings]
    if missing:
        raise ValueError(f"construction settings lack {missing}; expected keys {list(SETTINGS_KEYS)}")
    device = torch.device(device)
    model = model.to(device).eval()
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    seed = int(settings["seed"])
    key = provenance.get("key", "")
    # a chunk is reused only if made for this construction by this very model file: a source
    # model trained again (same run id, other weights) makes every chunk again
    made_by = provenance.get("source_model_sha256")

    subset = stratified_subset(splits.train_y, settings["per_class"])
    # Starting images come from the same subset, drawn once for the whole set.
    starts_all = subset[other_indices(len(subset), torch.Generator().manual_seed(seed))]
    size = int(settings["chunk_size"])
    n_chunks = (len(subset) + size - 1) // size
    chunks = []
    t0 = time.perf_counter()
    for c in range(n_chunks):
        path = work_dir / f"chunk_{c:05d}.pt"
        if path.exists():
            blob = load_torch(path)
            if blob.get("key") == key and blob.get("source_model_sha256") == made_by:
                chunks.append(blob)
                continue
        sl = slice(c * size, (c + 1) * size)
        gen = torch.Generator(device=device).manual_seed(seed * 1_000_003 + c)
        blob = construct_chunk(kind, model, splits.train_x, splits.train_y, subset[sl], starts_all[sl],
                               len(splits.class_names), settings, gen, device)
        blob["key"], blob["source_model_sha256"] = key, made_by
        atomic_torch_save(blob, path)
        chunks.append(blob)
        if progress:
            print(f"{kind}: chunk {c + 1}/{n_chunks} done [{time.perf_counter() - t0:.0f}s]", file=sys.stderr)

    images = torch.cat([b["images"] for b in chunks])
    labels = torch.cat([b["labels"] for b in chunks])
    summary: dict[str, float] = {"n": int(len(labels))}
    if kind in REPRESENTATION_KINDS:
        summary["distance_before"] = float(torch.cat([b["distance_before"] for b in chunks]).mean())
        summary["distance_after"] = float(torch.cat([b["distance_after"] for b in chunks]).mean())
    else:
        summary["target_hit_rate"] = float(torch.cat([b["target_hit"] for b in chunks]).mean())
    meta = {
        **splits.meta,
        "constructed": {"kind": kind, **dict(provenance), "settings": json.loads(json.dumps(settings)),
                        "summary": summary},
    }
    constructed = Splits(images, labels, splits.test_x, splits.test_y, list(splits.class_names), meta)
    # The counts describe the constructed training set, not its source.
    constructed.meta["num_train"] = len(labels)
    constructed.meta["train_per_class"] = torch.bincount(labels, minlength=len(splits.class_names)).tolist()
    save_prepared(constructed, out)
    return constructed


def construct_from_run(
    kind: str,
    source_run: str | Path,
    splits: Splits,
    out: str | Path,
    work_dir: str | Path,
    settings: Mapping,
    key: str,
    *,
    device: torch.device | str = "cpu",
    progress: bool = True,
) -> Splits:
    """`build_constructed` with the trained model of the run folder `source_run`; the
    construction's provenance is its name `key` and the source run's id (its folder's name)."""
    model, _ = load_trained_model(source_run, device)
    model_file = Path(source_run) / CHECKPOINT_FILES["last"]
    provenance = {"key": key, "source_run": Path(source_run).name,
                  "source_model_sha256": file_checksums(model_file, ["sha256"])["sha256"]}
    return build_constructed(kind, model, splits, out, work_dir, settings, provenance, device=device,
                             progress=progress)
