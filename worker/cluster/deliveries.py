"""Deliveries: the ingest batches and erasures sent to the queues and not yet settled, and the re-sending of those
the broker lost.

A message can vanish with nothing left to redeliver it. kombu's Redis transport loses one whose worker dies between
BRPOP handing it over and kombu writing it to `unacked` (celery/kombu#305; measured here: a batch of 100 in about
20 runs of a whole-worker kill test), and Celery acknowledges a task that failed unexpectedly or hit its hard time
limit (`acks_on_failure_or_timeout`). Its units were never committed, so a later sync would find them again, but
until then its run stops short of its plan, and an erasure would stay queued for good.

So each message is recorded before it is sent (`delivery:{task}`: its task, arguments, queue and expiry, indexed by
when it was sent in `deliveries`), and its task settles it once the job has ended: stored or dead-lettered, an
erasure completed or failed. A sweep (each beat tick) looks only at deliveries sent longer ago than the broker's
visibility timeout, the time a dead worker's message takes to come back. One found in no queue and not
unacknowledged, on two sweeps at least `CONFIRM_S` apart, is sent again under its task id: a replay, as ingest
batches and erasures are idempotent. A batch lost `RESEND_LIMIT` times is given up, and its caller dead-letters
the units not committed; an erasure is never given up (it must not lapse). A delivery past its queue's expiry is
dropped unsent, as its message would have been: the manifest finds its units again.
"""

from __future__ import annotations

import json
import logging
import reprlib
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from worker.cluster.queues import ALL_QUEUES
from worker.redis.client import check_bytes_client, describe, translated
from worker.redis.keys import Keys

if TYPE_CHECKING:
    import redis
    from celery import Celery

logger = logging.getLogger(__name__)

RESEND_LIMIT = 3
"""How often a lost ingest batch is sent again before its units are dead-lettered instead."""
CONFIRM_S = 5.0
"""A delivery must be missing this long (two sweeps apart) before it is taken for lost: a message between BRPOP
and `unacked`, or between `unacked` and its queue on a restore, is missing for an instant."""
# kombu's Redis transport: a queue's messages at priority p > 0 are in the list `queue + SEP + p`.
_PRIORITY_SEP = "\x06\x16"
_PRIORITY_STEPS = (3, 6, 9)
_PAGE = 500


class Delivery(BaseModel):
    """One message as it was sent: enough to send it again, and how often it was."""

    model_config = ConfigDict(extra="forbid")

    task: str
    args: list[Any]
    queue: str
    sent_at: float
    expires_at: float | None = None
    resends: int | None = RESEND_LIMIT  # None: sent again for as long as it is lost
    resent: int = 0
    missing_since: float | None = None

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at


Send = Callable[[str, Delivery], None]
"""Puts a delivery's message on its queue under the given task id."""


def celery_send(app: Celery) -> Send:
    """Sending through a Celery app, with the delivery's own expiry."""

    def send(task_id: str, delivery: Delivery) -> None:
        expires = None if delivery.expires_at is None else datetime.fromtimestamp(delivery.expires_at, UTC)
        app.send_task(
            delivery.task,
            args=delivery.args,
            queue=delivery.queue,
            task_id=task_id,
            expires=expires,
            argsrepr=args_repr(delivery.args),
            kwargsrepr="{}",
        )

    return send


def args_repr(args: list[Any]) -> str:
    """A message's arguments as monitoring shows them (Flower, `celery inspect`): a batch's changes counted, not
    listed. Celery's own repr of a batch of 100 walks every change: half of `send_task`'s time under a profiler,
    for a first sync that sends one such batch per 100 files."""
    shown = (f"<{len(arg)} items>" if isinstance(arg, list) else reprlib.repr(arg) for arg in args)
    return f"[{', '.join(shown)}]"


class Swept(BaseModel):
    """What one sweep did: deliveries looked at, marked missing, sent again (task id → task), dropped as expired,
    given up."""

    model_config = ConfigDict(extra="forbid")

    looked: int = 0
    missing: int = 0
    resent: dict[str, str] = {}
    expired: int = 0
    given_up: list[Delivery] = []


