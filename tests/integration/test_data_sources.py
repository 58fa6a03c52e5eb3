"""Where the data comes from, as users meet it: the official downloads (served here by an HTTP
server on 127.0.0.1 through $STUDY_DATA_URL_BASE), a local mirror, and `variants: auto`.

The served archives are tiny ones in the official formats (tests/helpers/data_archives.py), so their
checksums are not the published ones: in process the registry's entries are replaced by specs
with the tiny archives' digests; in the Snakemake run (a subprocess tree) a `sitecustomize`
module on PYTHONPATH does the same to `study.data.archives`. Everything else, the download,
its verification, the loader and the prepared file, is the code users run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers.data_archives import make_cifar10_jpeg_archive
from helpers.data_sources import ROOT

from study.cli import main as study_main
from study.config import load_params, plan_runs
from study.data import archives, registry
from study.data.download import MIRROR_ENV, URL_BASE_ENV, DataUnavailableError, fetch_archive
from study.data.prepared import load_prepared


@pytest.fixture(autouse=True)
def _no_site_settings(monkeypatch):
    """A mirror or URL base set in the environment (CI sets a mirror) must not leak into these tests."""
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    monkeypatch.delenv(URL_BASE_ENV, raising=False)






@pytest.fixture
def served_sources(monkeypatch, official_archives):
    """The registry's sources with the tiny archives' digests, and no mirror set."""
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    for key, specs in official_archives.items():
        monkeypatch.setitem(registry.sources(), key, dataclasses.replace(registry.sources()[key], archives=specs))
    return official_archives


def _prepare(capsys, tmp_path, dataset, *extra):
    rc = study_main(["prepare", "--dataset", dataset, "--variant", "official", "--raw-dir", str(tmp_path / "raw"),
                     "--out", str(tmp_path / f"{dataset}.pt"), "--no-progress", *extra])
    return rc, capsys.readouterr().err


def test_study_prepare_downloads_official_archives_from_the_url_base(served_sources, server, tmp_path, capsys,
                                                                     monkeypatch):
    base, _, httpd = server
    monkeypatch.setenv(URL_BASE_ENV, base)
    for dataset in ("cifar10", "mnist"):
        rc, err = _prepare(capsys, tmp_path, dataset)
        assert rc == 0, err
        splits = load_prepared(tmp_path / f"{dataset}.pt")
        assert splits.meta["variant"] == "official" and splits.num_classes == 10
    assert sorted(p.name for p in (tmp_path / "raw").iterdir()) == sorted(
        s.filename for specs in served_sources.values() for s in specs)
    assert sum(r.startswith("200") for r in httpd.requests) == 5  # one CIFAR-10 archive, four MNIST files


def test_interrupted_download_leaves_nothing_and_the_rerun_succeeds(served_sources, server, tmp_path, capsys,
                                                                    monkeypatch):
    base, _, httpd = server
    monkeypatch.setenv(URL_BASE_ENV, base)
    name = archives.CIFAR10_OFFICIAL.filename
    httpd.truncate.add(name)
    rc, err = _prepare(capsys, tmp_path, "cifar10")
    assert rc == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert name in err and "closed after" in err and f"{base}/{name}" in err
    assert list((tmp_path / "raw").iterdir()) == [], "no partial download is left behind"
    assert not (tmp_path / "cifar10.pt").exists()

    httpd.truncate.clear()
    rc, err = _prepare(capsys, tmp_path, "cifar10")
    assert rc == 0, err
    assert load_prepared(tmp_path / "cifar10.pt").train_x.shape[0] == 30


def test_a_404_is_one_line_naming_the_url_and_where_to_put_the_file(served_sources, server, tmp_path, capsys,
                                                                   monkeypatch):
    base, root, _ = server
    monkeypatch.setenv(URL_BASE_ENV, base)
    (root / "train-labels-idx1-ubyte.gz").unlink()
    rc, err = _prepare(capsys, tmp_path, "mnist")
    assert rc == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{base}/train-labels-idx1-ubyte.gz" in err and "404" in err
    assert str(tmp_path / "raw" / "train-labels-idx1-ubyte.gz") in err and MIRROR_ENV in err
    assert not list((tmp_path / "raw").glob("*.part")) and not (tmp_path / "mnist.pt").exists()


def test_urls_are_tried_in_order_until_one_gives_the_verified_file(official_archives, server, tmp_path, capsys):
    base, root, httpd = server
    (root / "bad").mkdir()
    (root / "bad" / "t10k-labels-idx1-ubyte.gz").write_bytes(b"other content")
    spec = dataclasses.replace(official_archives["mnist", "official"][3],
                               urls=(f"{base}/gone/t10k-labels-idx1-ubyte.gz", f"{base}/bad/t10k-labels-idx1-ubyte.gz",
                                     f"{base}/t10k-labels-idx1-ubyte.gz"))
    got = fetch_archive(spec, tmp_path / "raw", None, progress=False)
    assert got.read_bytes() == (root / "t10k-labels-idx1-ubyte.gz").read_bytes()
    assert [r.split()[0] for r in httpd.requests] == ["404", "200", "200"]
    err = capsys.readouterr().err
    assert "/gone/" in err and "/bad/" in err and "trying the next URL" in err
    assert sorted(p.name for p in (tmp_path / "raw").iterdir()) == ["t10k-labels-idx1-ubyte.gz"]


def test_every_url_failing_names_each(official_archives, server, tmp_path):
    base, _, _ = server
    spec = dataclasses.replace(official_archives["cifar10", "official"][0],
                               urls=(f"{base}/a/x.tar.gz", f"{base}/b/x.tar.gz"))
    with pytest.raises(DataUnavailableError) as err:
        fetch_archive(spec, tmp_path / "raw", None, progress=False)
    assert f"{base}/a/x.tar.gz" in str(err.value) and f"{base}/b/x.tar.gz" in str(err.value)


def test_published_urls_the_mnist_mirror_first():
    assert [len(s.urls) for s in archives.MNIST] == [2] * 4
    assert all("ossci-datasets" in s.urls[0] and "yann.lecun.com" in s.urls[1] for s in archives.MNIST)
    assert archives.CIFAR10_OFFICIAL.urls and not archives.CIFAR10_JPEG.urls


def _mirror_with_jpeg(tmp_path) -> Path:
    mirror = tmp_path / "mirror"
    make_cifar10_jpeg_archive(mirror / "cifar10-jpeg" / archives.CIFAR10_JPEG.filename, 2, 1)
    return mirror


@pytest.mark.parametrize(
    ("held", "url_base", "expected"),
    [
        ((), False, "official"),  # nothing held: the official download
        (("mirror:jpeg",), False, "jpeg"),  # this project's machines: only the JPEG variant, in the mirror
        (("mirror:jpeg", "mirror:official"), False, "official"),  # official preferred
        (("mirror:jpeg", "raw:official"), False, "official"),
        (("raw:jpeg",), True, "jpeg"),  # what is held wins over a download
    ],
)
def test_auto_variant_is_resolved_from_what_raw_and_mirror_hold(tmp_path, monkeypatch, held, url_base, expected):
    mirror, raw = tmp_path / "mirror", tmp_path / "data" / "raw"
    for place in held:
        where, variant = place.split(":")
        spec = archives.VARIANT_ARCHIVES["cifar10", variant][0]
        folder = mirror / spec.mirror_subdirs[0] if where == "mirror" else raw
        folder.mkdir(parents=True, exist_ok=True)
        (folder / spec.filename).write_bytes(b"presence is what planning checks")
    if url_base:
        monkeypatch.setenv(URL_BASE_ENV, "http://127.0.0.1:9")
    else:
        monkeypatch.delenv(URL_BASE_ENV, raising=False)
    assert registry.resolve_variant("cifar10", "auto", raw, mirror) == expected
    assert registry.resolve_variant("mnist", "auto", raw, mirror) == "official"
    assert registry.resolve_variant("cifar10", "jpeg", raw, None) == "jpeg"
    with pytest.raises(ValueError, match="valid variants: official, jpeg"):
        registry.resolve_variant("cifar10", "png", raw, mirror)


def test_demo_runs_name_the_resolved_variant(tmp_path, monkeypatch):
    """The demo's `cifar10: auto` becomes a real variant in the params, and so in run ids."""
    monkeypatch.chdir(tmp_path)  # data/raw is relative to the working directory
    monkeypatch.delenv(URL_BASE_ENV, raising=False)

    def cifar_runs(mirror: Path | None) -> dict[str, str]:
        if mirror is None:
            monkeypatch.delenv(MIRROR_ENV, raising=False)
        else:
            monkeypatch.setenv(MIRROR_ENV, str(mirror))
        params = load_params(ROOT / "params.yaml", {"preset": "demo"}, presets_dir=ROOT / "workflow/presets",
                             schema_path=ROOT / "workflow/schemas/params.schema.yaml")
        assert params.data.variants["cifar10"] != "auto"
        return {r.run_id: r.variant for r in plan_runs(params) if r.dataset == "cifar10"}

    online, offline = cifar_runs(None), cifar_runs(_mirror_with_jpeg(tmp_path))
    assert online and set(online.values()) == {"official"} and not any("jpeg" in i for i in online)
    assert offline and set(offline.values()) == {"jpeg"} and all("_jpeg-" in i or "jpeg_d_" in i for i in offline)


def test_study_prepare_takes_the_jpeg_variant_from_the_mirror(tmp_path, capsys, monkeypatch):
    mirror = _mirror_with_jpeg(tmp_path)
    spec_path = mirror / "cifar10-jpeg" / archives.CIFAR10_JPEG.filename
    spec = dataclasses.replace(archives.CIFAR10_JPEG, sha256=_sha256(spec_path))
    monkeypatch.setitem(registry.sources(), ("cifar10", "jpeg"),
                        dataclasses.replace(registry.sources()["cifar10", "jpeg"], archives=(spec,)))
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    rc = study_main(["prepare", "--dataset", "cifar10", "--variant", "jpeg", "--raw-dir", str(tmp_path / "raw"),
                     "--out", str(tmp_path / "c.pt"), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    assert load_prepared(tmp_path / "c.pt").meta["variant"] == "jpeg"


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()




