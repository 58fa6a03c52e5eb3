"""A real OpenSSH server on 127.0.0.1 for the tests that use DVC's SSH remote (dvc-ssh).

`ssh_remote(tmp)` starts Debian's /usr/sbin/sshd on a free port with its own host key, config
and authorized key, all under `tmp` (nothing in /etc/ssh or ~/.ssh is read or written), and
stops it on exit; `configure_dvc_remote` points a DVC project at it. `.ci/run` installs
openssh-server where it is missing, so a missing sshd is an error here, never a skip.
"""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SSHD = Path("/usr/sbin/sshd")
#: how long sshd has to start listening (it starts in well under a second)
START_TIMEOUT_S = 10.0
#: how long sshd has to exit after SIGTERM before it is killed
STOP_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class SshRemote:
    """A running sshd: the DVC remote's URL, the client's private key, the port, and the
    folder on the server side that the URL names."""

    url: str
    keyfile: Path
    port: int
    root: Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _keygen(path: Path) -> None:
    # ed25519: small, fast to generate, and accepted by both sshd and asyncssh; no passphrase,
    # so nothing prompts.
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
                   check=True, capture_output=True, stdin=subprocess.DEVNULL, timeout=60)


def _wait_listening(port: int, proc: subprocess.Popen, log: Path) -> None:
    """Return once 127.0.0.1:`port` accepts a TCP connection; raise if sshd exits or is too slow."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.returncode} before listening:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"sshd did not listen on 127.0.0.1:{port} within {START_TIMEOUT_S:.0f} s:\n"
                       f"{log.read_text()}")


@contextmanager
def ssh_remote(tmp: Path) -> Iterator[SshRemote]:
    """Run sshd on 127.0.0.1 for the duration of the block, logging in by key only, as the
    user running the tests; its files (keys, config, pid, log) and the remote's folder lie in `tmp`."""
    if not SSHD.is_file():
        raise RuntimeError(f"{SSHD} is missing: apt-get install openssh-server (as .ci/run does)")
    tmp = Path(tmp).resolve()  # sshd re-executes itself and wants absolute paths everywhere
    tmp.mkdir(parents=True, exist_ok=True)
    host_key, client_key = tmp / "ssh_host_ed25519_key", tmp / "client_ed25519_key"
    _keygen(host_key)
    _keygen(client_key)
    authorized = tmp / "authorized_keys"
    authorized.write_text(client_key.with_suffix(".pub").read_text())
    root = tmp / "remote-store"
    root.mkdir()
    port = free_port()  # a small race with other processes, but nothing else here binds ports
    config = tmp / "sshd_config"
    log = tmp / "sshd.log"
    config.write_text("\n".join([
        "ListenAddress 127.0.0.1",
        f"Port {port}",
        f"HostKey {host_key}",
        f"AuthorizedKeysFile {authorized}",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        # the tests run as root in CI: a key logs in, a password never does
        "PermitRootLogin prohibit-password",
        # no PAM: the account is checked by sshd alone, with no /etc/pam.d setup needed
        "UsePAM no",
        # tmp's folders belong to whoever runs the tests, with pytest's modes, not ~/.ssh's
        "StrictModes no",
        f"PidFile {tmp / 'sshd.pid'}",
        # the SFTP server inside sshd: dvc-ssh (sshfs, asyncssh) moves files over SFTP
        "Subsystem sftp internal-sftp",
        "",
    ]))
    # sshd's privilege separation needs this empty folder, which Debian's service unit
    # otherwise creates (no service runs here)
    Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)
    user = getpass.getuser()  # sshd checks the key against this account
    with log.open("wb") as log_file:
        proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                                stdout=log_file, stderr=log_file)
        try:
            _wait_listening(port, proc, log)
            # ssh://user@host:port/abs/path: the path after the port is absolute on the server
            yield SshRemote(url=f"ssh://{user}@127.0.0.1:{port}{root}", keyfile=client_key, port=port, root=root)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def dvc_command() -> Path:
    """The venv's dvc, beside the interpreter running the tests."""
    return Path(sys.executable).parent / "dvc"


def configure_dvc_remote(project: Path, remote: SshRemote, name: str = "store", local_only: bool = False) -> None:
    """Make `remote` the default DVC remote of `project`: the URL in .dvc/config (shared, as a
    project's remote is), the key in .dvc/config.local (this machine's path, kept out of git).

    Host keys: dvc-ssh 4.3 has no `known_hosts` option (dvc's config schema refuses unknown
    keys), and sshfs, under it, connects with asyncssh's `known_hosts=None`, which skips the
    host-key check altogether. So nothing prompts and no known_hosts file is needed; the
    client key is what the server checks, and a wrong key fails (tests/pipeline/test_ssh_remote.py).
    `local_only`: the key alone (a clone, whose .dvc/config names the remote already).
    """
    dvc = dvc_command()
    env = {**os.environ, "PATH": f"{dvc.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    steps = [["remote", "add", "-d", name, remote.url]] if not local_only else []
    for args in (*steps, ["remote", "modify", "--local", name, "keyfile", str(remote.keyfile)]):
        proc = subprocess.run([str(dvc), *args], cwd=project, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=120)
        assert proc.returncode == 0, f"dvc {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"

