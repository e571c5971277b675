"""A background lane: a low-priority thread that works in rounds, sleeps between them unless woken, and backs off
from failures with growing pauses, saying why in `problem`. The local and the PostgreSQL engines' vector backlogs
are lanes; what a round does is theirs (`round_once`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading

NICENESS = 10
"""How much lower than the process the lane's thread runs, where the platform allows."""


class Lane:
    """A thread of rounds: `start` it once, `notify` it when there is work, `close` it before what it uses."""

    def __init__(self, *, name: str, label: str, pauses: tuple[float, ...], log: logging.Logger) -> None:
        self._name = name
        self._label = label
        self._pauses = pauses
        self._log = log
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._failures = 0
        self.problem: str | None = None
        """Why the lane's work is not being done, while it is not; None when all is well."""

    def start(self) -> None:
        with self._lock:
            if self._thread is None and not self._stopping.is_set():
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def notify(self) -> None:
        """There is work: look now rather than at the next round."""
        self._wake.set()

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the thread, waiting at most `timeout_s` for the round under way."""
        self._stopping.set()
        self._wake.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def round_once(self, loop: asyncio.AbstractEventLoop) -> float:
        """One round; how long to pause before the next (0: go on at once)."""
        raise NotImplementedError

    def finished(self) -> None:
        """Called on the thread as it ends (after its last round)."""

    def _run(self) -> None:
        with contextlib.suppress(AttributeError, OSError):  # lower priority where the platform allows
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)
        loop = asyncio.new_event_loop()
        try:
            while not self._stopping.is_set():
                self._wake.clear()
                pause = self.round_once(loop)
                if pause:
                    self._wake.wait(pause)
        finally:
            loop.close()
            self.finished()

    def failed(self, reason: str, problem: str) -> float:
        """Note a failed round (warned at the first and at the longest pause, not at every retry); the pause."""
        pause = self._pauses[min(self._failures, len(self._pauses) - 1)]
        if self._failures == 0 or pause == self._pauses[-1]:
            self._log.warning(
                "%s cannot embed (%s); retrying in %.0f s, keyword search meanwhile", self._label, reason, pause
            )
        self._failures += 1
        self.problem = problem
        return pause

    def recovered(self) -> None:
        """A round succeeded: if earlier ones failed, say the lane works again."""
        if self._failures:
            self._log.info("%s is embedding again", self._label)
            self._failures, self.problem = 0, None
