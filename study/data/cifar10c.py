"""The official CIFAR-10-C archive (Hendrycks & Dietterich 2019, Zenodo record 2535967).

`CIFAR-10-C.tar` (about 2.9 GB, an uncompressed tar) holds `CIFAR-10-C/<corruption>.npy`,
uint8 arrays of shape (50000, 32, 32, 3): severities 1..5 stacked, 10,000 images each in the
order of the CIFAR-10 test set, and `CIFAR-10-C/labels.npy` (the test labels, five times).

The archive is looked for in the mirror folder first ($STUDY_DATA_MIRROR or the config key
data.mirror), then in the raw-data folder, and used where it lies: at its size a copy into
data/raw would only double it. It is verified once per process (md5 of the whole tar).
Images are read straight from the tar without extracting it: the .npy member is memory-mapped
at its offset, so only the rows asked for are read.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from study.data import archives
from study.data.download import (
    MIRROR_CONFIG_KEY,
    MIRROR_ENV,
    ArchiveSpec,
    ChecksumError,
    DataUnavailableError,
    _checksum_message,
    _mirror_candidates,
    _mismatches,
    _set_aside,
    _unavailable_message,
    archive_checksums,
    download_any,
    resolve_mirror,
)

ARCHIVE = archives.CIFAR10C
FOLDER = "CIFAR-10-C"  # the folder inside the tar
SEVERITIES = 5

# (path, size, mtime, checksums) already verified in this process: hashing 2.9 GB takes seconds
_verified: set[tuple[str, int, int, tuple[tuple[str, str], ...]]] = set()


def _spec(md5: str | None) -> ArchiveSpec:
    # ARCHIVE is looked up at call time so that tests can point it at a small archive.
    return ARCHIVE if md5 is None else dataclasses.replace(ARCHIVE, md5=md5, sha256=None)


def _candidates(spec: ArchiveSpec, raw_dir: Path, mirror: Path | None) -> list[Path]:
    return [*(_mirror_candidates(spec, mirror) if mirror is not None else []), raw_dir / spec.filename]


def locate_cifar10c(raw_dir: str | Path = "data/raw", mirror: str | Path | None = None) -> Path | None:
    """The first copy of the archive present (mirror, then raw_dir), not yet verified; None if none."""
    for path in _candidates(_spec(None), Path(raw_dir), resolve_mirror(mirror)):
        if path.is_file():
            return path
    return None


def _where_to_put(spec: ArchiveSpec, raw_dir: Path) -> str:
    subdirs = "".join(f" or <mirror>/{sub}/{spec.filename}" for sub in spec.mirror_subdirs)
    return (f"Put a good copy ({spec.describe_checksums()}) at {raw_dir / spec.filename}, or at "
            f"<mirror>/{spec.filename}{subdirs} in a mirror folder named by ${MIRROR_ENV} or the config "
            f"key {MIRROR_CONFIG_KEY}.")


def _bad_checksums(path: Path, spec: ArchiveSpec) -> dict[str, str] | None:
    """None if `path` matches the spec's checksums, else the digests it has."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, tuple(sorted(spec.checksums.items())))
    if key in _verified:
        return None
    actual = archive_checksums(path, spec)
    if _mismatches(spec, actual):
        return actual
    _verified.add(key)
    return None


