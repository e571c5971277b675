"""The state store contract, run against every implementation (SQLite now; Redis joins with its store)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from worker.model import DeadLetter, ManifestEntry, Signature, SourceConfigKind, SourceEntry, SyncReport
from worker.state import StateStore, UnitState
from worker.state_sqlite import SqliteStateStore

StoreFactory = Callable[[Path], StateStore]
FACTORIES: dict[str, StoreFactory] = {"sqlite": lambda tmp: SqliteStateStore(tmp / "state.sqlite3")}


@pytest.fixture(params=sorted(FACTORIES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    made = FACTORIES[request.param](tmp_path)
    yield made
    close = getattr(made, "close", None)
    if callable(close):
        close()


def entry(source_id: str = "notes", **fields: object) -> SourceEntry:
    return SourceEntry.model_validate({"id": source_id, "kind": "folder", "label": "Notes", "path": "/n", **fields})


def unit(size: int = 1, mtime: int = 2, items: list[str] | None = None, **fields: object) -> ManifestEntry:
    return ManifestEntry.model_validate(
        {
            "signature": {"size": size, "mtime_ns": mtime, "sha256": "ab"},
            "item_ids": ["i1"] if items is None else items,
            **fields,
        }
    )


def test_sources_round_trip_and_list_in_order(store: StateStore) -> None:
    store.put_source(entry("b", include=["**/*.md"], namespace="team:acme"))
    store.put_source(entry("a"))
    assert [e.id for e in store.list_sources()] == ["a", "b"]
    assert store.get_source("b") == entry("b", include=["**/*.md"], namespace="team:acme")
    assert store.get_source("missing") is None
    store.put_source(entry("a", label="Renamed"))
    assert store.get_source("a").label == "Renamed"  # type: ignore[union-attr]


def test_manifest_commit_is_one_step_and_none_removes(store: StateStore) -> None:
    store.commit("s", {"a.md": unit(1, 10), "b.md": unit(2, 20, ["i2", "i3"], stale=["old"])})
    assert store.unit_states("s") == {
        "a.md": UnitState(1, 10, deleted=False, has_stale=False),
        "b.md": UnitState(2, 20, deleted=False, has_stale=True),
    }
    assert store.manifest_entries("s", ["b.md", "zzz"]) == {"b.md": unit(2, 20, ["i2", "i3"], stale=["old"])}
    store.commit("s", {"a.md": None, "b.md": unit(3, 30, ["i4"])})
    assert store.unit_states("s") == {"b.md": UnitState(3, 30, deleted=False, has_stale=False)}
    assert store.unit_states("other") == {}


def test_manifest_entries_in_large_numbers(store: StateStore) -> None:
    store.commit("s", {f"u{n}": unit(n, n) for n in range(1_200)})
    found = store.manifest_entries("s", [f"u{n}" for n in range(0, 1_200, 2)])
    assert len(found) == 600 and found["u10"].signature == Signature(size=10, mtime_ns=10, sha256="ab")


def test_deleted_flag_survives(store: StateStore) -> None:
    store.commit("s", {"gone.md": unit(deleted=True, stale=["x"], items=[])})
    assert store.unit_states("s")["gone.md"].deleted
    assert store.manifest_entries("s", ["gone.md"])["gone.md"].item_ids == []


def test_dead_letters_replace_per_unit_and_stage_counting_attempts(store: StateStore) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    store.add_dead_letter(DeadLetter(source_id="s", unit_id="a.pdf", stage="convert", error="E", message="m1", at=t0))
    store.add_dead_letter(
        DeadLetter(source_id="s", unit_id="a.pdf", stage="convert", error="E", message="m2", at=t0 + timedelta(1))
    )
    store.add_dead_letter(DeadLetter(source_id="s", unit_id="a.pdf", stage="read", error="E", message="r", at=t0))
    store.add_dead_letter(DeadLetter(source_id="t", unit_id="b", stage="list", error="E", message="b", at=t0))
    letters = store.dead_letters("s")
    assert [(d.stage, d.message, d.attempts) for d in letters] == [("convert", "m2", 2), ("read", "r", 1)]
    assert len(store.dead_letters()) == 3
    store.clear_dead_letters("s", ["a.pdf"])
    assert store.dead_letters("s") == []
    assert store.purge_dead_letters() == 1


def test_unit_ids_with_pattern_characters_are_cleared_exactly(store: StateStore) -> None:
    for unit_id in ("a_b.md", "a%b.md", "axb.md"):
        store.add_dead_letter(DeadLetter(source_id="s", unit_id=unit_id, stage="read", error="E", message="m"))
    store.clear_dead_letters("s", ["a_b.md"])
    assert sorted(d.unit_id for d in store.dead_letters("s")) == ["a%b.md", "axb.md"]


def test_runs_and_removing_a_source_forgets_its_state(store: StateStore) -> None:
    store.put_source(entry("s"))
    store.commit("s", {"a": unit()})
    store.add_dead_letter(DeadLetter(source_id="s", unit_id="a", stage="read", error="E", message="m"))
    store.record_sync(SyncReport(source_id="s", listed=3))
    assert store.last_sync("s") == SyncReport(source_id="s", listed=3)
    store.remove_source("s")
    assert (store.get_source("s"), store.unit_states("s"), store.dead_letters("s"), store.last_sync("s")) == (
        None,
        {},
        [],
        None,
    )


def test_entries_refuse_bad_ids_and_namespaces() -> None:
    with pytest.raises(ValueError, match="id must not contain"):
        entry("a:b")
    with pytest.raises(ValueError, match="id is required"):
        entry(" ")
    with pytest.raises(ValueError, match="is not a namespace segment kind"):
        entry(namespace="robot:x")
    assert SourceConfigKind.WEB_PAGE.item_source.value == "link"
