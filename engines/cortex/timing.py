"""`Timing`: every wait and gap the engine keeps, in seconds, as one small comparable object."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    """How long the engine waits for readability, erasures and pauses, and how it spaces its polls.

    The defaults suit a real server; `fast()` is what tests use against the double, where nothing lags
    unless a test asks it to.
    """

    visibility: float = 30.0
    settle: float = 10.0
    poll: float = 0.25
    hosted_poll_ceiling: float = 2.0
    erasure: float = 300.0
    write_recovery: float = 30.0
    retry_backoff: float = 0.25
    pause_cap: float = 10.0

    @classmethod
    def fast(cls) -> Timing:
        return cls(
            visibility=2.0,
            settle=0.5,
            poll=0.005,
            hosted_poll_ceiling=0.02,
            erasure=2.0,
            write_recovery=2.0,
            retry_backoff=0.005,
            pause_cap=0.05,
        )


ERASURE_POLL_CEILING = 2.0
"""The longest gap between two polls of a running Direct erasure."""
