"""The reference engine passes the conformance suite, and the suite's public surface is as specified."""

from __future__ import annotations

import engines.conformance as conformance
from engines.conformance import (
    CHECKS,
    CallFailed,
    CheckFailed,
    ConformanceError,
    ReferenceEngine,
    run,
    run_isolation,
)
from engines.contract import InvalidRequestError


async def test_reference_engine_passes_run() -> None:
    await run(ReferenceEngine())


async def test_reference_engine_passes_run_isolation() -> None:
    await run_isolation(ReferenceEngine(), ReferenceEngine())


async def test_runs_leave_nothing_behind_and_can_repeat_on_one_engine() -> None:
    engine = ReferenceEngine()
    await run(engine)
    await run(engine)
    await run_isolation(engine, ReferenceEngine())
    assert engine._held == {}


def test_checks_are_named_in_contract_order() -> None:
    assert CHECKS == (
        "health",
        "round_trip",
        "export",
        "replay",
        "explore",
        "get",
        "store_many",
        "fetch_filters",
        "unsupported_modes",
        "namespaces",
        "empty_forget",
        "forget_by_id",
        "forget_by_filter",
        "erase",
        "recall",
    )


def test_exports_are_complete_and_sorted() -> None:
    expected = {
        "run",
        "run_isolation",
        "ReferenceEngine",
        "ConformanceError",
        "CheckFailed",
        "CallFailed",
        "CHECKS",
    }
    assert set(conformance.__all__) == expected
    assert all(hasattr(conformance, name) for name in conformance.__all__)


def test_errors_print_check_and_detail() -> None:
    failed = CheckFailed("replay", "expected 1, got 2")
    assert isinstance(failed, ConformanceError)
    assert (failed.check, failed.detail, str(failed)) == (
        "replay",
        "expected 1, got 2",
        "replay: expected 1, got 2",
    )


def test_call_failed_carries_the_contract_error() -> None:
    error = InvalidRequestError("list limit must be positive")
    failed = CallFailed("round_trip", "list() raised", error)
    assert failed.error is error
    assert failed.__cause__ is error
    assert str(failed) == "round_trip: list() raised"
