"""`run`: the checks of docs/spec/contract.md §18.4 in order against one engine, then cleanup
(docs/spec/contract.md §18.6)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from engines.conformance.checks_forget import (
    check_empty_forget,
    check_erase,
    check_forget_by_filter,
    check_forget_by_id,
)
from engines.conformance.checks_namespaces import check_namespaces
from engines.conformance.checks_read import (
    check_explore,
    check_fetch_filters,
    check_get,
    check_recall,
    check_unsupported_modes,
)
from engines.conformance.checks_store import (
    check_export,
    check_health,
    check_replay,
    check_round_trip,
    check_store_many,
)
from engines.conformance.errors import ConformanceError
from engines.conformance.fixtures import Identity
from engines.conformance.session import Session, show
from engines.contract import ForgetTarget, MemoryEngine

logger = logging.getLogger(__name__)

CLEANUP = "cleanup"

Check = Callable[[Session], Awaitable[None]]

# Order matters: each check may rely on what earlier ones proved, and the first failure names the break.
_CHECKS: tuple[tuple[str, Check], ...] = (
    ("health", check_health),
    ("round_trip", check_round_trip),
    ("export", check_export),
    ("replay", check_replay),
    ("explore", check_explore),
    ("get", check_get),
    ("store_many", check_store_many),
    ("fetch_filters", check_fetch_filters),
    ("unsupported_modes", check_unsupported_modes),
    ("namespaces", check_namespaces),
    ("empty_forget", check_empty_forget),
    ("forget_by_id", check_forget_by_id),
    ("forget_by_filter", check_forget_by_filter),
    ("erase", check_erase),
    ("recall", check_recall),
)

CHECKS: tuple[str, ...] = tuple(name for name, _ in _CHECKS)
"""The names of `run`'s checks, in the order it runs them."""


async def run(engine: MemoryEngine) -> None:
    """Run every check against `engine`, stopping at the first failure; cleanup always runs.

    Raises `ConformanceError` naming the failed check (or `cleanup` when only cleanup failed).
    """
    session = Session(engine, Identity.new())
    try:
        for name, check in _CHECKS:
            session.check = name
            await check(session)
    except Exception:
        # The check's failure is the one to report; a cleanup failure on top of it is only logged.
        await _cleanup_quietly(session)
        raise
    await cleanup(session)


async def cleanup(s: Session) -> None:
    """Forget everything the run stored, then prove nothing of it is still listed."""
    s.check, s.step = CLEANUP, ""
    targets = [ForgetTarget.by_filter(s.identity.filter()), ForgetTarget.by_filter(s.identity.probe_filter())]
    if s.sandbox_ids:
        targets.append(ForgetTarget.by_ids(sorted(s.sandbox_ids)))
    failure: ConformanceError | None = None
    for target in targets:
        try:
            await s.call(f"forget({show(target)})", s.engine.forget(target))
        except ConformanceError as err:
            # Keep going: the later forgets may still remove what this one left.
            failure = failure or err
    if failure is not None:
        raise failure
    for scope in (s.identity.filter(), s.identity.probe_filter()):
        left = await s.listed_ids(scope)
        s.ensure(not left, f"{len(left)} items still listed under {show(scope)} after cleanup: {left}")


async def _cleanup_quietly(s: Session) -> None:
    try:
        await cleanup(s)
    except Exception:
        logger.warning("conformance cleanup failed after a failed check", exc_info=True)
