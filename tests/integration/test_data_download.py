import hashlib
from pathlib import Path

import pytest

from study.data.download import (
    MIRROR_ENV,
    ArchiveSpec,
    ChecksumError,
    DataUnavailableError,
    fetch_archive,
    file_checksums,
    resolve_mirror,
)

CONTENT = b"tiny archive bytes\n" * 1000


def _spec(url: str | None = None, subdirs: tuple[str, ...] = ()) -> ArchiveSpec:
    return ArchiveSpec(
        filename="tiny.tar.gz",
        urls=url,
        md5=hashlib.md5(CONTENT).hexdigest(),
        sha256=hashlib.sha256(CONTENT).hexdigest(),
        mirror_subdirs=subdirs,
    )


@pytest.fixture(autouse=True)
def _no_env_mirror(monkeypatch):
    # A mirror configured in the developer's shell must not leak into these tests.
    monkeypatch.delenv(MIRROR_ENV, raising=False)


def test_file_checksums_match_hashlib(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(CONTENT * 300)  # several read chunks
    got = file_checksums(f, ["md5", "sha256"])
    assert got == {
        "md5": hashlib.md5(CONTENT * 300).hexdigest(),
        "sha256": hashlib.sha256(CONTENT * 300).hexdigest(),
    }


def test_spec_requires_a_checksum_and_a_bare_filename():
    with pytest.raises(ValueError, match="checksum"):
        ArchiveSpec(filename="a.tar.gz")
    with pytest.raises(ValueError, match="bare file name"):
        ArchiveSpec(filename="sub/a.tar.gz", md5="0" * 32)
    with pytest.raises(ValueError, match="md5"):
        ArchiveSpec(filename="a.tar.gz", md5="xyz")


def test_resolve_mirror_prefers_argument_then_env(monkeypatch, tmp_path):
    assert resolve_mirror(None) is None
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path / "env"))
    assert resolve_mirror(None) == tmp_path / "env"
    assert resolve_mirror(tmp_path / "arg") == tmp_path / "arg"
    assert resolve_mirror(str(tmp_path / "arg")) == tmp_path / "arg"


def test_fetch_from_mirror_root(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "tiny.tar.gz").write_bytes(CONTENT)
    raw = tmp_path / "raw"
    got = fetch_archive(_spec(), raw, mirror, progress=False)
    assert got == raw / "tiny.tar.gz"
    assert got.read_bytes() == CONTENT
    assert sorted(p.name for p in raw.iterdir()) == ["tiny.tar.gz"]  # no temporary left


def test_fetch_from_mirror_subdir_via_env(monkeypatch, tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "tiny").mkdir(parents=True)
    (mirror / "tiny" / "tiny.tar.gz").write_bytes(CONTENT)
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    got = fetch_archive(_spec(subdirs=("tiny",)), tmp_path / "raw", progress=False)
    assert got.read_bytes() == CONTENT


def test_fetch_downloads_file_url_into_empty_raw_dir(tmp_path):
    source = tmp_path / "server" / "tiny.tar.gz"
    source.parent.mkdir()
    source.write_bytes(CONTENT)
    raw = tmp_path / "raw"
    got = fetch_archive(_spec(url=source.as_uri()), raw, None, progress=True)
    assert got.read_bytes() == CONTENT
    assert sorted(p.name for p in raw.iterdir()) == ["tiny.tar.gz"]  # .part renamed away


def test_present_file_is_used_without_any_source(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "tiny.tar.gz").write_bytes(CONTENT)
    # No mirror and no URL: succeeding proves the raw copy was used.
    assert fetch_archive(_spec(), raw, None, progress=False) == raw / "tiny.tar.gz"


def test_bad_mirror_copy_raises_and_is_not_copied(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "tiny.tar.gz").write_bytes(b"tampered")
    raw = tmp_path / "raw"
    spec = _spec()
    with pytest.raises(ChecksumError) as err:
        fetch_archive(spec, raw, mirror, progress=False)
    message = str(err.value)
    assert "tiny.tar.gz" in message
    assert spec.md5 in message
    assert hashlib.md5(b"tampered").hexdigest() in message
    assert list(raw.iterdir()) == []


def test_good_copy_in_subdir_wins_over_bad_copy_at_root(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "tiny").mkdir(parents=True)
    (mirror / "tiny.tar.gz").write_bytes(b"tampered")
    (mirror / "tiny" / "tiny.tar.gz").write_bytes(CONTENT)
    got = fetch_archive(_spec(subdirs=("tiny",)), tmp_path / "raw", mirror, progress=False)
    assert got.read_bytes() == CONTENT


def test_corrupt_raw_file_is_set_aside_and_replaced_from_mirror(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "tiny.tar.gz").write_bytes(b"truncated")
    (raw / "tiny.tar.gz.corrupt").write_bytes(b"older corrupt copy")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "tiny.tar.gz").write_bytes(CONTENT)
    got = fetch_archive(_spec(), raw, mirror, progress=False)
    assert got.read_bytes() == CONTENT
    # Both bad copies are kept: nothing is lost by the replacement.
    assert (raw / "tiny.tar.gz.corrupt").read_bytes() == b"older corrupt copy"
    assert (raw / "tiny.tar.gz.corrupt.1").read_bytes() == b"truncated"


def test_download_with_wrong_content_raises_checksum_error(tmp_path):
    source = tmp_path / "tiny.tar.gz"
    source.write_bytes(b"not the archive")
    raw = tmp_path / "raw"
    with pytest.raises(ChecksumError, match="tiny.tar.gz"):
        fetch_archive(_spec(url=source.as_uri()), raw, None, progress=False)
    assert not (raw / "tiny.tar.gz").exists()
    assert not (raw / "tiny.tar.gz.part").exists()


def test_nothing_available_names_file_checksum_and_places(tmp_path):
    raw = tmp_path / "raw"
    spec = _spec()
    with pytest.raises(DataUnavailableError) as err:
        fetch_archive(spec, raw, tmp_path / "no-mirror", progress=False)
    message = str(err.value)
    for needed in ("tiny.tar.gz", spec.md5, spec.sha256, str(raw), MIRROR_ENV, "data.mirror"):
        assert needed in message
    assert "no public URL" in message
    assert "does not exist" in message  # the mirror folder given was missing


def test_failed_download_is_unavailable_and_names_url(tmp_path):
    url = (tmp_path / "missing" / "tiny.tar.gz").as_uri()
    raw = tmp_path / "raw"
    with pytest.raises(DataUnavailableError) as err:
        fetch_archive(_spec(url=url), raw, None, progress=False)
    assert url in str(err.value)
    assert str(Path(raw) / "tiny.tar.gz") in str(err.value)
    assert list(raw.iterdir()) == []
