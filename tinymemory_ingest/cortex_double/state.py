"""`DoubleState`: what a wire's routes use of the double, so that the routes need not import the double itself.

`CortexDouble` (`double.py`) builds the routes of its wire and satisfies this protocol; the routes only read and
steer it through these members, under its lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from tinymemory_ingest.cortex_double.config import DoubleConfig
from tinymemory_ingest.cortex_double.core import Core
from tinymemory_ingest.cortex_double.faults import Faults
from tinymemory_ingest.cortex_double.http import Response
from tinymemory_ingest.cortex_double.log import EventLog


class DoubleState(Protocol):
    """The double's configuration, state and lock, its request ids, and the answer route both wires share."""

    config: DoubleConfig
    lock: threading.RLock
    log: EventLog
    faults: Faults
    core: Core

    def request_id(self) -> str:
        """A new request id, as CortexDB puts in its error bodies."""
        ...

    def answer(self, body: dict[str, Any], stored_scope: object, shown: Callable[[str], str]) -> Response:
        """The answer route of both wires, in Direct's dialect."""
        ...
