"""Getting dataset archives onto disk, verified by checksum.

An archive is looked for, in order: in the raw-data folder, in a local mirror folder, and
at its download URLs, tried in order. Machines without internet access use the mirror; people
behind their own HTTP mirror set $STUDY_DATA_URL_BASE, which replaces the public hosts (the
tests point it at a server on 127.0.0.1). A download goes to `<name>.part` and becomes the
archive only once complete and verified, so an interrupted one leaves nothing behind."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import sys
import urllib.request
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tqdm import tqdm

from study.io import atomic_path

MIRROR_ENV = "STUDY_DATA_MIRROR"
MIRROR_CONFIG_KEY = "data.mirror"
URL_BASE_ENV = "STUDY_DATA_URL_BASE"

_CHUNK = 1 << 20
_DOWNLOAD_TIMEOUT_S = 60


class DataUnavailableError(RuntimeError):
    """No verified copy of an archive could be found or downloaded."""


class ChecksumError(RuntimeError):
    """A copy of an archive does not match its published checksum."""


class IncompleteDownloadError(OSError):
    """The server closed the connection before sending the whole file."""


@dataclass(frozen=True)
class ArchiveSpec:
    """One file to fetch. `urls` are tried in order (a str or None is accepted for one or
    none); `mirror_subdirs` are folders of a mirror searched besides its root.

    `gunzipped_checksums` means the checksums are of the file's gzip-decompressed content:
    some datasets (MNIST) publish digests of their uncompressed files only, and a re-gzipped
    copy with other header bytes holds exactly the same data."""

    filename: str
    urls: tuple[str, ...] = ()
    md5: str | None = None
    sha256: str | None = None
    mirror_subdirs: tuple[str, ...] = ()
    gunzipped_checksums: bool = False

    def __post_init__(self) -> None:
        urls = self.urls
        object.__setattr__(self, "urls", () if urls is None else (urls,) if isinstance(urls, str) else tuple(urls))
        if not self.filename or Path(self.filename).name != self.filename:
            raise ValueError(f"archive filename must be a bare file name, got {self.filename!r}")
        # Without a checksum a truncated or substituted file would be used silently.
        if self.md5 is None and self.sha256 is None:
            raise ValueError(f"archive {self.filename!r} needs an md5 or sha256 checksum")
        for algorithm, digest, length in (("md5", self.md5, 32), ("sha256", self.sha256, 64)):
            if digest is not None and (
                len(digest) != length or any(c not in "0123456789abcdef" for c in digest)
            ):
                raise ValueError(
                    f"{algorithm} of {self.filename!r} must be {length} lowercase hex digits, "
                    f"got {digest!r}"
                )

    @property
    def checksums(self) -> dict[str, str]:
        """Expected digests by algorithm name, e.g. {"md5": "..."}."""
        return {
            name: digest
            for name, digest in (("md5", self.md5), ("sha256", self.sha256))
            if digest is not None
        }

    def describe_checksums(self) -> str:
        text = ", ".join(f"{name} {digest}" for name, digest in self.checksums.items())
        return f"{text} of the uncompressed content" if self.gunzipped_checksums else text


def resolve_mirror(mirror: str | os.PathLike | None) -> Path | None:
    """The mirror folder to search: `mirror` if given, else $STUDY_DATA_MIRROR, else None."""
    if mirror is not None and str(mirror) != "":
        return Path(mirror).expanduser()
    from_env = os.environ.get(MIRROR_ENV, "")
    return Path(from_env).expanduser() if from_env else None


def download_urls(spec: ArchiveSpec) -> tuple[str, ...]:
    """Where `spec` is downloaded from: `$STUDY_DATA_URL_BASE/<file name>` when that is set
    (a site's own mirror, or the tests' server), else the archive's public URLs."""
    base = os.environ.get(URL_BASE_ENV, "").strip()
    if base:
        return (f"{base.rstrip('/')}/{spec.filename}",)
    return spec.urls


def file_checksums(path: str | os.PathLike, algorithms: Iterable[str]) -> dict[str, str]:
    """Hex digests of a file, read in chunks so large archives need little memory."""
    hashers = {name: hashlib.new(name) for name in algorithms}
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            for hasher in hashers.values():
                hasher.update(chunk)
    return {name: hasher.hexdigest() for name, hasher in hashers.items()}


