"""Erasures in embedded mode: run in this process by the job function the erase workers run (`run_erasure`).

They are tasks of the running event loop, apart from the dispatcher's slots, so a backfill never holds one
up: an erasure asked for in the middle of one starts at once, writes its tombstone, and the batches drop
what they have not stored yet. One runs at a time. A process that stops (or is killed) mid-erasure leaves
the receipt `running`; the next runtime to start resumes it (`resume`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from engines.contract import Error, MemoryEngine
from worker.erasure.job import ErasureContext, ErasureSettings, run_erasure
from worker.state.base import StateStore

logger = logging.getLogger(__name__)


class InProcessErasures:
    """Runs erasures here, one after the other, as tasks of the current loop (a `worker.control.ErasureRunner`).

    `drain()` waits for every erasure submitted so far; a failed one is a `failed` receipt, never an error here.
    """

    def __init__(self, ctx: ErasureContext, settings: ErasureSettings | None = None) -> None:
        self.ctx = ctx
        self.settings = settings
        self._turn = asyncio.Lock()
        self._running: set[asyncio.Task[None]] = set()

    @classmethod
    def over(
        cls, state: StateStore, engine: MemoryEngine, settings: ErasureSettings | None = None
    ) -> InProcessErasures:
        """Erasures over a state store and an engine a caller holds (the command line's, the API's)."""
        return cls(_Parts(state, engine), settings)

    async def submit(self, erasure_id: str) -> None:
        task = asyncio.create_task(self._run(erasure_id), name=f"tm-erase-{erasure_id}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def resume(self) -> list[str]:
        """Submit every erasure left queued or running (by a process that stopped); their ids.

        One another live process is running waits for it and is then found done (`run_erasure`).
        """
        unfinished = [receipt.id for receipt in self.ctx.state.unfinished_erasures()]
        for erasure_id in unfinished:
            logger.info("resuming erasure %s", erasure_id)
            await self.submit(erasure_id)
        return unfinished

    async def drain(self) -> None:
        """Wait for every submitted erasure to end."""
        while self._running:
            await asyncio.gather(*self._running)

    async def _run(self, erasure_id: str) -> None:
        async with self._turn:
            try:
                await run_erasure(self.ctx, erasure_id, settings=self.settings, give_up=True)
            except Error as err:  # the state itself failed: the receipt stays unfinished, resumed next start
                logger.warning("erasure %s stopped: %s (it is resumed when a runtime starts)", erasure_id, err)


@dataclass(frozen=True)
class _Parts:
    """What `run_erasure` needs, when there is no job context to hand it."""

    state: StateStore
    engine: MemoryEngine
