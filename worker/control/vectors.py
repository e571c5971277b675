"""The vector backlog at a glance: passages waiting for their vectors, the recent rate, and when they will be done.

An engine that stores vectors after its items, in the background (the local engine), offers `vector_progress`
(`VectorLane`); `vector_backlog` turns its reading into a `VectorBacklogStatus` with an ETA (`describe_vectors`
says it), and an engine without such a lane has none to show. The rate is the engine's (vectors stored over the
last minute, every process's counted), so a one-shot `tinymemory status` tells the same as a console that has
watched for a while.
"""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

from engines.contract import Error
from worker.control.results import VectorBacklogStatus

logger = logging.getLogger(__name__)

ESTIMATING = "estimating"
"""What an ETA says before there is a rate to divide by."""


class VectorReading(Protocol):
    """An engine's reading of its vector lane: passages waiting and vectors stored a second lately (None: unknown)."""

    @property
    def waiting(self) -> int: ...

    @property
    def rate_per_s(self) -> float | None: ...


@runtime_checkable
class VectorLane(Protocol):
    """An engine that embeds stored passages in the background; reading its progress must be cheap and start
    nothing (a status reads it each time it is shown)."""

    async def vector_progress(self) -> VectorReading: ...


async def vector_backlog(engine: object) -> VectorBacklogStatus | None:
    """The engine's vector backlog with its ETA; None for an engine without a background lane. A failure to
    read it is the engine's contract error, for the caller to show."""
    if not isinstance(engine, VectorLane):
        return None
    reading = await engine.vector_progress()
    rate = None if reading.rate_per_s is None else round(reading.rate_per_s, 2)
    eta = eta_seconds(reading.waiting, reading.rate_per_s)
    return VectorBacklogStatus(waiting=reading.waiting, rate_per_s=rate, eta_s=None if eta is None else round(eta, 1))


async def engine_vector_backlog(engine: object) -> VectorBacklogStatus | None:
    """`vector_backlog` for a page or a status route: an engine that cannot be read now is logged and shows no
    backlog, and the rest of the page is served all the same."""
    try:
        return await vector_backlog(engine)
    except Error as err:
        logger.warning("the vector backlog could not be read: %s", err.message)
        return None


def eta_seconds(waiting: int, rate_per_s: float | None) -> float | None:
    """Seconds until `waiting` passages are embedded at `rate_per_s`: 0 when none waits, None without a
    positive rate (nothing embedded lately: there is nothing honest to divide by)."""
    if waiting <= 0:
        return 0.0
    if rate_per_s is None or rate_per_s <= 0:
        return None
    return waiting / rate_per_s


def format_eta(eta_s: float | None) -> str:
    """An ETA as a person reads it: "about 40 s", "about 3 min", "about 2 h 5 min", or "estimating"."""
    if eta_s is None:
        return ESTIMATING
    if eta_s < 59.5:
        return f"about {max(1, int(eta_s + 0.5))} s"
    minutes = int(eta_s / 60 + 0.5)
    if minutes < 60:
        return f"about {minutes} min"
    return f"about {minutes // 60} h {minutes % 60} min"


def format_rate(rate_per_s: float | None) -> str:
    """Passages a second as a person reads it, or "estimating"."""
    if rate_per_s is None:
        return ESTIMATING
    return f"{rate_per_s:,.1f} passages/s" if rate_per_s < 100 else f"{rate_per_s:,.0f} passages/s"


def describe_vectors(backlog: VectorBacklogStatus) -> str:
    """One line: what waits, how fast it goes, how long is left."""
    if backlog.waiting == 0:
        return "every passage has its vector"
    if backlog.rate_per_s is None:
        rate = f"rate {ESTIMATING}"
    else:
        rate = f"{format_rate(backlog.rate_per_s)} over the last minute"
    left = f"ETA {ESTIMATING}" if backlog.eta_s is None else f"{format_eta(backlog.eta_s)} left"
    return f"{backlog.waiting:,} passages waiting · {rate} · {left}"
