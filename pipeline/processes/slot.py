"""`ProcessSlot`: a place for one long-lived child, started when first needed and replaced after any failure."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pipeline.processes.child import ChildProcess, ChildSpec

STOP_GRACE_S = 2.0
"""How long an idle child gets to exit on its own once its connection is closed, before it is killed."""

Handshake = Callable[[ChildProcess], None]
"""What follows a child's start: send it what it needs to know and wait (with a start timeout) for its greeting;
raise when it does not come or says the child cannot work."""


class SlotClosed(Exception):  # noqa: N818 - a state, translated by each owner into its own error
    """The slot was closed: it starts no child any more."""


class ProcessSlot:
    """At most one live child running `spec`, started (and greeted by `handshake`) on demand.

    A child that failed is `discard`ed by its user and replaced by the next `child()`. One thread at a time
    uses the slot, inside `held()`; `close` may come from any thread: it stops an idle child politely and kills
    one in use at once (its user then sees it hang up, and the slot stops it when released).
    """

    def __init__(self, spec: ChildSpec, handshake: Handshake) -> None:
        self._spec = spec
        self._handshake = handshake
        self._lock = threading.Lock()
        self._child: ChildProcess | None = None
        self._held = False
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The current child's process id; None when there is none."""
        child = self._child
        return None if child is None else child.pid

    @contextmanager
    def held(self) -> Iterator[None]:
        """Use the slot's child for one job; `SlotClosed` when the slot is closed."""
        with self._lock:
            if self._closed:
                raise SlotClosed
            self._held = True
        try:
            yield
        finally:
            with self._lock:
                self._held = False
                if self._closed:
                    self._stop(grace=0.0)

    def live(self) -> ChildProcess | None:
        """The current child if it is still running, without starting one."""
        with self._lock:
            child = self._child
            return child if child is not None and child.alive() else None

    def child(self) -> ChildProcess:
        """The running child, or a new one, started and greeted (the one before, if any, reaped).

        Raises `SlotClosed` on a closed slot, `OSError` when no process can start, and whatever the handshake
        raises; a child that failed to start is killed and reaped first.
        """
        with self._lock:
            if self._child is not None and self._child.alive():
                return self._child
            self._stop(grace=0.0)
            if self._closed:
                raise SlotClosed
            child = self._child = ChildProcess.start(self._spec)
            try:
                self._handshake(child)
            except BaseException:
                self._stop(grace=0.0)
                raise
            return child

    def discard(self) -> int | None:
        """Kill and reap the child (if any); its exit code, which `exit_story` tells."""
        with self._lock:
            return self._stop(grace=0.0)

    def close(self, grace: float = STOP_GRACE_S) -> None:
        """Start no more children; stop an idle one (giving it `grace` seconds to exit on its own), kill one in use."""
        with self._lock:
            self._closed = True
            if not self._held:
                self._stop(grace=grace)
            elif self._child is not None:
                self._child.kill()

    def _stop(self, *, grace: float) -> int | None:
        # The caller holds the lock.
        child, self._child = self._child, None
        return None if child is None else child.stop(grace)
