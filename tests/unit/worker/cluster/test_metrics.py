"""The metrics server of a worker: a taken port is one warning line naming who holds it, a second worker takes
the port over when the first stops, live processes' counters are served once, dead ones' files are forgotten,
and the workers of one port share one counter directory."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import fakeredis
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from worker.cluster import metrics
from worker.cluster.metrics import MetricsServer, forget_dead_processes
from worker.cluster.metrics_env import VARIABLE, prepare_multiprocess
from worker.redis.keys import Keys

PREFIX = "tm:test-metrics:"
LOGGER = "worker.cluster.metrics"

Start = Callable[[int, Path], MetricsServer]


def _free_port() -> int:
    # The server binds every address (0.0.0.0), so look for a port free there.
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def _scrape(port: int) -> dict[str, float]:
    """Every sample the port serves, keyed as the text format writes it: `name{label="value"}`."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


def _until(condition: Callable[[], bool], within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.fixture
def start(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> Iterator[Start]:
    """Starts MetricsServers on fakeredis and stops every one after the test, freeing their ports."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    monkeypatch.setattr(metrics, "RETRY_BIND_S", 0.05)
    # A holder that accepts but never answers would hold each test for the probe's full 2 s.
    monkeypatch.setattr(metrics, "_PROBE_TIMEOUT_S", 0.3)
    started: list[MetricsServer] = []

    def start_one(port: int, directory: Path) -> MetricsServer:
        server = MetricsServer(port, directory, fakeredis.FakeRedis(), PREFIX)
        started.append(server)
        server.start()
        return server

    yield start_one
    for server in started:
        server.stop()


class _OtherProgram(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"# HELP other_total Not ours\nother_total 1\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A port held by a socket that listens and never answers."""
    with socket.socket() as held:
        held.bind(("", 0))
        held.listen()
        yield int(held.getsockname()[1])


@pytest.fixture
def other_http_server() -> Iterator[int]:
    """A port held by an HTTP server that answers /metrics, but not with tinymemory's metrics."""
    server = HTTPServer(("", 0), _OtherProgram)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.mark.parametrize("holder", ["silent_listener", "other_http_server"])
def test_a_port_held_by_another_program_is_one_warning_not_an_error(
    holder: str, request: pytest.FixtureRequest, start: Start, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    port: int = request.getfixturevalue(holder)
    server = start(port, tmp_path)  # must not raise
    assert not server.serving
    time.sleep(0.3)  # several retries fail meanwhile; none may log again
    [message] = _warnings(caplog)
    assert f"port {port}" in message and "another program" in message
    assert "tinymemory worker" not in message and "\n" not in message
    assert not server.serving


def test_a_port_served_by_another_worker_says_so_and_is_taken_over_when_that_one_stops(
    start: Start, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    port = _free_port()
    first = start(port, tmp_path)
    assert first.serving and _warnings(caplog) == []
    second = start(port, tmp_path)
    [message] = _warnings(caplog)
    assert f"port {port}" in message and "another tinymemory worker" in message and "another program" not in message
    assert not second.serving
    first.stop()
    assert _until(lambda: second.serving), "the second server did not take the port over"
    assert 'tinymemory_queue_depth{queue="tm.sync"}' in _scrape(port)  # served by the second now
    assert any("was freed" in r.getMessage() for r in caplog.records if r.name == LOGGER)
    assert len(_warnings(caplog)) == 1


def test_a_proxy_in_the_environment_does_not_hide_the_other_worker(
    start: Start, caplog: pytest.LogCaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A host's proxy settings are for the outside; the probe asks this host's own port.
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    port = _free_port()
    start(port, tmp_path)
    start(port, tmp_path)
    [message] = _warnings(caplog)
    assert "another tinymemory worker" in message


def test_a_stopped_server_gives_the_port_back_and_a_stopped_waiter_never_binds(start: Start, tmp_path: Path) -> None:
    port = _free_port()
    start(port, tmp_path).stop()
    held = socket.socket()
    held.bind(("", port))  # free again: stop() closed the listening socket
    held.listen()
    waiter = start(port, tmp_path)
    waiter.stop()
    held.close()
    time.sleep(0.3)  # several retry periods with the port free
    assert not waiter.serving
    with socket.socket() as again:
        again.bind(("", port))


def test_the_queue_depths_are_read_from_redis_at_each_scrape(tmp_path: Path) -> None:
    client = fakeredis.FakeRedis()
    server = MetricsServer(_free_port(), tmp_path, client, PREFIX)
    server.start()
    try:
        client.rpush(Keys(PREFIX).celery() + "tm.backfill", b"a", b"b", b"c")
        depths = _scrape(server.port)
        assert depths['tinymemory_queue_depth{queue="tm.backfill"}'] == 3
        assert depths['tinymemory_queue_depth{queue="tm.ingest"}'] == 0
        client.lpop(Keys(PREFIX).celery() + "tm.backfill")
        assert _scrape(server.port)['tinymemory_queue_depth{queue="tm.backfill"}'] == 2
    finally:
        server.stop()


_COUNTING = """
import sys
from worker.cluster.metrics import ITEMS_STORED
ITEMS_STORED.inc(int(sys.argv[1]))
print("counted", flush=True)
sys.stdin.read()  # stay alive until the test closes stdin
"""


def _counting_processes(directory: Path, *items: int) -> list[subprocess.Popen[str]]:
    """Processes that each add `items` to ITEMS_STORED in multiprocess mode, then wait until their stdin closes."""
    env = {**os.environ, VARIABLE: str(directory)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _COUNTING, str(n)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for n in items
    ]
    for process in processes:
        assert process.stdout is not None and process.stdout.readline() == "counted\n"
    return processes


def _end(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.close()
    process.wait(timeout=10)
    process.stdout.close()


def test_the_server_counts_every_live_process_once_and_forgets_dead_ones(start: Start, tmp_path: Path) -> None:
    dead, *live = _counting_processes(tmp_path, 100, 3, 4)
    try:
        _end(dead)
        assert len(list(tmp_path.glob("counter_*.db"))) == 3
        port = _free_port()
        start(port, tmp_path)
        assert not list(tmp_path.glob(f"*_{dead.pid}.db"))  # forgotten on binding
        assert len(list(tmp_path.glob("counter_*.db"))) == 2
        assert _scrape(port)["tinymemory_items_stored_total"] == 7
        assert _scrape(port)["tinymemory_items_stored_total"] == 7  # a scrape changes nothing
    finally:
        for process in live:
            _end(process)


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait(timeout=10)  # reaped: the pid names no process now
    return process.pid


def test_forget_dead_processes_removes_only_the_files_of_dead_processes(tmp_path: Path) -> None:
    dead, live = _dead_pid(), os.getpid()
    gone = [tmp_path / f"counter_{dead}.db", tmp_path / f"histogram_{dead}.db", tmp_path / f"gauge_livesum_{dead}.db"]
    kept = [tmp_path / f"counter_{live}.db", tmp_path / f"histogram_{live}.db", tmp_path / "counter_notapid.db"]
    for path in gone + kept:
        path.write_bytes(b"")
    assert forget_dead_processes(tmp_path) == 3
    assert sorted(tmp_path.iterdir()) == sorted(kept)
    assert forget_dead_processes(tmp_path) == 0


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No multiprocess directory named, the temp dir under tmp_path; both restored after the test."""
    # prepare_multiprocess writes os.environ itself; setenv first records the variable's state before the
    # test (delenv of an absent variable records nothing), so teardown restores it either way.
    monkeypatch.setenv(VARIABLE, "")
    monkeypatch.delenv(VARIABLE)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_the_workers_of_one_port_share_one_directory(environment: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = prepare_multiprocess(9464)
    assert first == environment / f"tinymemory-metrics-{os.getuid()}-9464" and first.is_dir()
    assert os.environ[VARIABLE] == str(first)
    monkeypatch.delenv(VARIABLE)  # as in a second worker's process
    assert prepare_multiprocess(9464) == first
    monkeypatch.delenv(VARIABLE)
    assert prepare_multiprocess(9465) != first


def test_metrics_off_gives_each_worker_a_private_directory(environment: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = prepare_multiprocess(9464)
    monkeypatch.delenv(VARIABLE)
    one = prepare_multiprocess(0)
    monkeypatch.delenv(VARIABLE)
    other = prepare_multiprocess(0)
    assert len({shared, one, other}) == 3 and one.is_dir() and other.is_dir()
    assert os.environ[VARIABLE] == str(other)


def test_a_configured_directory_is_used_and_a_named_one_wins(
    environment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configured = environment / "configured"
    assert prepare_multiprocess(9464, configured) == configured and configured.is_dir()
    named = environment / "named"
    monkeypatch.setenv(VARIABLE, str(named))
    assert prepare_multiprocess(9464, configured) == named and named.is_dir()


def test_a_port_this_worker_may_not_bind_is_one_warning(
    start: Start, caplog: pytest.LogCaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*_: object, **__: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(metrics, "start_http_server", refused)
    server = start(80, tmp_path)  # must not raise
    [message] = _warnings(caplog)
    assert "cannot serve on port 80 (Permission denied)" in message and not server.serving
