"""Two `tinymemory worker`s on one host and one metrics port: both run and ingest, the port serves every
item stored exactly once, and a port taken by the other worker or by a foreign program is one log line, never
a traceback."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.cluster import Cluster, cluster_fixture, write_notes

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def _log(cluster: Cluster, n: int) -> str:
    return (cluster.root / f"worker-{n}.log").read_text(errors="replace")


def _messages(cluster: Cluster, n: int) -> list[str]:
    """The messages of worker n's JSON log lines (Celery's banner around them is plain text)."""
    lines = (line for line in _log(cluster, n).splitlines() if line.startswith("{"))
    return [json.loads(line)["message"] for line in lines]


@contextmanager
def _logs_on_failure(cluster: Cluster) -> Iterator[None]:
    """A wait that fails shows the workers' last log lines: pytest soon deletes the logs of older runs."""
    try:
        yield
    except AssertionError as err:
        tails = [
            line
            for n in range(len(cluster.workers))
            for line in [f"--- worker-{n}.log", *_log(cluster, n).splitlines()[-20:]]
        ]
        raise AssertionError("\n".join([str(err), *tails])) from None


def _ready(cluster: Cluster, n: int) -> bool:
    return any(message.endswith(" ready.") for message in _messages(cluster, n))


def _stored_by(messages: list[str]) -> int:
    """The items a worker's batches stored, from their `batch done: {report}` lines."""
    reports = (json.loads(m.removeprefix("batch done: ")) for m in messages if m.startswith("batch done: "))
    return sum(int(report["stored"]) for report in reports)


def _stored_total(port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5, trust_env=False).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "tinymemory_items_stored_total":
                return sample.value
    raise AssertionError(f"no tinymemory_items_stored_total in:\n{text}")


def test_two_workers_on_one_metrics_port_both_ingest_and_are_counted_once(cluster: Cluster, tmp_path: Path) -> None:
    port = _free_port()
    cluster.extra_env["TINYMEMORY_METRICS_DIR"] = str(tmp_path / "metrics")
    folder = tmp_path / "notes"
    write_notes(folder, 1_000)
    cluster.add_folder("notes", folder)
    # Started together, so both race for the port as two workers started by one script do.
    workers = [cluster.start_worker(metrics_port=port), cluster.start_worker(metrics_port=port)]
    with _logs_on_failure(cluster):
        cluster.wait(lambda: _ready(cluster, 0) and _ready(cluster, 1), 60, "both workers ready")
        assert cluster.sync("notes")
        cluster.wait_done("notes", 1_000, within_s=60)

    assert [worker.poll() for worker in workers] == [None, None]
    assert len(cluster.items("notes")) == 1_000
    # Each worker's processes stored part of the items; the one serving the port counts them all, once.
    assert _stored_total(port) == 1_000
    messages = [_messages(cluster, 0), _messages(cluster, 1)]
    stored = [_stored_by(ms) for ms in messages]
    assert all(stored) and sum(stored) == 1_000, f"items stored by each worker: {stored}"
    told = [[m for m in ms if f"port {port} is served by another tinymemory worker" in m] for ms in messages]
    serving = [[m for m in ms if m == f"metrics on :{port}/metrics"] for ms in messages]
    assert sorted(len(t) for t in told) == [0, 1]
    assert [len(s) for s in serving] == [1 - len(t) for t in told]  # the other one serves
    assert not any("another program" in m for ms in messages for m in ms)
    for n in (0, 1):
        assert "Traceback" not in _log(cluster, n)


def test_a_port_held_by_another_program_is_one_line_and_the_worker_ingests(cluster: Cluster, tmp_path: Path) -> None:
    cluster.extra_env["TINYMEMORY_METRICS_DIR"] = str(tmp_path / "metrics")
    folder = tmp_path / "notes"
    write_notes(folder, 20)
    cluster.add_folder("notes", folder)
    with socket.socket() as held:  # a foreign program: it listens and never answers
        held.bind(("", 0))
        held.listen()
        port = int(held.getsockname()[1])
        worker = cluster.start_worker(metrics_port=port)
        with _logs_on_failure(cluster):
            cluster.wait(lambda: _ready(cluster, 0), 60, "the worker ready")
            assert cluster.sync("notes")
            cluster.wait_done("notes", 20, within_s=60)
        assert worker.poll() is None
    messages = _messages(cluster, 0)
    assert any(m.startswith("batch done") for m in messages)
    [line] = [m for m in messages if f"port {port}" in m]
    assert "another program" in line
    assert "Traceback" not in _log(cluster, 0)
