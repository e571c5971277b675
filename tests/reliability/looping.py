"""`Looping`: a daemon thread that repeats one step while a `with` block runs (a sampler, a listener)."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Self


class Looping:
    """Calls `step` over and over on a daemon thread from entering the block until leaving it, then `finish`
    once the thread has stopped. `step` must return within a moment (poll with a short timeout)."""

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def step(self) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """What to do once the thread has stopped (a last sample, closing a socket)."""

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.finish()
