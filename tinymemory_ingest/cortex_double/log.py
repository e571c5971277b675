"""The double's state: an append-only event log with its indexes, body keys, packs and erasures
(docs/spec/cortexdb.md §13.3).

Nothing is updated in place but the `removed` flag. With a data file every change is appended to it as one JSON
line, and a double started on the same file replays them, so a restarted double keeps its log.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Runs of at least three letters or digits: a shorter run never matches, since the scan enters it at its start.
_WORDS = re.compile(r"\w{3,}")
NEVER = float("inf")


def instant(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat().replace("+00:00", "Z")


def words(text: str) -> frozenset[str]:
    """The words recall ranks by: runs of letters and digits, lowercased, at least 3 characters."""
    return frozenset(_WORDS.findall(text.lower()))


@dataclass
class EventRecord:
    """One accepted event, as stored (hosted scopes carry the tenant prefix)."""

    id: str
    seq: int
    scope: str
    modality: str
    content: dict[str, Any]
    labels: list[str]
    observed_at: str | None
    recorded_at: str
    directives: dict[str, Any] | None
    idempotency_key: str | None
    accepted_at: float
    listed_at: float
    ranked_at: float
    body: dict[str, Any]
    removed: bool = False
    _words: frozenset[str] | None = field(default=None, repr=False, compare=False)

    @property
    def text(self) -> str:
        text = self.content.get("text")
        return text if isinstance(text, str) else json.dumps(self.content, sort_keys=True)

    @property
    def role(self) -> str:
        role = self.content.get("role")
        return role if isinstance(role, str) else self.content.get("kind", "text")

    def words(self) -> frozenset[str]:
        if self._words is None:
            self._words = words(self.text)
        return self._words

    def entry(self, scope: str | None = None) -> dict[str, Any]:
        """The event as listings and packs show it (`scope` overrides the stored path, for the hosted view)."""
        context: dict[str, Any] = {"labels": list(self.labels)}
        if self.observed_at is not None:
            context["observed_at"] = self.observed_at
        context["recorded_at"] = self.recorded_at
        return {
            "id": self.id,
            "scope": scope or self.scope,
            "modality": self.modality,
            "content": dict(self.content),
            "context": context,
            "wal_offset": self.seq,
        }

    def saved(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("_words")
        data["listed_at"] = None if self.listed_at == NEVER else self.listed_at
        data["ranked_at"] = None if self.ranked_at == NEVER else self.ranked_at
        return data

    @classmethod
    def restored(cls, data: dict[str, Any]) -> EventRecord:
        data = dict(data)
        data["listed_at"] = NEVER if data["listed_at"] is None else data["listed_at"]
        data["ranked_at"] = NEVER if data["ranked_at"] is None else data["ranked_at"]
        return cls(**data)


@dataclass
class Pack:
    pack_id: str
    scope: str
    events: list[EventRecord]
    created_at: float


@dataclass
class Erasure:
    erasure_id: str
    scope: str
    polls_left: int


@dataclass
class _Key:
    body: dict[str, Any]
    event_id: str
    expires_at: float


class EventLog:
    """Events by id, by scope and by (scope, label); callers hold the double's lock around every use."""

    def __init__(self, data: Path | None = None) -> None:
        self.data = data
        self.reset(keep_file=True)
        if data is not None and data.exists():
            self._replay(data)

    def reset(self, keep_file: bool = False) -> None:
        self.events: dict[str, EventRecord] = {}
        self.by_scope: dict[str, list[EventRecord]] = {}
        self.by_label: dict[tuple[str, str], list[EventRecord]] = {}
        self.live: dict[str, int] = {}
        self.keys: dict[str, _Key] = {}
        self.packs: dict[str, Pack] = {}
        self.erasures: dict[str, Erasure] = {}
        self._vocabulary: dict[str, dict[str, int]] = {}
        self._vocabulary_upto: dict[str, int] = {}
        self.counters = {"evt": 0, "seq": 0, "pack": 0, "era": 0, "req": 0}
        if not keep_file and self.data is not None and self.data.exists():
            self.data.unlink()

    def next_id(self, kind: str) -> int:
        self.counters[kind] += 1
        return self.counters[kind]

    # -- events ---------------------------------------------------------------------------------------

    def add(self, record: EventRecord, ttl_s: float) -> None:
        self._index(record, ttl_s)
        if self.data is not None:
            self._save({"op": "event", "record": record.saved(), "ttl_s": ttl_s})

    def _index(self, record: EventRecord, ttl_s: float) -> None:
        self.events[record.id] = record
        self.by_scope.setdefault(record.scope, []).append(record)
        for label in dict.fromkeys(record.labels):
            self.by_label.setdefault((record.scope, label), []).append(record)
        if not record.removed:
            self.live[record.scope] = self.live.get(record.scope, 0) + 1
        if record.idempotency_key is not None:
            self.keys[record.idempotency_key] = _Key(record.body, record.id, record.accepted_at + ttl_s)
        self.counters["evt"] = max(self.counters["evt"], int(record.id.removeprefix("evt_") or 0))
        self.counters["seq"] = max(self.counters["seq"], record.seq)

    def key(self, key: str, now: float) -> _Key | None:
        held = self.keys.get(key)
        return held if held is not None and held.expires_at > now else None

    def remove(self, records: list[EventRecord], release_keys: bool) -> int:
        """Mark records removed; returns how many were live. Released keys may be written again as new."""
        removed = [r for r in records if not r.removed]
        for record in removed:
            record.removed = True
            self.live[record.scope] -= 1
            if release_keys and record.idempotency_key is not None:
                held = self.keys.get(record.idempotency_key)
                if held is not None and held.event_id == record.id:
                    del self.keys[record.idempotency_key]
        if removed:
            self._save({"op": "remove", "ids": [r.id for r in removed], "release": release_keys})
        return len(removed)

    def listed(self, scope: str, labels: list[str] | None, now: float) -> list[EventRecord]:
        """Live events of exactly `scope` that are listed by now, newest first, narrowed to any of `labels`."""
        if labels:
            seen: dict[str, EventRecord] = {}
            for label in labels:
                for record in self.by_label.get((scope, label), []):
                    seen.setdefault(record.id, record)
            found = list(seen.values())
        else:
            found = self.by_scope.get(scope, [])
        return sorted((r for r in found if not r.removed and r.listed_at <= now), key=lambda r: -r.seq)

    def vocabulary(self, scope: str) -> dict[str, int]:
        """Every word any event of `scope` ever held (removed ones too), with the `seq` of the first event that
        held it: no event older than that holds the word, a bound on what an older event can match."""
        records = self.by_scope.get(scope, [])
        known = self._vocabulary.setdefault(scope, {})
        for record in records[self._vocabulary_upto.get(scope, 0) :]:
            for word in record.words():
                known.setdefault(word, record.seq)
        self._vocabulary_upto[scope] = len(records)
        return known

    def scopes(self) -> list[str]:
        return sorted(scope for scope, count in self.live.items() if count > 0)

    def below(self, scope: str) -> list[str]:
        """Known scopes strictly below `scope` at a segment boundary."""
        return [s for s in self.live if s.startswith(scope + "/")]

    # -- persistence ----------------------------------------------------------------------------------

    def _save(self, line: dict[str, Any]) -> None:
        if self.data is None:
            return
        with self.data.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line, ensure_ascii=False) + "\n")

    def _replay(self, data: Path) -> None:
        for line in data.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            change = json.loads(line)
            if change["op"] == "event":
                self._index(EventRecord.restored(change["record"]), change["ttl_s"])
            elif change["op"] == "remove":
                records = [self.events[i] for i in change["ids"] if i in self.events]
                saved, self.data = self.data, None
                self.remove(records, change["release"])
                self.data = saved
