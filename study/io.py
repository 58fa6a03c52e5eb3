"""Crash-safe file writing: every artifact is written to a temporary file beside its
destination and renamed into place, so an interrupted job never leaves a half-written
file that a later step would mistake for a finished one.

Every write of the study goes through `atomic_path` (or a writer built on it), which also turns
a failed write (a full disk, a folder without write permission, a read-only or missing mount)
into one `WriteError` whose message names the file and the cause in one line, and removes its
temporary file: the `study` command prints that line and exits non-zero, and the rerun, once the
cause is fixed, finds nothing in its way."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tarfile

# What a reader should do about each cause, after its name and errno symbol.
_CAUSES = {
    errno.ENOSPC: ("no space left on device", "free space and rerun"),
    errno.EDQUOT: ("disk quota exceeded", "free space or raise the quota and rerun"),
    errno.EFBIG: ("file too large for this file system or the process's file-size limit",
                  "write to another file system or raise the limit (ulimit -f) and rerun"),
    errno.EACCES: ("permission denied", "make the folder writable for this user and rerun"),
    errno.EPERM: ("operation not permitted", "make the folder writable for this user and rerun"),
    errno.EROFS: ("read-only file system", "mount it writable or write elsewhere and rerun"),
    errno.ENOENT: ("a folder of the path does not exist", "create it (or mount what should be there) and rerun"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "move that file aside and rerun"),
    errno.EEXIST: ("a part of the path exists and is not a folder", "move it aside and rerun"),
    errno.EIO: ("input/output error from the device", "check the disk or mount and rerun"),
}
# pyarrow reports the errno only inside its message: "... Detail: [errno 28] No space left on device".
_ERRNO_IN_TEXT = re.compile(r"\[errno (\d+)\]", re.IGNORECASE)
# torch.save given a path writes through its own C++ stream and reports a failed write as this
# assertion, without the errno (atomic_torch_save hands it a Python file instead, which keeps it).
_TORCH_WRITER = ("inline_container", "PytorchStreamWriter")


class WriteError(OSError):
    """A file of the study could not be written; the message is one line: the file, the cause
    (with its errno symbol) and what to do. `errno` is the cause's, `path` the file."""

    path: Path | None = None


def _errno_of(err: OSError) -> int | None:
    if err.errno is not None:
        return err.errno
    found = _ERRNO_IN_TEXT.search(str(err))
    return int(found.group(1)) if found else None


def _dangling_link(path: Path) -> tuple[Path, str] | None:
    """The first folder of `path` that is a link to nowhere (an unmounted scratch space, a
    moved results folder), with where it points."""
    for part in reversed([path, *path.parents]):
        if part.is_symlink() and not part.exists():
            return part, os.readlink(part)
    return None


def write_error(path: str | os.PathLike, err: BaseException) -> WriteError:
    """The one-line error of a failed write of `path` caused by `err` (an OSError, or torch's
    writer assertion)."""
    path = Path(path)
    link = _dangling_link(path.parent)
    if link is not None:
        part, target = link
        cause = (f"folder {part} is a link to {target}, which does not exist (a missing mount?); "
                 "mount or create it and rerun")
    elif isinstance(err, OSError) and (code := _errno_of(err)) is not None:
        name = errno.errorcode.get(code, f"errno {code}")
        what, todo = _CAUSES.get(code, (os.strerror(code).lower(), "fix the cause and rerun"))
        cause = f"{what} ({name}); {todo}"
    else:
        free = _free_bytes(path.parent)
        cause = ("the writer failed without naming the cause ({}){}; free space or check the folder and rerun"
                 .format(" ".join(str(err).split()), f", {free:,} bytes free there" if free is not None else ""))
    out = WriteError(f"cannot write {path}: {cause}")  # one argument: str() is the message, no "[Errno N]"
    out.errno = _errno_of(err) if isinstance(err, OSError) else None
    out.path = path  # not `filename`, which OSError would print before the message
    return out


def _free_bytes(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _is_write_failure(err: BaseException, own: set[str]) -> bool:
    """Whether `err`, raised while writing a file whose own paths (the target, its temporary file
    and their folders) are `own`, is that write failing, not an error of something else the
    caller did in the block (reading another file, a message-only FileNotFoundError)."""
    if isinstance(err, WriteError):
        return False
    if isinstance(err, RuntimeError):
        return any(marker in str(err) for marker in _TORCH_WRITER)
    if not isinstance(err, OSError) or _errno_of(err) is None:
        return False
    return err.filename is None or os.fspath(err.filename) in own


# mkstemp makes its file readable by its owner only; a result keeps the mode a plain write gives
_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the destination folder; rename it onto `path` on success.
    A failed write raises WriteError naming `path`; the temporary file is removed either way."""
    path = Path(path)
    own = {os.fspath(p) for p in (path, *path.parents)}
    tmp_path: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp_path = Path(tmp)
        own.add(tmp)
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~_UMASK)
        os.replace(tmp_path, path)
    except (OSError, RuntimeError) as err:
        if _is_write_failure(err, own):
            raise write_error(path, err) from err
        raise
    finally:
        if tmp_path is not None:
            # never let the clean-up hide the error that brought us here
            with contextlib.suppress(OSError):
                tmp_path.unlink(missing_ok=True)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def atomic_torch_save(obj: Any, path: str | os.PathLike) -> None:
    import torch  # here, so that the table and figure jobs, which never save tensors, start fast

    # A Python file, not the path: torch then writes through it, and a failed write raises the
    # OSError with its errno (ENOSPC) instead of the writer's "unexpected pos" assertion.
    with atomic_path(path) as tmp, open(tmp, "wb") as out:
        torch.save(obj, out)


def load_torch(path: str | os.PathLike, map_location: str = "cpu", mmap: bool = False) -> Any:
    """Load a tensor file written by this project (tensors, numbers, strings, containers only).
    `mmap` maps the file instead of reading it: a job that uses a few images of a large
    prepared dataset reads only those pages."""
    import torch

    return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)


def replace_marked(text: str, start: str, end: str, section: str) -> str:
    """`text` with the part between the markers `start` and `end` (a generated block of a
    README or a doc) replaced by `section`; ValueError naming the markers when either is missing."""
    if start not in text or end not in text:
        raise ValueError(f"no {start} ... {end} markers")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{section}{end}{tail}"


def member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    """The content of a regular file of an archive (a folder or link member has none: ValueError)."""
    handle = tar.extractfile(member)
    if handle is None:
        raise ValueError(f"archive member {member.name} is no regular file")
    return handle.read()
