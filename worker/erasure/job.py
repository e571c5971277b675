"""`run_erasure`: erase a source or a namespace subtree for good, check that nothing is left, keep the receipt.

The steps, in order; each is saved in the receipt once done (a resumed erasure skips those), and each is
retried with backoff while the state or the engine is unavailable:

    tombstoned  the target's tombstone: syncs are refused, queued and running jobs drop their items; the
                sources it covers (a source; or every source placed in the namespace) and its nodes are noted
    stopped     (every kind) those sources disabled, so beat and the watchers leave them
    drained     the jobs of those sources running when the tombstone was written are waited for (their job
                leases, `JobContext.running`), up to `drain_timeout_s`, after which the erasure fails
    erased      a namespace: `engine.erase` over its subtree; when the engine answers Unsupported, forget by
                filter over the subtree and the sandboxes sources are placed in, then by the sources' manifest
                ids. A source: forget by its source id over its node and the root's subtree, then by the ids
                its manifest names: a source shares its node with others, which `erase` would take too.
    purged      (every kind) those sources' state: entry, manifest, last run, dead letters
    verified    list the same reach and filter: nothing may be left. Looked at again with backoff, for
                engines whose reads lag; what a look still finds is forgotten by id before the next one.

The receipt ends `completed`, or `failed` with a reason. One runner works on an erasure at a time (an
exclusive lease, renewed while it runs); another that is handed it too waits, then finds it done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from engines.contract import (
    LISTING_PAGE,
    ConflictError,
    EraseRequest,
    Error,
    ForgetTarget,
    ItemId,
    ListRequest,
    MemoryEngine,
    MetaFilter,
    Namespace,
    NotFoundError,
    Reach,
    SegmentKind,
    UnsupportedError,
)
from worker.erasure.request import ErasureReceipt, ErasureStep, Tombstone, Verification
from worker.jobs.context import job_lease
from worker.records import now
from worker.state.base import LeaseStore, StateStore

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_FORGET_IDS = 1_000


@dataclass(frozen=True)
class ErasureSettings:
    """The erasure's knobs: retries of a step while unavailable, the bound on waiting for running jobs,
    the looks of the verification, and the runner's lease."""

    attempts: int = 5
    backoff_s: float = 0.2
    backoff_max_s: float = 10.0
    # Below a Celery task's soft time limit, so a stuck wait fails with its own reason.
    drain_timeout_s: float = 300.0
    poll_s: float = 0.05
    verify_looks: int = 5
    verify_backoff_s: float = 0.1
    runner_lease_s: float = 10.0


class ErasureContext(Protocol):
    """What an erasure runs with: the state and the engine (a `JobContext` has both)."""

    @property
    def state(self) -> StateStore: ...

    @property
    def engine(self) -> MemoryEngine: ...


def erasure_lease(erasure_id: str) -> str:
    """The exclusive lease of whoever runs the erasure now."""
    return f"erasure:{erasure_id}"


async def run_erasure(
    ctx: ErasureContext, erasure_id: str, *, settings: ErasureSettings | None = None, give_up: bool = True
) -> ErasureReceipt:
    """Run (or resume) the erasure `erasure_id` to its end and return its receipt.

    A finished one is returned as it is. While another runner holds it, this one waits up to twice the
    runner's lease (a runner that died lets go by then) and returns the receipt as it then stands. A
    transient failure that outlasts the retries fails the erasure when `give_up`; otherwise it is raised
    with the receipt left `running`, for the caller to run it again later (a Celery retry). Any other
    failure fails the erasure with its reason.
    """
    settings = settings or ErasureSettings()
    receipt = ctx.state.get_erasure(erasure_id)
    if receipt is None:
        raise NotFoundError(f"no erasure {erasure_id!r}; `tinymemory erase status` takes the id a request printed")
    if receipt.finished:
        return receipt
    leases = ctx.state.leases()
    name = erasure_lease(erasure_id)
    token = await _take(ctx.state, leases, name, erasure_id, settings)
    if token is None:
        return ctx.state.get_erasure(erasure_id) or receipt
    keeping = asyncio.create_task(_keep(leases, name, token, settings.runner_lease_s))
    try:
        return await _Erasure(ctx, ctx.state.get_erasure(erasure_id) or receipt, settings).run()
    except Error as err:
        if err.is_transient() and not give_up:
            raise
        return _failed(ctx.state, erasure_id, err.message)
    except Exception as err:  # a bug must not leave the erasure running for ever, nor crash the worker
        logger.exception("erasure %s failed unexpectedly", erasure_id)
        return _failed(ctx.state, erasure_id, f"unexpected {type(err).__name__}: {err}")
    finally:
        keeping.cancel()
        leases.release(name, token)