def archive_checksums(path: str | os.PathLike, spec: ArchiveSpec) -> dict[str, str]:
    """The digests `spec` publishes, computed on the file or, for `gunzipped_checksums`, on
    its decompressed content (a file that is not valid gzip then gets the digest of nothing
    readable, which cannot match)."""
    if not spec.gunzipped_checksums:
        return file_checksums(path, spec.checksums)
    hashers = {name: hashlib.new(name) for name in spec.checksums}
    try:
        with gzip.open(path, "rb") as f:
            for chunk in iter(lambda: f.read(_CHUNK), b""):
                for hasher in hashers.values():
                    hasher.update(chunk)
    except (OSError, EOFError, zlib.error) as err:
        # a truncated or byte-flipped gzip stream (zlib.error is no OSError)
        return {name: f"<not readable gzip: {err}>" for name in spec.checksums}
    return {name: hasher.hexdigest() for name, hasher in hashers.items()}


def _mismatches(spec: ArchiveSpec, actual: dict[str, str]) -> dict[str, str]:
    return {name: actual[name] for name, want in spec.checksums.items() if actual[name] != want}


def _checksum_message(spec: ArchiveSpec, source: str, actual: dict[str, str]) -> str:
    wrong = _mismatches(spec, actual)
    parts = [f"{name} expected {spec.checksums[name]}, got {got}" for name, got in wrong.items()]
    return f"checksum mismatch for {spec.filename} from {source}: " + "; ".join(parts)


def _copy_hashing(
    src: BinaryIO, dest: Path, spec: ArchiveSpec, total: int | None, progress: bool
) -> dict[str, str]:
    """Copy a stream to `dest`, hashing what is written, so the copy is verified in one pass."""
    hashers = {name: hashlib.new(name) for name in spec.checksums}
    with (
        open(dest, "wb") as out,
        tqdm(
            total=total,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=spec.filename,
            file=sys.stderr,
            disable=not progress,
        ) as bar,
    ):
        for chunk in iter(lambda: src.read(_CHUNK), b""):
            out.write(chunk)
            for hasher in hashers.values():
                hasher.update(chunk)
            bar.update(len(chunk))
    return {name: hasher.hexdigest() for name, hasher in hashers.items()}


def _set_aside(path: Path) -> Path:
    """Rename a bad file to `<name>.corrupt` (or `.corrupt.N`) so nothing is overwritten."""
    target = path.with_name(path.name + ".corrupt")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.corrupt.{n}")
        n += 1
    os.replace(path, target)
    return target


def _mirror_candidates(spec: ArchiveSpec, mirror: Path) -> list[Path]:
    return [mirror / spec.filename] + [mirror / sub / spec.filename for sub in spec.mirror_subdirs]


def held_locally(spec: ArchiveSpec, raw_dir: Path, mirror: Path | None) -> bool:
    """Whether a copy of `spec` lies in `raw_dir` or the mirror (not verified: planning asks
    this often; `fetch_archive` verifies the copy it takes)."""
    places = [raw_dir / spec.filename] + (_mirror_candidates(spec, mirror) if mirror is not None else [])
    return any(p.is_file() for p in places)


def _from_mirror(spec: ArchiveSpec, mirror: Path, target: Path, progress: bool) -> bool:
    """Copy the first good mirror copy to `target`; raise if only bad copies exist."""
    bad: list[str] = []
    for candidate in _mirror_candidates(spec, mirror):
        if not candidate.is_file():
            continue
        try:
            with (
                open(candidate, "rb") as src,
                atomic_path(target) as tmp,
            ):
                actual = _copy_hashing(src, tmp, spec, candidate.stat().st_size, progress)
                if spec.gunzipped_checksums:
                    actual = archive_checksums(tmp, spec)
                if _mismatches(spec, actual):
                    # Raising inside atomic_path discards the temporary copy.
                    raise ChecksumError(_checksum_message(spec, str(candidate), actual))
        except ChecksumError as err:
            bad.append(str(err))
            continue
        return True
    if bad:
        raise ChecksumError("; ".join(bad) + "; the mirror copy was not used: replace it with a good copy")
    return False