def find_cifar10c(
    raw_dir: str | Path = "data/raw",
    mirror: str | os.PathLike | None = None,
    *,
    md5: str | None = None,
    download: bool = True,
    progress: bool = True,
) -> Path:
    """A verified copy of CIFAR-10-C.tar: from the mirror, else raw_dir, else (if `download`)
    downloaded into raw_dir. A bad copy in raw_dir is moved aside as `.corrupt`; a bad mirror
    copy is left alone (it may be shared). `md5` replaces the official checksum (tests)."""
    spec, raw_dir, mirror_dir = _spec(md5), Path(raw_dir), resolve_mirror(mirror)
    bad: list[str] = []
    for path in _candidates(spec, raw_dir, mirror_dir):
        if not path.is_file():
            continue
        actual = _bad_checksums(path, spec)
        if actual is None:
            return path
        message = _checksum_message(spec, str(path), actual)
        if path.parent == raw_dir:
            message += f"; moved it to {_set_aside(path)}"
        else:
            message += "; the mirror copy was not used, replace it"
        bad.append(message)
    if bad:
        raise ChecksumError("\n".join([*bad, _where_to_put(spec, raw_dir)]))
    if not download:
        raise DataUnavailableError(
            f"{spec.filename} ({spec.describe_checksums()}) is not available and was not downloaded.\n"
            + _where_to_put(spec, raw_dir))
    raw_dir.mkdir(parents=True, exist_ok=True)
    try:
        download_any(spec, raw_dir / spec.filename, progress)
    except DataUnavailableError as err:
        # offline, this is where we end up
        raise DataUnavailableError(_unavailable_message(spec, raw_dir, mirror_dir, str(err))) from err
    print(f"downloaded {spec.filename} to {raw_dir}", file=sys.stderr)
    return raw_dir / spec.filename


def _npy_member(archive: Path, tar: tarfile.TarFile, name: str) -> np.memmap:
    """Memory-map the .npy member `name` of an uncompressed tar in place."""
    want = [FOLDER, f"{name}.npy"]
    # match on the last two path parts, so "./CIFAR-10-C/x.npy" is found too
    found = [m for m in tar.getmembers() if m.isfile() and m.name.split("/")[-2:] == want]
    if len(found) != 1:
        raise ValueError(f"{archive} holds {len(found)} copies of {FOLDER}/{name}.npy, expected 1; "
                         "is it the CIFAR-10-C archive?")
    member = found[0]
    with open(archive, "rb") as f:
        f.seek(member.offset_data)
        version = np.lib.format.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"{archive}: {member.name} is .npy format {version}, expected 1.0 or 2.0")
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran_order, dtype = read_header(f)
        data_offset = f.tell()
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if fortran_order or data_offset + nbytes > member.offset_data + member.size:
        raise ValueError(f"{archive}: {member.name} is truncated or not a C-ordered array")
    return np.memmap(archive, dtype=dtype, mode="r", offset=data_offset, shape=shape)


def read_cifar10c(
    archive: str | Path, corruption: str, severity: int, indices: Sequence[int] | np.ndarray | torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Images (N,3,32,32 uint8) and labels (N, int64) of test images `indices` under one
    (corruption, severity), read lazily from the tar (which is not verified here)."""
    archive = Path(archive)
    if severity not in range(1, SEVERITIES + 1):
        raise ValueError(f"severity must be 1..{SEVERITIES}, got {severity}")
    idx = np.asarray(indices, dtype=np.int64)
    with tarfile.open(archive, "r:") as tar:
        images, labels = _npy_member(archive, tar, corruption), _npy_member(archive, tar, "labels")
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[3] != 3 or images.shape[0] % SEVERITIES:
        raise ValueError(f"{archive}: {corruption}.npy is {images.dtype} {images.shape}, "
                         f"expected uint8 ({SEVERITIES} x N, H, W, 3)")
    per_severity = images.shape[0] // SEVERITIES
    if labels.shape != (images.shape[0],):
        raise ValueError(f"{archive}: labels.npy has shape {labels.shape}, expected ({images.shape[0]},)")
    if idx.size and (idx.min() < 0 or idx.max() >= per_severity):
        raise ValueError(f"test indices must be in 0..{per_severity - 1}, got {idx.min()}..{idx.max()}")
    rows = (severity - 1) * per_severity + idx
    # fancy indexing on the memmap reads only these rows
    x = torch.from_numpy(np.ascontiguousarray(images[rows].transpose(0, 3, 1, 2)))
    y = torch.from_numpy(labels[rows].astype(np.int64))
    return x, y


def load_cifar10c(
    corruption: str,
    severity: int,
    indices: Sequence[int] | np.ndarray | torch.Tensor,
    raw_dir: str | Path = "data/raw",
    mirror: str | os.PathLike | None = None,
    *,
    md5: str | None = None,
    download: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Find and verify the archive (find_cifar10c), then read one (corruption, severity)."""
    return read_cifar10c(find_cifar10c(raw_dir, mirror, md5=md5, download=download), corruption, severity, indices)
