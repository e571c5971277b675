"""`ConverterPool`: conversions of untrusted formats in a few long-lived worker processes, under a clock and a
memory ceiling, so that one hostile file costs one failed document and never the process."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from types import TracebackType

from engines.contract import ConfigError, EngineError
from pipeline.convert.chain import convert_natively, native_chain
from pipeline.convert.documents import ConvertedDocument, RawDocument
from pipeline.convert.limits import ConvertLimits
from pipeline.convert.process import WorkerProcess

DEFAULT_CHAIN_FACTORY = "pipeline.convert.chain:warm_chain"


class ConverterPool:
    """A pool of `size` worker processes running `convert_document` with `limits`.

    Markdown, plain text and code are only decoded, so they are converted in the calling thread. Everything
    else goes to a worker: the parent gives it `limits.timeout_s` per document and each worker lives under an
    address-space ceiling of `limits.memory_bytes`. A worker that overruns either, crashes or answers
    nonsense is killed and replaced on its next job; that one document fails with the contract error naming
    the limit, and the pool goes on serving. Workers start on the first document that needs one and then
    stay, each with its libraries imported once; documents cross to them as bytes over a pipe.

    `convert` is thread-safe: several threads may call it at once, and each worker takes one job at a time.
    `chain_factory` names (as `module:attribute`) the callable that builds a worker's chain from the limits;
    tests use it to put a converter that hangs or allocates into a worker. Close the pool (or use it as a
    context manager) to stop the workers; `close` waits for conversions in flight up to the time limit.
    """

    def __init__(self, size: int, limits: ConvertLimits | None = None, *, chain_factory: str = DEFAULT_CHAIN_FACTORY):
        if size < 1:
            raise ConfigError(f"a converter pool needs at least one worker, got {size}")
        self._limits = ConvertLimits() if limits is None else limits
        self._native = native_chain()
        self._workers = [WorkerProcess(self._limits, chain_factory) for _ in range(size)]
        self._idle: queue.SimpleQueue[WorkerProcess] = queue.SimpleQueue()
        for worker in self._workers:
            self._idle.put(worker)
        self._closed = threading.Event()
        self._warming = threading.Event()
        self._warmer: threading.Thread | None = None

    def warm(self, *, wait: bool = False) -> None:
        """Start the workers now, in the background, so the first document needing one does not wait.

        Idempotent and cheap to call: a caller that sees a PDF coming calls it before reading it.
        With `wait`, return once they are ready (a benchmark measuring warm conversion does this).
        """
        if self._closed.is_set():
            return
        if not self._warming.is_set():
            self._warming.set()
            self._warmer = threading.Thread(target=self._start_idle_workers, name="tm-converter-warm", daemon=True)
            self._warmer.start()
        if wait and self._warmer is not None:
            self._warmer.join()

    def _start_idle_workers(self) -> None:
        taken: list[WorkerProcess] = []
        while True:
            try:
                taken.append(self._idle.get_nowait())
            except queue.Empty:
                break
        try:
            for worker in taken:
                worker.start()
        finally:
            for worker in taken:
                self._idle.put(worker)

    @property
    def limits(self) -> ConvertLimits:
        """The limits every conversion in this pool runs under."""
        return self._limits

    def convert(self, raw: RawDocument) -> ConvertedDocument:
        """`raw` as markdown; blocks until a worker is free and has answered, or the time limit passed.

        Raises the contract's errors only, as `convert_document` does, plus `InvalidRequestError` for a
        document that overran the time limit or the memory ceiling and `EngineError` for a worker that died.
        """
        self._check_open(raw)
        done = convert_natively(raw, self._limits, self._native)
        return done if done is not None else self._in_worker(raw)

    async def aconvert(self, raw: RawDocument) -> ConvertedDocument:
        """`convert`, waiting for a worker in a thread so an event loop keeps running meanwhile.

        Text formats are only decoded, here and now: a thread hop would cost more than the work.
        """
        self._check_open(raw)
        done = convert_natively(raw, self._limits, self._native)
        return done if done is not None else await asyncio.to_thread(self._in_worker, raw)

    def _check_open(self, raw: RawDocument) -> None:
        if self._closed.is_set():
            raise EngineError(f"{raw.label}: the converter pool is closed")

    def _in_worker(self, raw: RawDocument) -> ConvertedDocument:
        worker = self._idle.get()
        try:
            return worker.convert(raw)
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        """Stop every worker; conversions still running get up to the time limit, then their worker is killed."""
        if self._closed.is_set():
            return
        self._closed.set()
        deadline = time.monotonic() + self._limits.timeout_s
        # Taking the idle workers out of the queue waits for those still converting, up to the time limit.
        taken: list[WorkerProcess] = []
        for _ in self._workers:
            try:
                taken.append(self._idle.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                break
        for worker in self._workers:
            worker.close()
        # Threads still waiting for a worker get a closed one, which tells them the pool is closed.
        for worker in taken:
            self._idle.put(worker)

    def __enter__(self) -> ConverterPool:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