@contextmanager
def _removing_on_error(path: Path) -> Iterator[None]:
    try:
        yield
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _download(spec: ArchiveSpec, url: str, target: Path, progress: bool) -> None:
    part = target.with_name(target.name + ".part")
    with _removing_on_error(part):
        with urllib.request.urlopen(url, timeout=_DOWNLOAD_TIMEOUT_S) as response:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            actual = _copy_hashing(response, part, spec, total, progress)
        # urllib returns a short body without complaint when the server closes early.
        got = part.stat().st_size
        if total is not None and got != total:
            raise IncompleteDownloadError(f"the connection closed after {got} of {total} bytes")
        if spec.gunzipped_checksums:
            actual = archive_checksums(part, spec)
        if _mismatches(spec, actual):
            # Raising here removes the .part file: a download is never worth keeping unverified.
            raise ChecksumError(_checksum_message(spec, url, actual) + "; the download was deleted")
        os.replace(part, target)


_DOWNLOAD_ERRORS = (OSError, http.client.HTTPException, ValueError)  # URLError, timeouts; bad URLs


def download_any(spec: ArchiveSpec, target: Path, progress: bool) -> None:
    """Download `spec` to `target` from the first of `download_urls(spec)` that gives a whole,
    verified file. When none does: ChecksumError if some URL served other content, else
    DataUnavailableError naming every URL tried with its error."""
    failed: dict[str, str] = {}
    bad_content: list[str] = []
    urls = download_urls(spec)
    for url in urls:
        try:
            _download(spec, url, target, progress)
            return
        except ChecksumError as err:
            bad_content.append(str(err))
            failed[url] = str(err)
        except _DOWNLOAD_ERRORS as err:
            failed[url] = f"{type(err).__name__}: {err}"
        if url != urls[-1]:
            print(f"{spec.filename}: {url} failed ({failed[url]}); trying the next URL", file=sys.stderr)
    if bad_content:
        raise ChecksumError("; ".join(bad_content))
    raise DataUnavailableError("; ".join(f"tried {url}: {why}" for url, why in failed.items()))


def _unavailable_message(
    spec: ArchiveSpec,
    raw_dir: Path,
    mirror: Path | None,
    download_error: str | None,
) -> str:
    lines = [f"{spec.filename} ({spec.describe_checksums()}) is not available"]
    if not download_urls(spec):
        lines.append(f"download: none, this file has no public URL and must be supplied locally "
                     f"(or from a site mirror named by ${URL_BASE_ENV})")
    else:
        lines.append(f"download: {download_error}")
    if mirror is None:
        lines.append(f"mirror: none set (${MIRROR_ENV} or config key {MIRROR_CONFIG_KEY})")
    else:
        state = "" if mirror.is_dir() else " (this folder does not exist)"
        searched = ", ".join(str(p) for p in _mirror_candidates(spec, mirror))
        lines.append(f"mirror {mirror}{state}: searched {searched}")
    subdirs = "".join(f" or <mirror>/{sub}/{spec.filename}" for sub in spec.mirror_subdirs)
    lines.append(
        f"Put the file at {raw_dir / spec.filename}, or at <mirror>/{spec.filename}{subdirs} "
        f"in a mirror folder named by ${MIRROR_ENV} or the config key {MIRROR_CONFIG_KEY}"
    )
    return "; ".join(lines)


def fetch_archive(
    spec: ArchiveSpec,
    raw_dir: Path,
    mirror: Path | str | None = None,
    progress: bool = True,
) -> Path:
    """Return `raw_dir/spec.filename`, verified, taking it from raw_dir, the mirror or the URL.

    A bad copy already in raw_dir is renamed to `.corrupt`; a bad mirror copy raises
    ChecksumError and is never copied; when no source works, DataUnavailableError says
    where to put the file."""
    raw_dir = Path(raw_dir)
    raw_dir.mkdir(parents=True, exist_ok=True)
    target = raw_dir / spec.filename

    if target.is_file():
        actual = archive_checksums(target, spec)
        if not _mismatches(spec, actual):
            return target
        kept = _set_aside(target)
        print(
            f"{_checksum_message(spec, str(target), actual)}; moved it to {kept}",
            file=sys.stderr,
        )

    mirror_dir = resolve_mirror(mirror)
    if mirror_dir is not None and _from_mirror(spec, mirror_dir, target, progress):
        return target

    download_error = None
    if download_urls(spec):
        try:
            download_any(spec, target, progress)
            return target
        except DataUnavailableError as err:
            download_error = str(err)
    raise DataUnavailableError(_unavailable_message(spec, raw_dir, mirror_dir, download_error))
