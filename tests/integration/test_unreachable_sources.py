"""What cannot be fetched is found at preflight, in seconds (study.preflight.reachable_plan):
a dataset whose host does not answer is left out of the plan with one line and how to supply
it; a served host keeps it in; the answers are kept for minutes, so a rerun does not wait again."""

from __future__ import annotations

import socket
import time

import pytest
from helpers.workflow import ROOT

import study.preflight as preflight
from study.config import load_params, plan_runs
from study.config.zoo import plan_zoo
from study.preflight import OFFLINE, item_lines, probe_hosts, reachable_plan


@pytest.fixture
def demo(monkeypatch):
    for var in ("STUDY_DATA_MIRROR", "STUDY_WEIGHTS_DIR", "STUDY_WEIGHTS_URL_BASE"):
        monkeypatch.delenv(var, raising=False)
    params = load_params(ROOT / "params.yaml", {"preset": "demo"}, presets_dir=ROOT / "workflow/presets",
                         schema_path=ROOT / "workflow/schemas/params.schema.yaml")
    return params, plan_runs(params), plan_zoo(params)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_served_host_keeps_every_dataset_in_the_plan(demo, server, tmp_path, monkeypatch):
    url, _, _ = server
    monkeypatch.setenv("STUDY_DATA_URL_BASE", url)
    params, runs, zoo = demo
    kept, kept_zoo, left = reachable_plan(params, runs, zoo, tmp_path)
    assert left == [] and kept == runs and kept_zoo == zoo


def test_an_unreachable_host_is_left_out_in_one_line_each_in_seconds(demo, tmp_path, monkeypatch):
    port = _closed_port()
    monkeypatch.setenv("STUDY_DATA_URL_BASE", f"http://127.0.0.1:{port}")
    params, runs, zoo = demo
    t0 = time.perf_counter()
    kept, _, left = reachable_plan(params, runs, zoo, tmp_path)
    assert time.perf_counter() - t0 < 5
    assert {i.what for i in left} == {"dataset cifar10 (official)", "dataset mnist (official)"}
    assert all(i.cause == OFFLINE for i in left) and kept == []
    lines = item_lines(left)
    assert len(lines) == 2 and all(f"127.0.0.1:{port} connection refused" in line and "$STUDY_DATA_MIRROR" in line
                                   and len(line) < 300 for line in lines), lines
    # a dry run reads the kept answers only: without them it leaves nothing out
    assert reachable_plan(params, runs, zoo, tmp_path / "fresh", probe=False)[2] == []
    assert len(reachable_plan(params, runs, zoo, tmp_path, probe=False)[2]) == 2


def test_the_answers_are_kept_for_minutes_then_asked_again(tmp_path, monkeypatch):
    port = _closed_port()
    url, cache = f"http://127.0.0.1:{port}/x.tar", tmp_path / "hosts.json"
    assert probe_hosts([url], cache) == {f"127.0.0.1:{port}": "connection refused"}
    with socket.socket() as listener:  # the host comes back
        listener.bind(("127.0.0.1", port))
        listener.listen()
        listener.setblocking(False)
        assert probe_hosts([url], cache) == {f"127.0.0.1:{port}": "connection refused"}  # not asked again
        with pytest.raises(BlockingIOError):
            listener.accept()
        monkeypatch.setattr(preflight, "PROBE_TTL_S", 0.0)
        assert probe_hosts([url], cache) == {}
