"""Shared by the CortexDB tests: a double served on loopback and engines pointed at it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from engines.cortex import CortexEngine, CortexWire, Timing
from engines.cortex.testing import CortexDouble, DoubleConfig, serve
from engines.settings import EngineCredential

KEY = "test-key"


@dataclass
class Served:
    """A double, the URL it answers on, and the wire it speaks."""

    double: CortexDouble
    url: str
    wire: CortexWire

    def engine(self, key: str = KEY, **options: object) -> CortexEngine:
        timing = options.pop("timing", Timing.fast())
        return CortexEngine(self.wire, self.url, EngineCredential.of(key), timing=timing, **options)  # type: ignore[arg-type]

    def routes(self, since: int = 0) -> Counter[str]:
        """Requests by `METHOD path` since the `since`-th one."""
        return Counter(f"{r.method} {r.path}" for r in self.double.requests[since:])

    def mark(self) -> int:
        return len(self.double.requests)


def config(wire: str = "direct", **fields: object) -> DoubleConfig:
    """A double's configuration for tests: no rate limit unless asked for."""
    fields.setdefault("rate_limit_per_minute", None)
    return DoubleConfig(wire=wire, **fields)  # type: ignore[arg-type]


@contextmanager
def served(wire: str = "direct", **fields: object) -> Iterator[Served]:
    double = CortexDouble(config(wire, **fields))
    with serve(double) as url:
        yield Served(double, url, CortexWire.TINYHUMANS if wire == "hosted" else CortexWire.DIRECT)
