"""Dead letters: list them, replay their units (clear, then sync their sources), purge them."""

from __future__ import annotations

import base64

from engines.contract import InvalidRequestError, NotFoundError
from worker.control.results import Replay, SyncRunner
from worker.control.sources import MAX_LETTERS, get_source
from worker.records import SOURCE_UNIT, DeadLetter
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


def letter_id(letter: DeadLetter) -> str:
    """A dead letter's id in URLs: its key (source, unit, stage) in URL-safe base64."""
    return base64.urlsafe_b64encode(letter.key.encode("utf-8")).rstrip(b"=").decode("ascii")


async def replay_dead_letter(state: StateStore, runner: SyncRunner, letter: str) -> Replay:
    """Try one dead-lettered unit again: clear its letters and sync its source for it."""
    source_id, unit_id = _parse_letter_id(letter)
    if not any(d.unit_id == unit_id for d in dead_letters(state, source_id, limit=MAX_LETTERS)):
        raise NotFoundError(f"no dead letter {letter!r}; `GET /v1/dlq` lists them with their ids")
    state.clear_dead_letters(source_id, [unit_id])
    # A letter about the whole source (its listing failed) is retried by syncing all of it.
    outcome = await runner.request_sync(source_id, None if unit_id == SOURCE_UNIT else [unit_id])
    return Replay(source_id=source_id, units=[unit_id], sync=outcome)


def _parse_letter_id(letter: str) -> tuple[str, str]:
    try:
        key = base64.urlsafe_b64decode(letter + "=" * (-len(letter) % 4)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        key = ""
    parts = key.split("\x1f")
    if len(parts) != 3:
        raise InvalidRequestError(f"{letter!r} is not a dead letter id")
    return parts[0], parts[1]
