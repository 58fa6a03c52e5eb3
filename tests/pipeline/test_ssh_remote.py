"""DVC's SSH remote against a real OpenSSH server on 127.0.0.1 (tests/helpers/ssh_server.py):
`dvc push` from one clone, `dvc pull` into another, byte for byte; and a wrong key is refused.

In the pipeline tier: it starts a server and several dvc processes (seconds, not the
milliseconds `make test`'s tiers keep to), and `.ci/run` installs openssh-server before
`make test-pipeline`."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from helpers.ssh_server import configure_dvc_remote, dvc_command, ssh_remote

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{dvc_command().parent}{os.pathsep}{env.get('PATH', '')}"
    # A HOME of the test's own: no ~/.ssh key, ssh config or agent of the machine's can log in,
    # or prompt for a passphrase, in place of the key the remote is configured with.
    env["HOME"] = str(home)
    env.pop("SSH_AUTH_SOCK", None)
    env.pop("STUDY_DATA_MIRROR", None)
    return env


def _run(args: list[str | Path], cwd: Path, env: dict[str, str], ok: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=180)
    if ok:
        assert proc.returncode == 0, f"{args} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


def test_dvc_push_and_pull_through_a_real_ssh_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = _env(home)
    dvc = dvc_command()
    server_dir = tmp_path / "server"
    server_dir.mkdir()
    with ssh_remote(server_dir) as remote:
        # The first clone: git + DVC, one tracked file of random bytes, pushed to the server.
        repo = tmp_path / "repo"
        repo.mkdir()
        _run(["git", "init", "-q"], repo, env)
        _run([dvc, "init", "-q"], repo, env)
        _run([dvc, "config", "core.analytics", "false"], repo, env)
        data = os.urandom(64 * 1024)
        (repo / "blob.bin").write_bytes(data)
        _run([dvc, "add", "-q", "blob.bin"], repo, env)
        configure_dvc_remote(repo, remote)
        assert "keyfile" not in (repo / ".dvc" / "config").read_text(), "the key's path belongs in config.local"
        _run([*GIT, "add", "."], repo, env)
        _run([*GIT, "commit", "-qm", "blob"], repo, env)
        _run([dvc, "push"], repo, env)

        # The server holds the object where DVC 3 puts it: files/md5/<2 hex>/<30 hex>.
        md5 = hashlib.md5(data).hexdigest()
        stored = remote.root / "files" / "md5" / md5[:2] / md5[2:]
        assert sorted(p.relative_to(remote.root) for p in (remote.root / "files" / "md5").rglob("*")
                      if p.is_file()), f"nothing under {remote.root}/files/md5 after dvc push"
        assert stored.read_bytes() == data

        # The second clone: git's files only (config.local and the cache stay behind).
        clone = tmp_path / "clone"
        _run(["git", "clone", "-q", repo, clone], tmp_path, env)
        assert not (clone / "blob.bin").exists()

        # A key the server does not know: the pull must fail, so the test cannot pass
        # without real public-key authentication.
        wrong = tmp_path / "wrong_ed25519_key"
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", wrong], tmp_path, env)
        _run([dvc, "remote", "modify", "--local", "store", "keyfile", wrong], clone, env)
        refused = _run([dvc, "pull"], clone, env, ok=False)
        assert refused.returncode != 0, f"dvc pull with a wrong key succeeded:\n{refused.stdout}\n{refused.stderr}"
        # refused by the server's key check, not failing for some other reason (asyncssh's words)
        assert "Permission denied" in refused.stderr, refused.stderr[-2000:]
        assert not (clone / "blob.bin").exists()

        # The right key, set again in the clone as on any new machine: the same bytes come back.
        _run([dvc, "remote", "modify", "--local", "store", "keyfile", remote.keyfile], clone, env)
        _run([dvc, "pull"], clone, env)
        assert (clone / "blob.bin").read_bytes() == data
