"""Dead letters: list them, replay their units (clear, then sync their sources), purge them."""

from __future__ import annotations

from worker.control.results import Replay, SyncRunner
from worker.control.sources import MAX_LETTERS, get_source
from worker.records import DeadLetter
from worker.state.base import StateStore


def dead_letters(state: StateStore, source_id: str | None = None, limit: int = 100) -> list[DeadLetter]:
    """Dead letters, newest first (of one source when `source_id` is given)."""
    if source_id is not None:
        get_source(state, source_id)
    return state.dead_letters(source_id, limit=limit)


async def replay_dead_letters(state: StateStore, runner: SyncRunner, source_id: str | None = None) -> list[Replay]:
    """Try dead-lettered units again: clear their letters, then sync their sources (those still configured)."""
    by_source: dict[str, list[str]] = {}
    for letter in dead_letters(state, source_id, limit=MAX_LETTERS):
        by_source.setdefault(letter.source_id, []).append(letter.unit_id)
    replays = []
    for source, units in sorted(by_source.items()):
        state.clear_dead_letters(source, units)
        if state.get_source(source) is not None:
            replays.append(Replay(source_id=source, units=sorted(set(units)), sync=await runner.request_sync(source)))
    return replays


def purge_dead_letters(state: StateStore, source_id: str | None = None) -> int:
    """Delete dead letters without retrying them (of one source when `source_id` is given); how many went."""
    if source_id is not None:
        get_source(state, source_id)
    return state.purge_dead_letters(source_id)
