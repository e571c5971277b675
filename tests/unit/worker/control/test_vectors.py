"""The vector backlog as the status and the console show it: waiting passages, the recent rate, an ETA."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

from engines.contract import UnavailableError
from worker.control import (
    VectorBacklogStatus,
    describe_vectors,
    engine_vector_backlog,
    eta_seconds,
    format_eta,
    vector_backlog,
)


@dataclass(frozen=True)
class Reading:
    waiting: int
    rate_per_s: float | None


class Lane:
    def __init__(self, reading: Reading | Exception) -> None:
        self.reading = reading

    async def vector_progress(self) -> Reading:
        if isinstance(self.reading, Exception):
            raise self.reading
        return self.reading


def test_the_eta_divides_what_waits_by_the_rate_and_is_unknown_without_one() -> None:
    assert eta_seconds(1_200, 40.0) == 30.0
    assert eta_seconds(0, None) == 0.0  # nothing waits: done, whatever the rate
    assert eta_seconds(10, None) is None
    assert eta_seconds(10, 0.0) is None  # nothing embedded lately: no honest estimate


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (None, "estimating"),
        (0.2, "about 1 s"),
        (42.4, "about 42 s"),
        (59.6, "about 1 min"),
        (3 * 60 + 20, "about 3 min"),
        (2 * 3600 + 5 * 60, "about 2 h 5 min"),
    ],
)
def test_an_eta_reads_as_a_person_says_it(seconds: float | None, said: str) -> None:
    assert format_eta(seconds) == said


async def test_the_backlog_of_an_engine_with_a_lane_has_its_rate_and_eta() -> None:
    shown = await vector_backlog(Lane(Reading(waiting=5_000, rate_per_s=24.123)))
    assert shown == VectorBacklogStatus(waiting=5_000, rate_per_s=24.12, eta_s=207.3)
    assert describe_vectors(shown) == "5,000 passages waiting · 24.1 passages/s over the last minute · about 3 min left"
    first = await vector_backlog(Lane(Reading(waiting=80, rate_per_s=None)))
    assert first is not None and describe_vectors(first) == "80 passages waiting · rate estimating · ETA estimating"
    done = await vector_backlog(Lane(Reading(waiting=0, rate_per_s=None)))
    assert done is not None and done.eta_s == 0 and describe_vectors(done) == "every passage has its vector"


async def test_an_engine_without_a_lane_has_no_backlog_and_an_unreadable_one_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert await vector_backlog(object()) is None
    with pytest.raises(UnavailableError):
        await vector_backlog(Lane(UnavailableError("the file is locked")))
    caplog.set_level(logging.WARNING, logger="worker.control")
    assert await engine_vector_backlog(Lane(UnavailableError("the file is locked"))) is None
    assert "the vector backlog could not be read: the file is locked" in caplog.text
