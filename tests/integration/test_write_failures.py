"""A write that fails (a full disk, a folder without write permission, a read-only file system, a
missing mount) ends every `study` command with one line naming the file and the cause, leaves no
temporary or half-written file, and the same command succeeds once the cause is fixed.

The failures are real, not mocked: a full disk is a 1 MiB tmpfs filled to its last byte and a
read-only file system a tmpfs mounted read-only, both inside a private mount namespace
(`unshare --user --map-root-user --mount`, so nothing outside the test process sees them); a
folder without write permission is a root-owned folder written by an unprivileged user (the tests
run as root, to whom permissions do not apply: the probe drops to uid 65534 with setpriv); a
missing mount is a results folder that is a link to a folder that does not exist. The probe
(tests/helpers/write_probe.py) runs each write path of the study: a training checkpoint (torch.save), the
per-sample records (parquet), a table (csv), a run's JSON, a figure, and `study manifest`
through the CLI."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from study.cli import main
from study.io import WriteError, atomic_path, atomic_torch_save, write_error

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "tests" / "helpers" / "write_probe.py"
WRITERS = ("checkpoint", "records", "table", "json", "figure")


def _namespace_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    return probe.returncode == 0


needs_namespace = pytest.mark.skipif(not _namespace_works(), reason="no unprivileged mount namespace (unshare)")


def _in_namespace(mounts: str, script: str, folder: Path) -> subprocess.CompletedProcess:
    """`script` (sh, $1 = folder, $2 = python, $3 = the probe) after `mounts`, in a mount namespace
    of its own: a tmpfs mounted there is gone when the process ends."""
    return subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-ec", f"{mounts}\n{script}", "sh", str(folder),
         sys.executable, str(PROBE)], cwd=ROOT, capture_output=True, text=True, timeout=240,
        env={**os.environ, "PYTHONPATH": str(ROOT)})


def _json_lines(run: subprocess.CompletedProcess) -> list[dict]:
    assert run.returncode == 0, run.stderr[-3000:]
    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]


def _assert_failed(result: dict, folder: Path, cause: str) -> None:
    """Every write failed with one line naming its file and `cause`; the CLI printed that one line
    and exited non-zero; nothing was left in the folder."""
    files = {"checkpoint": "runs/x/checkpoint.pt", "records": "evaluations/x/clean.parquet",
             "table": "tables/classwise.csv", "json": "runs/x/meta.json", "figure": "figures/fig.png"}
    for name in WRITERS:
        failed = result["failed"][name]
        assert failed is not None, f"{name} was written into a folder that refuses writes"
        assert failed["type"] == "WriteError"
        assert failed["message"] == f"cannot write {folder / files[name]}: {cause}", failed["message"]
    cli = result["cli"]
    assert cli["rc"] == 2
    assert cli["stderr"].count("\n") == 1 and "Traceback" not in cli["stderr"]
    assert cli["stderr"].startswith(f"study manifest: error: cannot write {folder / 'figures' / 'all'}: {cause}")
    assert result["left"] == [], "a temporary or half-written file was left behind"


def _assert_rerun(result: dict) -> None:
    assert result["rerun"] == dict.fromkeys(WRITERS, True)
    assert result["checkpoint_reads_back"]
    assert result["cli"]["rc"] == 0, result["cli"]["stderr"]
    assert not [f for f in result["left"] if f.endswith(".tmp")], result["left"]


@needs_namespace
def test_full_disk_is_one_line_and_the_rerun_after_freeing_space_succeeds(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    run = _in_namespace('mount -t tmpfs -o size=1m tmpfs "$1"', '"$2" "$3" "$1" full', folder)
    (result,) = _json_lines(run)
    _assert_failed(result, folder, "no space left on device (ENOSPC); free space and rerun")
    _assert_rerun(result["after"])


@needs_namespace
def test_read_only_file_system_is_one_line_and_the_rerun_after_remounting_succeeds(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    run = _in_namespace('mount -t tmpfs -o ro,size=1m tmpfs "$1"',
                        '"$2" "$3" "$1" fail\nmount -o remount,rw "$1"\n"$2" "$3" "$1" rerun', folder)
    failed, rerun = _json_lines(run)
    _assert_failed(failed, folder, "read-only file system (EROFS); mount it writable or write elsewhere and rerun")
    _assert_rerun(rerun)


@pytest.fixture()
def enterable_tmp() -> Iterator[Path]:
    """A temporary folder an unprivileged user can enter: pytest's own are private to root (0700)."""
    base = Path(tempfile.mkdtemp(prefix="study-eacces-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root to drop to an unprivileged user (setpriv)")
def test_folder_without_write_permission_is_one_line_and_the_rerun_after_chmod_succeeds(enterable_tmp):
    base = enterable_tmp
    folder = base / "results"
    folder.mkdir(mode=0o755)  # owned by root: not writable for uid 65534

    def as_nobody(step: str) -> dict:
        run = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
                              str(PROBE), str(folder), step], cwd=ROOT, capture_output=True, text=True, timeout=240,
                             env={**os.environ, "PYTHONPATH": str(ROOT), "MPLCONFIGDIR": str(base / "mpl"),
                                  "HOME": str(base)})
        return _json_lines(run)[0]

    _assert_failed(as_nobody("fail"), folder, "permission denied (EACCES); make the folder writable for this user "
                                              "and rerun")
    folder.chmod(0o777)
    _assert_rerun(as_nobody("rerun"))


