"""The server behind both wires of the double: writes, listings, forgets, erasures and scopes
(docs/spec/cortexdb.md §13.3-13.10).

Every operation takes stored scope paths (the hosted wire re-roots under the tenant before calling) and raises a
`RefusalError` with the Direct status and code. Callers hold the double's lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinymemory_ingest.cortex_double.checks import RefusalError, check_experience, invalid
from tinymemory_ingest.cortex_double.config import DoubleConfig
from tinymemory_ingest.cortex_double.faults import Faults
from tinymemory_ingest.cortex_double.log import Erasure, EventLog, EventRecord, instant

MAX_BULK = 1000
MAX_LIST_LIMIT = 1000
MAX_MEMORY_IDS = 1000
CASCADES = ("derived_only", "redact_events")


class Core:
    """Operations on one log; `reroot` maps a body's scope to the stored one."""

    def __init__(self, config: DoubleConfig, log: EventLog, faults: Faults) -> None:
        self.config = config
        self.log = log
        self.faults = faults

    def now(self) -> float:
        return self.config.clock()

    # -- writes ---------------------------------------------------------------------------------------

    def experience(self, body: dict[str, Any], stored_scope: str, space: str = "") -> tuple[EventRecord, bool]:
        """Validate and append one event; a replay of a held body key writes nothing. Keys are global to the
        store, or to `space` (the hosted wire keeps one per tenant, as each account is a tenant of its own)."""
        check_experience(body, self.config)
        return self._append(body, stored_scope, space)

    def bulk(self, body: object, reroot: Callable[[str], str]) -> list[tuple[EventRecord, bool]]:
        if not isinstance(body, dict) or not isinstance(body.get("items"), list):
            raise invalid("a bulk body is {items: [...], ordering?}")
        items = body["items"]
        if not 1 <= len(items) <= MAX_BULK:
            raise invalid(f"a bulk write takes 1 to {MAX_BULK} items")
        # Every item is checked before any is written: a refusal writes nothing of the batch.
        pending: dict[str, dict[str, Any]] = {}
        plains = []
        for index, item in enumerate(items):
            try:
                check_experience(item, self.config)
                plains.append(self._check_key(item, pending))
            except RefusalError as refusal:
                raise RefusalError(
                    refusal.status, refusal.code, f"item {index}: {refusal.message}", {"index": index}
                ) from None
        written = zip(items, plains, strict=True)
        return [self._append(item, reroot(item["scope"]), plain=plain) for item, plain in written]

    def _check_key(self, body: dict[str, Any], pending: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The body without its key, once the key is known to fit it (held and earlier in the batch)."""
        plain = _without_key(body)
        key = body.get("idempotency_key")
        if key is None:
            return plain
        held = self.log.key(key, self.now())
        earlier = pending.setdefault(key, plain)
        if (held is not None and held.body != plain) or earlier != plain:
            raise RefusalError(409, "IDEMPOTENCY_CONFLICT", "the idempotency key was used with another body")
        return plain

    def _append(
        self, body: dict[str, Any], stored_scope: str, space: str = "", plain: dict[str, Any] | None = None
    ) -> tuple[EventRecord, bool]:
        now = self.now()
        key = body.get("idempotency_key")
        if key is not None and space:
            key = f"{space}|{key}"
        plain = _without_key(body) if plain is None else plain
        if key is not None:
            held = self.log.key(key, now)
            if held is not None:
                if held.body != plain:
                    raise RefusalError(409, "IDEMPOTENCY_CONFLICT", "the idempotency key was used with another body")
                return self.log.events[held.event_id], True
        listed_at = self.faults.listing_delay(now) + self.config.listing_lag_s
        context = body.get("context") or {}
        record = EventRecord(
            id=f"evt_{self.log.next_id('evt')}",
            seq=self.log.next_id("seq"),
            scope=stored_scope,
            modality=body["modality"],
            content=dict(body["content"]),
            labels=list(context.get("labels", [])),
            observed_at=context.get("observed_at"),
            recorded_at=instant(now),
            directives=body.get("directives"),
            idempotency_key=key,
            accepted_at=now,
            listed_at=listed_at,
            ranked_at=listed_at + self.config.recall_lag_s,
            body=plain,
        )
        self.log.add(record, self.config.idempotency_ttl_s)
        return record, False

    # -- reads ----------------------------------------------------------------------------------------

    def listing(self, stored_scope: str, query: dict[str, list[str]], shown: Callable[[str], str]) -> dict[str, Any]:
        limit = _integer(query.get("limit"), self.config.default_list_limit, "limit")
        if not 1 <= limit <= MAX_LIST_LIMIT:
            raise invalid(f"limit must be between 1 and {MAX_LIST_LIMIT}")
        cursor = (query.get("cursor") or ["0"])[-1]
        if not cursor.isdigit():
            raise invalid("cursor must be a non-negative integer", "INVALID_CURSOR")
        labels_given = query.get("labels")
        labels = [v for v in labels_given[-1].split(",") if v] if labels_given else None
        entries = self.log.listed(stored_scope, labels, self.now())
        if self.config.listing_duplicates:
            entries = [record for record in entries for _ in range(2)]
        offset = int(cursor)
        page = entries[offset : offset + limit]
        more = offset + limit < len(entries)
        answer: dict[str, Any] = {"items": [r.entry(shown(r.scope)) for r in page], "has_more": more}
        if more:
            answer["next_cursor"] = str(offset + limit)
        return answer

    def scopes(self, stored_prefix: str | None, limit: int, within: str | None = None) -> list[str]:
        """Known scopes equal to the prefix or below it at a segment boundary, sorted, at most `limit`."""
        known = self.log.scopes()
        if within is not None:
            known = [s for s in known if s.startswith(within + "/")]
        if stored_prefix:
            base = stored_prefix.rstrip("/")
            known = [s for s in known if s == base or s.startswith(base + "/")]
        return known[:limit]

    # -- removal --------------------------------------------------------------------------------------

    def forget(self, body: dict[str, Any], stored_scope: str) -> dict[str, Any]:
        cascade = body.get("cascade", self.config.default_cascade)
        if cascade not in CASCADES:
            raise RefusalError(400, "INVALID_CASCADE", f"cascade must be one of {', '.join(CASCADES)}")
        selector = body.get("selector") if isinstance(body.get("selector"), dict) else {}
        ids = selector.get("memory_ids") if isinstance(selector, dict) else None
        named = isinstance(ids, list) and bool(ids)
        confirm_all = body.get("confirm_all") is True
        self.log.packs.clear()
        if named and confirm_all:
            raise RefusalError(400, "AMBIGUOUS_SELECTOR_CONFIRM_ALL", "confirm_all with a selector is ambiguous")
        if not named and not confirm_all:
            raise invalid("an empty selector needs confirm_all: true", "EMPTY_SELECTOR_WITHOUT_CONFIRMATION")
        if confirm_all:
            records = [r for r in self.log.by_scope.get(stored_scope, []) if not r.removed]
            removed = self.log.remove(records, release_keys=False)
            return {"deleted": {"events": removed}, "requested": 0, "matched": len(records)}
        assert isinstance(ids, list)
        if len(ids) > MAX_MEMORY_IDS or not all(isinstance(i, str) for i in ids):
            raise invalid(f"memory_ids takes at most {MAX_MEMORY_IDS} event ids")
        wanted = set(ids)
        found = [r for r in self.log.by_scope.get(stored_scope, []) if r.id in wanted and not r.removed]
        removed = 0
        if cascade == "redact_events":
            removed = self.log.remove(found, release_keys=self.config.forget_releases_keys)
        return {"deleted": {"events": removed}, "requested": len(ids), "matched": len(found)}

    def erase(self, stored_scope: str, memory_ids: list[str] | None = None) -> int:
        """Remove the scope's events (releasing their keys) and hide the scopes below it (keeping theirs);
        the number of scopes that held events. With `memory_ids`, only those events of the scope."""
        self.log.packs.clear()
        own = [r for r in self.log.by_scope.get(stored_scope, []) if not r.removed]
        if memory_ids is not None:
            wanted = set(memory_ids)
            return min(1, self.log.remove([r for r in own if r.id in wanted], release_keys=True))
        held = 1 if own else 0
        self.log.remove(own, release_keys=True)
        for below in self.log.below(stored_scope):
            records = [r for r in self.log.by_scope.get(below, []) if not r.removed]
            held += 1 if records else 0
            self.log.remove(records, release_keys=False)
        return held

    def new_erasure(self, stored_scope: str) -> Erasure:
        erasure = Erasure(f"era_{self.log.next_id('era')}", stored_scope, self.config.erasure_polls_before_done)
        self.log.erasures[erasure.erasure_id] = erasure
        return erasure

    def erasure_status(self, erasure_id: str) -> dict[str, Any]:
        erasure = self.log.erasures.get(erasure_id)
        if erasure is None:
            raise RefusalError(404, "NOT_FOUND", f"no erasure `{erasure_id}`")
        if erasure.polls_left > 0:
            erasure.polls_left -= 1
            return {"erasure_id": erasure_id, "status": "running"}
        return {"erasure_id": erasure_id, "status": "completed"}


def _without_key(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key != "idempotency_key"}


def _integer(values: list[str] | None, default: int, name: str) -> int:
    if not values:
        return default
    try:
        return int(values[-1])
    except ValueError:
        raise invalid(f"{name} must be an integer") from None