async def _take(
    state: StateStore, leases: LeaseStore, name: str, erasure_id: str, settings: ErasureSettings
) -> str | None:
    """The runner's token, or None when the erasure ended, or stayed with another runner, meanwhile."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 2 * settings.runner_lease_s
    while True:
        token = leases.acquire(name, settings.runner_lease_s)
        if token is not None:
            return token
        held = state.get_erasure(erasure_id)
        if held is None or held.finished or loop.time() > deadline:
            return None
        await asyncio.sleep(settings.poll_s * 4)


async def _keep(leases: LeaseStore, name: str, token: str, ttl_s: float) -> None:
    while True:
        await asyncio.sleep(ttl_s / 3)
        try:
            if not leases.extend(name, token, ttl_s):
                logger.warning("the lease on %s lapsed while it ran; another runner may take it over", name)
        except Error as err:
            logger.warning("extending the lease on %s failed: %s", name, err)


def _failed(state: StateStore, erasure_id: str, reason: str) -> ErasureReceipt:
    current = state.get_erasure(erasure_id)
    if current is None:
        raise NotFoundError(f"erasure {erasure_id!r} is gone from the state")
    failed = current.model_copy(update={"status": "failed", "reason": reason, "finished_at": now()})
    state.put_erasure(failed)
    logger.warning("erasure %s failed: %s", erasure_id, reason)
    return failed


class _Erasure:
    """One run of an erasure: its receipt as it moves on, saved after every step."""

    def __init__(self, ctx: ErasureContext, receipt: ErasureReceipt, settings: ErasureSettings) -> None:
        self.state = ctx.state
        self.engine = ctx.engine
        self.receipt = receipt
        self.settings = settings
        self.target = receipt.target

    async def run(self) -> ErasureReceipt:
        self._save(status="running", started_at=self.receipt.started_at or now(), runs=self.receipt.runs + 1)
        steps: list[tuple[ErasureStep, Callable[[], Awaitable[None]]]] = [
            ("tombstoned", self._tombstone),
            ("stopped", self._stop),
            ("drained", self._drain),
            ("erased", self._erase),
            ("purged", self._purge),
            ("verified", self._verify),
        ]
        for step, action in steps:
            if step not in self.receipt.steps:
                await action()
                self._save(steps=[*self.receipt.steps, step])
        verification = self.receipt.verification
        if verification is not None and not verification.passed:
            reason = f"{verification.remaining} items were still found after {verification.attempts} looks"
            return self._save(status="failed", reason=reason, finished_at=now())
        logger.info("erasure %s of %s completed", self.receipt.id, self.target.describe())
        return self._save(status="completed", reason=None, finished_at=now())

    def _save(self, **changes: Any) -> ErasureReceipt:
        self.receipt = self.receipt.model_copy(update=changes)
        self.state.put_erasure(self.receipt)
        return self.receipt

    # -- steps ----------------------------------------------------------------------------------------

    async def _tombstone(self) -> None:
        await self._kept(self.state.put_tombstone, Tombstone.of(self.receipt))
        sources, scopes = await self._kept(self._covered)
        self._save(sources=sources, scopes=scopes)

    def _covered(self) -> tuple[list[str], list[Namespace]]:
        """The sources the target covers and the nodes erased over (see the module)."""
        if self.target.source_id is not None:
            entry = self.state.get_source(self.target.source_id)
            placed = Namespace.ROOT if entry is None else entry.placed_at()
            return [self.target.source_id], list(dict.fromkeys([placed, Namespace.ROOT]))
        node = self.target.node
        inside = [e for e in self.state.list_sources() if e.placed_at().is_within(node)]
        # A subtree reach skips sandboxes below its node; those sources are placed in are named on their own.
        sandboxes = [e.placed_at() for e in inside if not Reach.subtree(node).admits(e.placed_at())]
        return [e.id for e in inside], list(dict.fromkeys([node, *_sandbox_roots(node, sandboxes)]))

    async def _stop(self) -> None:
        if not self.target.every_kind:
            return  # the sources go on for their other kinds
        for source_id in self.receipt.sources:
            entry = await self._kept(self.state.get_source, source_id)
            if entry is not None and entry.enabled:
                disabled = entry.model_copy(update={"enabled": False})
                await self._kept(self.state.put_source, disabled)

    async def _drain(self) -> None:
        leases = self.state.leases()
        waiting = {name: leases.holders(name) for name in map(job_lease, self.receipt.sources)}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.drain_timeout_s
        # Only the holders there now: a job that starts later sees the tombstone and drops its items.
        while any(waiting.values()):
            if loop.time() > deadline:
                busy = sorted(name.removeprefix(job_lease("")) for name, held in waiting.items() if held)
                raise ConflictError(
                    f"running jobs of {', '.join(busy)} did not end within {self.settings.drain_timeout_s:g} s; "
                    "stop the workers holding them, then ask for the erasure again"
                )
            await asyncio.sleep(self.settings.poll_s)
            waiting = {name: held & leases.holders(name) for name, held in waiting.items() if held}

    async def _erase(self) -> None:
        if self.target.source_id is None:
            try:
                request = EraseRequest(reach=Reach.subtree(self.target.node), kinds=self.target.kinds)
                report = await self._retried(self.engine.erase, request)
            except UnsupportedError:
                logger.info("the engine does not erase; erasure %s forgets instead", self.receipt.id)
            else:
                self._save(
                    method="erase",
                    erased_scopes=self.receipt.erased_scopes + report.erased_scopes,
                    engine_receipts=[*self.receipt.engine_receipts, *report.receipts],
                )
                return
        forgotten = 0
        for flt in self._filters():  # one statement each on most engines: nearly everything goes here
            forgotten += (await self._retried(self.engine.forget, ForgetTarget.by_filter(flt))).forgotten
        if self.target.every_kind:  # and what the filters cannot reach: sandboxes nobody placed a source in
            forgotten += await self._forget_manifests()
        self._save(method="forget", forgotten=self.receipt.forgotten + forgotten)

    async def _forget_manifests(self) -> int:
        """Forget every id the covered sources' manifests name (ids reach every node, sandboxes too)."""
        forgotten = 0
        for source_id in self.receipt.sources:
            ids = await self._kept(self.state.item_ids, source_id)
            forgotten += await self._forget_ids(ids)
        return forgotten

    async def _forget_ids(self, ids: list[ItemId]) -> int:
        forgotten = 0
        for start in range(0, len(ids), _FORGET_IDS):
            chunk = ForgetTarget.by_ids(ids[start : start + _FORGET_IDS])
            forgotten += (await self._retried(self.engine.forget, chunk)).forgotten
        return forgotten

    async def _purge(self) -> None:
        if not self.target.every_kind:
            return  # the manifest still describes the sources' other kinds
        for source_id in self.receipt.sources:
            await self._kept(self.state.remove_source, source_id)

    async def _verify(self) -> None:
        looks, found = 0, []
        for looks in range(1, self.settings.verify_looks + 1):
            found = await self._remaining()
            if not found:
                break
            # Stored late, or a read that lags the erasure: forget what is there, then look again.
            self._save(forgotten=self.receipt.forgotten + await self._forget_ids(found))
            await asyncio.sleep(self.settings.verify_backoff_s * 2 ** (looks - 1))
        self._save(verification=Verification(passed=not found, remaining=len(found), attempts=looks))

    async def _remaining(self) -> list[ItemId]:
        found: list[ItemId] = []
        for flt in self._filters():
            page = await self._retried(self.engine.list, ListRequest(filter=flt, limit=LISTING_PAGE))
            found.extend(hit.id for hit in page.items)
        return list(dict.fromkeys(found))

    def _filters(self) -> list[MetaFilter]:
        """The filters over what the target covers: one per node of the receipt."""
        kinds = self.target.kinds
        return [
            MetaFilter(source_id=self.target.source_id, kinds=kinds, reach=Reach.subtree(node))
            for node in self.receipt.scopes
        ]

    # -- retries --------------------------------------------------------------------------------------

    def _attempts(self) -> AsyncRetrying:
        """Tries of one call, with exponential backoff while it fails as unavailable."""
        settings = self.settings
        return AsyncRetrying(
            retry=retry_if_exception(lambda err: isinstance(err, Error) and err.is_transient()),
            stop=stop_after_attempt(settings.attempts),
            wait=wait_exponential(multiplier=settings.backoff_s, max=settings.backoff_max_s),
            reraise=True,
        )

    async def _retried(self, function: Callable[..., Awaitable[_T]], *args: Any) -> _T:
        """An engine call, retried while unavailable."""
        async for attempt in self._attempts():
            with attempt:
                return await function(*args)
        raise AssertionError("unreachable: tenacity either returns or re-raises")

    async def _kept(self, function: Callable[..., _T], *args: Any) -> _T:
        """A state call, retried while unavailable."""
        async for attempt in self._attempts():
            with attempt:
                return function(*args)
        raise AssertionError("unreachable: tenacity either returns or re-raises")


def _sandbox_roots(node: Namespace, placements: list[Namespace]) -> list[Namespace]:
    """The outermost sandbox node on the way from `node` to each placement below it."""
    roots = []
    for placed in placements:
        segments = placed.segments
        for depth in range(node.depth, len(segments)):
            if segments[depth].kind is SegmentKind.SERVICE:
                roots.append(Namespace(segments[: depth + 1]))
                break
    return roots