def test_missing_mount_names_the_link_and_the_rerun_after_mounting_succeeds(tmp_path, capsys):
    """results/ is a link to a scratch mount that is not there: the error says so (not 'File exists')."""
    scratch = tmp_path / "scratch" / "results"
    link = tmp_path / "results"
    link.symlink_to(scratch)
    figure = tmp_path / "fig.png"
    figure.write_bytes(b"png")
    out = link / "figures" / "all"
    rc = main(["manifest", "--out", str(out), str(figure)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith(f"study manifest: error: cannot write {out}: folder {link} is a link to {scratch}, "
                          "which does not exist (a missing mount?); mount or create it and rerun")
    assert not scratch.exists() and link.is_symlink()
    scratch.mkdir(parents=True)  # the mount is back
    assert main(["manifest", "--out", str(out), str(figure)]) == 0
    assert (scratch / "figures" / "all").read_text().count("\n") == 2


def test_a_file_where_a_folder_should_be_is_named(tmp_path):
    blocker = tmp_path / "runs"
    blocker.write_text("not a folder")
    with pytest.raises(WriteError) as caught:
        atomic_torch_save({"w": 1}, blocker / "x" / "checkpoint.pt")
    assert str(caught.value).startswith(f"cannot write {blocker / 'x' / 'checkpoint.pt'}: a part of the path")
    assert caught.value.errno in (errno.EEXIST, errno.ENOTDIR)
    blocker.unlink()
    atomic_torch_save({"w": 1}, blocker / "x" / "checkpoint.pt")
    assert [p.name for p in (blocker / "x").iterdir()] == ["checkpoint.pt"]


def test_torch_writer_assertion_becomes_one_line_naming_the_file(tmp_path):
    """torch.save given a path reports a short write as '[enforce fail at inline_container.cc:672]
    . unexpected pos ...', without the errno (atomic_torch_save avoids it by handing torch a file):
    should it reach atomic_path, the message still names the file, the free space, and what to do."""
    target = tmp_path / "runs" / "checkpoint.pt"
    with pytest.raises(WriteError) as caught, atomic_path(target) as tmp:
        tmp.write_bytes(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 87936 vs 87832")
    message = str(caught.value)
    assert message.startswith(f"cannot write {target}: the writer failed without naming the cause "
                              "([enforce fail at inline_container.cc:672] . unexpected pos 87936 vs 87832), ")
    assert "bytes free there; free space or check the folder and rerun" in message and "\n" not in message
    assert list(target.parent.iterdir()) == []


def test_errors_that_are_not_the_write_pass_through_unchanged(tmp_path):
    """Inside a write block, a missing input (a message-only FileNotFoundError), reading another
    file, or a checksum error is the caller's own error, never reported as a failed write."""
    other = tmp_path / "elsewhere" / "input.csv"
    for raised in (FileNotFoundError("evaluation record x does not exist; it is made by `study evaluate`"),
                   FileNotFoundError(errno.ENOENT, "No such file or directory", str(other)),
                   RuntimeError("checksum mismatch")):
        with pytest.raises(type(raised)) as caught, atomic_path(tmp_path / "out.csv"):
            raise raised
        assert caught.value is raised
    assert list(tmp_path.iterdir()) == []


def test_pyarrow_errno_in_the_message_is_read(tmp_path):
    """pyarrow raises OSError without errno, the errno only in its text."""
    err = OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")
    assert str(write_error(tmp_path / "r.parquet", err)) == (
        f"cannot write {tmp_path / 'r.parquet'}: no space left on device (ENOSPC); free space and rerun")