class Deliveries:
    """The deliveries under one key prefix; safe to share between threads, processes and hosts."""

    def __init__(self, client: redis.Redis, prefix: str, send: Send) -> None:
        check_bytes_client(client)
        self.keys = Keys(prefix)
        self._client = client
        self._send = send
        self._where = describe(client)

    def send(
        self, task_id: str, task: str, args: list[Any], queue: str, *, expires_s: float | None, resends: int | None
    ) -> None:
        """Record a message, then send it. Recorded first, so one the broker never got is sent by a sweep; a send
        that fails is forgotten and the error raised for the caller."""
        now = time.time()
        delivery = Delivery(
            task=task,
            args=args,
            queue=queue,
            sent_at=now,
            expires_at=None if expires_s is None else now + expires_s,
            resends=resends,
        )
        with translated(self._where, f"recording delivery {task_id}"):
            pipe = self._client.pipeline(transaction=True)
            # The record lives a little past its message's expiry, so a sweep sees it expired and drops it.
            ttl = None if expires_s is None else int(expires_s) + 3600
            pipe.set(self.keys.delivery(task_id), delivery.model_dump_json(), ex=ttl)
            pipe.zadd(self.keys.deliveries(), {task_id: now})
            pipe.execute()
        try:
            self._send(task_id, delivery)
        except BaseException:
            self.settle(task_id)
            raise

    def settle(self, task_id: str | None) -> None:
        """The job of `task_id` has ended: its message will not be sent again (None, a task not sent: nothing)."""
        if task_id is None:
            return
        with translated(self._where, f"settling delivery {task_id}"):
            pipe = self._client.pipeline(transaction=True)
            pipe.delete(self.keys.delivery(task_id))
            pipe.zrem(self.keys.deliveries(), task_id)
            pipe.execute()

    def count(self) -> int:
        """Deliveries not yet settled."""
        with translated(self._where, "counting deliveries"):
            return int(self._client.zcard(self.keys.deliveries()))

    def sweep(self, older_than_s: float, now: float | None = None) -> Swept:
        """Send again what the broker lost, of the deliveries sent more than `older_than_s` ago (see the module)."""
        now = time.time() if now is None else now
        swept = Swept()
        with translated(self._where, "sweeping deliveries"):
            found = cast("list[bytes]", self._client.zrangebyscore(self.keys.deliveries(), "-inf", now - older_than_s))
            ids = [raw.decode() for raw in found]
            if not ids:
                return swept
            records = self._client.mget([self.keys.delivery(task_id) for task_id in ids])
            present = self._in_broker()
            for task_id, raw in zip(ids, records, strict=True):
                swept.looked += 1
                self._look_at(task_id, _parsed(raw), task_id in present, now, swept)
        return swept

    def _look_at(self, task_id: str, delivery: Delivery | None, present: bool, now: float, swept: Swept) -> None:
        if delivery is None or delivery.expired(now):
            swept.expired += delivery is not None
            self.settle(task_id)
        elif present:
            if delivery.missing_since is not None:
                self._rewrite(task_id, delivery.model_copy(update={"missing_since": None}))
        elif delivery.missing_since is None or now - delivery.missing_since < CONFIRM_S:
            swept.missing += 1
            if delivery.missing_since is None:
                self._rewrite(task_id, delivery.model_copy(update={"missing_since": now}))
        elif delivery.resends is not None and delivery.resent >= delivery.resends:
            self.settle(task_id)
            swept.given_up.append(delivery)
        else:
            again = delivery.model_copy(update={"missing_since": None, "resent": delivery.resent + 1})
            # Only while unsettled: a task that ended meanwhile is not brought back.
            if self._rewrite(task_id, again):
                # Sent again now, so it is given as long as a new one before it is looked for.
                self._client.zadd(self.keys.deliveries(), {task_id: now}, xx=True)
                logger.warning(
                    "delivery %s (%s on %s) was lost by the broker: sent again (%d of %s)",
                    task_id,
                    delivery.task,
                    delivery.queue,
                    again.resent,
                    delivery.resends if delivery.resends is not None else "no limit",
                )
                self._send(task_id, again)
                swept.resent[task_id] = delivery.task

    def _rewrite(self, task_id: str, delivery: Delivery) -> bool:
        return bool(self._client.set(self.keys.delivery(task_id), delivery.model_dump_json(), xx=True, keepttl=True))

    def _in_broker(self) -> set[str]:
        """The task ids of every message waiting in a queue or delivered and not yet acknowledged.

        Queues are read before `unacked`: a message moving from a queue to `unacked` meanwhile is then seen in one
        of them (a restore moves the other way, and a second sweep sees it).
        """
        base = self.keys.celery()
        found: set[str] = set()
        for queue in ALL_QUEUES:
            for name in (queue, *(f"{queue}{_PRIORITY_SEP}{p}" for p in _PRIORITY_STEPS)):
                found.update(_task_id(raw) for raw in self._list(base + name))
        for raw in self._client.hvals(base + "unacked"):
            found.add(_task_id(raw, unacked=True))
        found.discard("")
        return found

    def _list(self, key: str) -> Iterator[bytes]:
        start = 0
        while True:
            page = cast("list[bytes]", self._client.lrange(key, start, start + _PAGE - 1))
            yield from page
            if len(page) < _PAGE:
                return
            start += _PAGE


def _task_id(raw: bytes | str, *, unacked: bool = False) -> str:
    """The task id of a kombu message as the Redis transport keeps it ('' for one that is not Celery's)."""
    try:
        message = json.loads(raw)
        if unacked:  # [message, exchange, routing key]
            message = message[0]
        return str(message["headers"]["id"])
    except (ValueError, LookupError, TypeError):
        return ""


def _parsed(raw: bytes | str | None) -> Delivery | None:
    if raw is None:
        return None
    try:
        return Delivery.model_validate_json(raw)
    except ValidationError:
        logger.error("an unreadable delivery record was dropped: %.200r", raw)
        return None
