"""Storing units' items in calls of at most 100, with a checkpoint after each acknowledged call."""

from __future__ import annotations

import pytest

from engines.contract import (
    Document,
    EngineError,
    InvalidRequestError,
    Item,
    ListRequest,
    StoreReceipt,
    UnavailableError,
)
from engines.reference import ReferenceEngine
from pipeline.batch import StoredUnit, UnitItems, store_units


def docs(unit: str, count: int) -> list[Item]:
    return [Document.from_text(f"{unit} item {n}") for n in range(count)]


class Recorder:
    def __init__(self) -> None:
        self.checkpoints: list[list[str]] = []

    async def __call__(self, stored: list[StoredUnit]) -> None:
        self.checkpoints.append([u.unit_id for u in stored])


async def test_calls_hold_at_most_100_items_and_checkpoint_whole_units() -> None:
    engine = ReferenceEngine()
    calls: list[int] = []

    async def store_many(items: list[Item]) -> list[StoreReceipt]:
        calls.append(len(items))
        return await engine.store_many(items)

    units = [UnitItems(f"u{n}", docs(f"u{n}", 30)) for n in range(7)]
    recorder = Recorder()
    outcome = await store_units(engine, units, recorder, store_many)
    assert calls == [90, 90, 30]
    assert recorder.checkpoints == [["u0", "u1", "u2"], ["u3", "u4", "u5"], ["u6"]]
    assert outcome.items == 210 and outcome.replayed == 0 and outcome.failed == []
    assert len((await engine.list(ListRequest(limit=500))).items) == 210


async def test_a_unit_over_100_items_is_checkpointed_after_its_last_part() -> None:
    engine = ReferenceEngine()
    recorder = Recorder()
    outcome = await store_units(
        engine, [UnitItems("big", docs("big", 250)), UnitItems("small", docs("s", 1))], recorder
    )
    # Parts of 100, 100 and 50 items; the last part shares its call with the small unit.
    assert recorder.checkpoints == [["big", "small"]]
    assert [len(u.item_ids) for u in outcome.stored] == [250, 1]
    again = await store_units(engine, [UnitItems("big", docs("big", 250))], Recorder())
    assert again.replayed == 250


async def test_a_refused_call_is_retried_unit_by_unit_and_only_the_bad_unit_fails() -> None:
    engine = ReferenceEngine()

    async def store_many(items: list[Item]) -> list[StoreReceipt]:
        if any("poison" in item.render_text() for item in items):
            raise InvalidRequestError("item too large for this engine")
        return await engine.store_many(items)

    units = [UnitItems("a", docs("a", 2)), UnitItems("bad", docs("poison", 1)), UnitItems("c", docs("c", 2))]
    recorder = Recorder()
    outcome = await store_units(engine, units, recorder, store_many)
    assert [u.unit_id for u in outcome.stored] == ["a", "c"]
    assert [(u, type(e)) for u, e in outcome.failed] == [("bad", InvalidRequestError)]
    assert recorder.checkpoints == [["a"], ["c"]]


async def test_a_transient_failure_propagates_after_committing_what_was_acknowledged() -> None:
    engine = ReferenceEngine()
    seen = 0

    async def store_many(items: list[Item]) -> list[StoreReceipt]:
        nonlocal seen
        seen += 1
        if seen == 2:
            raise UnavailableError("engine is restarting")
        return await engine.store_many(items)

    recorder = Recorder()
    with pytest.raises(UnavailableError):
        await store_units(engine, [UnitItems(f"u{n}", docs(f"u{n}", 60)) for n in range(3)], recorder, store_many)
    assert recorder.checkpoints == [["u0"]]


async def test_units_without_items_are_done_at_once() -> None:
    recorder = Recorder()
    outcome = await store_units(ReferenceEngine(), [UnitItems("empty", [])], recorder)
    assert recorder.checkpoints == [["empty"]] and outcome.stored[0].item_ids == []


async def test_an_engine_error_in_a_lone_unit_is_recorded() -> None:
    async def store_many(items: list[Item]) -> list[StoreReceipt]:
        raise EngineError("disk full")

    outcome = await store_units(ReferenceEngine(), [UnitItems("a", docs("a", 1))], Recorder(), store_many)
    assert [(u, e.message) for u, e in outcome.failed] == [("a", "disk full")]
