"""`ConverterPool`: time limit, memory ceiling, dead and misbehaving workers, threads, and real conversions."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from engines.contract import ConfigError, EngineError, Error, InvalidRequestError, UnsupportedError
from pipeline.convert import ConverterPool, ConvertLimits, RawDocument, convert_document
from tests.fixtures.converters import BROKEN_CHAIN, PROBE_CHAIN, probe_document, worker_pid
from tests.fixtures.documents import pdf_bytes, zip_bomb_bytes
from tests.fixtures.scans import bomb_png, truncated_jpeg
from tests.fixtures.vectors import VECTORS, check_vector

MIB = 1024 * 1024
PROBE_LIMITS = ConvertLimits(timeout_s=1.0, memory_bytes=384 * MIB)


@pytest.fixture
def pool() -> Iterator[ConverterPool]:
    with ConverterPool(1, PROBE_LIMITS, chain_factory=PROBE_CHAIN) as probe_pool:
        yield probe_pool


def wait_until_gone(pid: int) -> None:
    """Block until `pid` has died (it may linger as a zombie until its parent reaps it).

    Dead means every thread of it: a worker's main thread is a zombie a moment before its parent watch has
    exited too, and until then the process has not closed its connection and cannot be reaped.
    """
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            threads = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            return
        if state in {"Z", "X"} and threads == [str(pid)]:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} is still running")


def test_a_hung_conversion_is_killed_and_the_next_runs_on_a_fresh_worker(pool: ConverterPool) -> None:
    first = worker_pid(pool.convert(probe_document()))
    started = time.monotonic()
    with pytest.raises(InvalidRequestError) as caught:
        pool.convert(probe_document("sleep 60", filename="big.pdf"))
    assert caught.value.message == "conversion of big.pdf took longer than 1 s"
    assert time.monotonic() - started < 5
    wait_until_gone(first)
    assert worker_pid(pool.convert(probe_document())) != first


def test_running_past_the_memory_ceiling_fails_cleanly_and_the_pool_survives(pool: ConverterPool) -> None:
    assert worker_pid(pool.convert(probe_document("alloc 32")))  # well under the ceiling: fine
    first = worker_pid(pool.convert(probe_document()))
    with pytest.raises(InvalidRequestError) as caught:
        pool.convert(probe_document("alloc 1024", filename="bomb.xlsx"))
    assert caught.value.message == "conversion of bomb.xlsx ran out of its 384 MiB memory ceiling"
    assert worker_pid(pool.convert(probe_document())) != first


def test_a_worker_killed_while_idle_is_replaced(pool: ConverterPool) -> None:
    first = worker_pid(pool.convert(probe_document()))
    os.kill(first, signal.SIGKILL)
    wait_until_gone(first)
    assert worker_pid(pool.convert(probe_document())) != first


def test_a_worker_killed_mid_conversion_fails_that_document_only(pool: ConverterPool) -> None:
    first = worker_pid(pool.convert(probe_document()))
    outcome: list[BaseException] = []

    def convert_slowly() -> None:
        try:
            pool.convert(probe_document("sleep 0.8", filename="slow.pdf"))
        except Error as err:
            outcome.append(err)

    thread = threading.Thread(target=convert_slowly)
    thread.start()
    time.sleep(0.3)
    os.kill(first, signal.SIGKILL)
    thread.join()
    assert outcome == [
        EngineError("conversion of slow.pdf failed: its worker process was killed by SIGKILL and was replaced")
    ]
    assert worker_pid(pool.convert(probe_document())) != first


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("abort", "conversion of crash.pdf failed: its worker process was killed by SIGABRT and was replaced"),
        ("exit 3", "conversion of crash.pdf failed: its worker process exited with code 3 and was replaced"),
        ("garbage", "crash.pdf: the converter worker sent an unreadable reply and was replaced"),
    ],
)
def test_a_worker_that_dies_or_talks_nonsense_is_replaced(pool: ConverterPool, command: str, message: str) -> None:
    first = worker_pid(pool.convert(probe_document()))
    with pytest.raises(EngineError) as caught:
        pool.convert(probe_document(command, filename="crash.pdf"))
    assert caught.value.message == message
    assert worker_pid(pool.convert(probe_document())) != first


def test_a_converter_bug_is_an_engine_error_and_the_worker_stays(pool: ConverterPool) -> None:
    first = worker_pid(pool.convert(probe_document()))
    with pytest.raises(EngineError, match=r"bug\.pdf: the probe converter failed on pdf \(ValueError: "):
        pool.convert(probe_document("fail", filename="bug.pdf"))
    assert worker_pid(pool.convert(probe_document())) == first


def test_concurrent_conversions_from_several_threads() -> None:
    with ConverterPool(2, PROBE_LIMITS, chain_factory=PROBE_CHAIN) as pool:
        list(ThreadPoolExecutor(2).map(lambda _: pool.convert(probe_document()), range(2)))  # start both
        started = time.monotonic()
        with ThreadPoolExecutor(6) as threads:
            documents = list(threads.map(lambda _: pool.convert(probe_document("sleep 0.2")), range(6)))
        elapsed = time.monotonic() - started
    pids = {worker_pid(document) for document in documents}
    assert len(documents) == 6
    assert len(pids) == 2
    assert elapsed < 6 * 0.2  # two at a time, not one after the other


def test_textual_formats_are_converted_in_process(pool: ConverterPool) -> None:
    document = pool.convert(RawDocument(b"# Notes\r\nkept  as is\r\n", filename="notes.md"))
    assert document.markdown == "# Notes\r\nkept  as is\r\n"
    assert document.metadata == {"converter": "native"}
    assert all(worker.pid is None for worker in pool._workers)  # no worker was started


def test_size_is_checked_before_a_worker_sees_the_bytes(pool: ConverterPool) -> None:
    with pytest.raises(InvalidRequestError, match=r"empty\.pdf: document body is empty$"):
        pool.convert(RawDocument(b"", filename="empty.pdf"))
    assert all(worker.pid is None for worker in pool._workers)


def test_a_worker_that_cannot_start_is_an_engine_error() -> None:
    with ConverterPool(1, PROBE_LIMITS, chain_factory=BROKEN_CHAIN) as pool, pytest.raises(EngineError) as caught:
        pool.convert(probe_document())
    assert caught.value.message == (
        "the converter worker could not start (ImportError: no module named 'imaginary_parser')"
    )


def test_closing() -> None:
    pool = ConverterPool(1, PROBE_LIMITS, chain_factory=PROBE_CHAIN)
    pid = worker_pid(pool.convert(probe_document()))
    pool.close()
    pool.close()
    wait_until_gone(pid)
    with pytest.raises(EngineError, match=r"x\.pdf: the converter pool is closed$"):
        pool.convert(probe_document(filename="x.pdf"))


def test_construction_is_checked() -> None:
    with pytest.raises(ConfigError):
        ConverterPool(0)
    with pytest.raises(ConfigError, match="timeout_s must be positive"):
        ConvertLimits(timeout_s=0)


async def test_aconvert(pool: ConverterPool) -> None:
    document = await pool.aconvert(probe_document())
    assert worker_pid(document) > 0


# --- the real chain in real workers ---


def test_real_conversions_in_the_pool_match_in_process_ones() -> None:
    refused = [
        RawDocument(pdf_bytes(["", ""]), filename="scan.pdf"),
        RawDocument(zip_bomb_bytes(), filename="test.zip"),
        RawDocument(bomb_png(), filename="huge.png"),
        RawDocument(truncated_jpeg(), filename="cut.jpg"),
    ]
    with ConverterPool(2) as pool, ThreadPoolExecutor(4) as threads:
        documents = list(threads.map(lambda vector: pool.convert(vector.build()), VECTORS))
        for vector, document in zip(VECTORS, documents, strict=True):
            check_vector(vector, document)
        for raw in refused:
            with pytest.raises(Error) as in_pool:
                pool.convert(raw)
            with pytest.raises(Error) as in_process:
                convert_document(raw)
            assert in_pool.value == in_process.value
            assert isinstance(in_pool.value, InvalidRequestError | UnsupportedError)
