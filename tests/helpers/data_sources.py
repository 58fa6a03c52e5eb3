"""An HTTP server on 127.0.0.1 serving the tiny official archives (`server`,
`official_archives`: fixtures registered by tests/conftest.py), for the download tests."""

from __future__ import annotations

import dataclasses
import functools
import http.server
import threading
from pathlib import Path

import pytest

from helpers.data_archives import make_cifar10_official_archive, make_mnist_files
from study.data import archives

ROOT = Path(__file__).resolve().parents[2]


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder; a file named in `server.truncate` is announced whole but cut off
    halfway, as when a connection drops during a download."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        name = self.path.rsplit("/", 1)[-1]
        if name not in self.server.truncate:
            return super().do_GET()
        data = (Path(self.directory) / name).read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.server.requests.append(name)
        self.close_connection = True

    def send_response(self, code: int, message: str | None = None) -> None:
        self.server.requests.append(f"{code} {self.path}")
        super().send_response(code, message)

    def log_message(self, *args) -> None:  # keep the test output clean
        pass


@pytest.fixture
def server(tmp_path):
    """(base URL, served folder, server) of an HTTP server on 127.0.0.1, stopped afterwards."""
    root = tmp_path / "served"
    root.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(root)))
    httpd.truncate, httpd.requests = set(), []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", root, httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def official_archives(server):
    """The tiny official CIFAR-10 and MNIST files in the served folder; their specs with the
    published names and URLs but the tiny files' digests."""
    _, root, _ = server
    _, cifar_md5 = make_cifar10_official_archive(root / archives.CIFAR10_OFFICIAL.filename, 3, 2)
    _, mnist_md5s = make_mnist_files(root, 30, 20)
    return {
        ("cifar10", "official"): (dataclasses.replace(archives.CIFAR10_OFFICIAL, md5=cifar_md5),),
        ("mnist", "official"): tuple(dataclasses.replace(s, md5=mnist_md5s[s.filename]) for s in archives.MNIST),
    }
