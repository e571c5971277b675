"""The conformance suite catches every broken engine of docs/spec/contract.md §18.8 in the check the table names."""

from __future__ import annotations

import logging

import pytest

from engines.conformance import CHECKS, CallFailed, CheckFailed, ConformanceError, run, run_isolation
from engines.contract import (
    EngineDescriptor,
    EngineError,
    EraseReport,
    EraseRequest,
    ExportPage,
    FetchPage,
    FetchRequest,
    ForgetReport,
    ForgetTarget,
    ListRequest,
    MemoryEngine,
    NotFoundError,
)
from tests.conformance.broken import BROKEN, Breakage, CursorlessListing, DownHealth, GetRefusesUnknown
from tests.conformance.delegating import DelegatingEngine


def test_the_table_has_every_row_once() -> None:
    assert [breakage.number for breakage in BROKEN] == list(range(1, 28))
    assert all(b.check in (*CHECKS, "isolation") for b in BROKEN)


@pytest.mark.parametrize("breakage", BROKEN, ids=lambda b: b.name)
async def test_suite_fails_the_named_check(breakage: Breakage) -> None:
    with pytest.raises(ConformanceError) as caught:
        await breakage.exercise()
    assert caught.value.check == breakage.check, str(caught.value)
    assert caught.value.detail


async def test_a_faithful_wrapper_passes() -> None:
    await run(DelegatingEngine())


async def test_a_wrong_answer_is_check_failed() -> None:
    with pytest.raises(CheckFailed) as caught:
        await run(DownHealth())
    assert str(caught.value) == 'health: health() reported {"state":"down","reason":"broken"}; expected ok or degraded'


async def test_a_refused_call_is_call_failed_with_the_error() -> None:
    with pytest.raises(CallFailed) as caught:
        await run(GetRefusesUnknown())
    assert isinstance(caught.value.error, NotFoundError)
    assert caught.value.__cause__ is caught.value.error
    assert caught.value.check == "get"


async def test_cleanup_runs_after_a_failed_check(caplog: pytest.LogCaptureFixture) -> None:
    engine = GetRefusesUnknown()
    with caplog.at_level(logging.WARNING), pytest.raises(CallFailed):
        await run(engine)
    assert not caplog.records
    assert engine.inner._held == {}  # type: ignore[attr-defined]


class ProbeCleanupFails(DelegatingEngine):
    """Serves every check, but refuses to forget the probe workspace, which only cleanup does."""

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        if target.filter is not None and (target.filter.workspace or "").endswith("/probes"):
            raise EngineError("the probe workspace is locked")
        return await self.inner.forget(target)


class DeclinesOptionals(DelegatingEngine):
    """Offers no fetch mode, no export and no erase: all allowed, so the suite must pass."""

    def descriptor(self) -> EngineDescriptor:
        return self.inner.descriptor().model_copy(update={"fetch_modes": ()})

    async def fetch(self, req: FetchRequest) -> FetchPage:
        req.check()
        self.descriptor().ensure_mode(req.mode)
        return await self.inner.fetch(req)

    async def export(self, req: ListRequest) -> ExportPage:
        return await MemoryEngine.export(self, req)

    async def erase(self, req: EraseRequest) -> EraseReport:
        return await MemoryEngine.erase(self, req)


async def test_a_cleanup_failure_after_passing_checks_names_cleanup() -> None:
    with pytest.raises(CallFailed) as caught:
        await run(ProbeCleanupFails())
    assert caught.value.check == "cleanup"
    assert isinstance(caught.value.error, EngineError)


async def test_a_cleanup_failure_after_a_failed_check_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), pytest.raises(CheckFailed) as caught:
        await run(CursorlessListing())
    assert caught.value.check == "round_trip"
    assert [record.levelno for record in caplog.records] == [logging.WARNING]


async def test_an_engine_declining_every_optional_operation_passes() -> None:
    await run(DeclinesOptionals())
    await run_isolation(DeclinesOptionals(), DeclinesOptionals())
