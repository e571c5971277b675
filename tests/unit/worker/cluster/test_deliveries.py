"""Deliveries: recorded before they are sent, settled by their task, and sent again only when the broker lost them.

The broker is emulated by what kombu's Redis transport keeps: a queue is a list of message JSON under Celery's
prefix, and a delivered message waits in the `unacked` hash as `[message, exchange, routing key]`. The real
transport's format is checked against a real Celery app in `test_a_message_a_real_app_sent_is_found`.
"""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace
from typing import cast

import pytest

from tests.fixtures.redis_servers import RedisTarget, open_redis
from worker.cluster import tasks
from worker.cluster.celery_app import create_app
from worker.cluster.deliveries import CONFIRM_S, RESEND_LIMIT, Deliveries, Delivery, args_repr, celery_send
from worker.cluster.queues import BACKFILL_QUEUE, ERASE_QUEUE, ERASE_TASK, INGEST_TASK
from worker.cluster.runtime import ClusterRuntime
from worker.records import Change, ManifestEntry
from worker.redis.keys import Keys
from worker.redis.leases import Leases
from worker.settings import Settings
from worker.state.redis import RedisStateStore

AGE = 100.0  # the sweeps' "older than", standing for the visibility timeout


class Broker:
    """Sends into the queue lists as kombu would, and remembers every send."""

    def __init__(self, target: RedisTarget) -> None:
        self.client = target.client
        self.base = Keys(target.prefix).celery()
        self.sent: list[tuple[str, Delivery]] = []

    def send(self, task_id: str, delivery: Delivery) -> None:
        self.sent.append((task_id, delivery))
        self.client.lpush(self.base + delivery.queue, json.dumps(message(task_id, delivery.task)))

    def lose(self, queue: str) -> None:
        """What a worker that died between BRPOP and kombu's `unacked` write leaves: nothing."""
        assert self.client.rpop(self.base + queue) is not None

    def deliver(self, queue: str, tag: str) -> None:
        """BRPOP, then kombu's `unacked` write."""
        raw = self.client.rpop(self.base + queue)
        assert raw is not None
        self.client.hset(self.base + "unacked", tag, json.dumps([json.loads(raw), "", queue]))

    def ack(self, tag: str) -> None:
        self.client.hdel(self.base + "unacked", tag)


def message(task_id: str, task: str) -> dict[str, object]:
    return {
        "body": "W1tdLCB7fSwge31d",
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {"lang": "py", "task": task, "id": task_id, "root_id": "r" + task_id, "parent_id": None},
        "properties": {"correlation_id": task_id, "delivery_tag": uuid.uuid4().hex},
    }


@pytest.fixture
def broker(redis_target: RedisTarget) -> Broker:
    return Broker(redis_target)


@pytest.fixture
def deliveries(redis_target: RedisTarget, broker: Broker) -> Deliveries:
    return Deliveries(redis_target.client, redis_target.prefix, broker.send)


def send_batch(deliveries: Deliveries, task_id: str = "b1", expires_s: float | None = 86_400.0) -> None:
    changes = [{"unit_id": "a.md", "action": "upsert", "version": "1"}]
    deliveries.send(
        task_id, INGEST_TASK, ["src", changes, "run"], BACKFILL_QUEUE, expires_s=expires_s, resends=RESEND_LIMIT
    )


def test_a_delivery_is_recorded_sent_and_settled(deliveries: Deliveries, broker: Broker) -> None:
    send_batch(deliveries)
    assert deliveries.count() == 1
    assert [(task_id, d.task, d.args[0]) for task_id, d in broker.sent] == [("b1", INGEST_TASK, "src")]
    deliveries.settle("b1")
    deliveries.settle(None)  # a task not sent through deliveries
    assert deliveries.count() == 0
    assert broker.client.exists(deliveries.keys.delivery("b1")) == 0


def test_a_batch_record_expires_after_its_message_and_an_erasure_record_never(
    deliveries: Deliveries, redis_target: RedisTarget
) -> None:
    send_batch(deliveries, expires_s=600.0)
    deliveries.send("e1", ERASE_TASK, ["er1"], ERASE_QUEUE, expires_s=None, resends=None)
    ttl = redis_target.client.ttl(deliveries.keys.delivery("b1"))
    assert 600 < ttl <= 600 + 3600
    assert redis_target.client.ttl(deliveries.keys.delivery("e1")) == -1


def test_a_send_that_fails_is_forgotten(redis_target: RedisTarget) -> None:
    def refuse(task_id: str, delivery: Delivery) -> None:
        raise ConnectionError("broker down")

    deliveries = Deliveries(redis_target.client, redis_target.prefix, refuse)
    with pytest.raises(ConnectionError):
        send_batch(deliveries)
    assert deliveries.count() == 0


def test_young_queued_and_unacknowledged_deliveries_are_left_alone(deliveries: Deliveries, broker: Broker) -> None:
    send_batch(deliveries, "queued")
    send_batch(deliveries, "held")
    broker.deliver(BACKFILL_QUEUE, tag="t1")  # the first sent is the first popped
    sent_at = min(d.sent_at for _, d in broker.sent)
    assert deliveries.sweep(AGE, now=sent_at + AGE / 2).looked == 0
    for later in (AGE + 1, AGE + 1 + CONFIRM_S * 2):
        swept = deliveries.sweep(AGE, now=sent_at + later)
        assert (swept.looked, swept.missing, swept.resent) == (2, 0, {})
    assert len(broker.sent) == 2


def test_a_lost_delivery_is_sent_again_once_confirmed_missing(deliveries: Deliveries, broker: Broker) -> None:
    send_batch(deliveries, "lost")
    send_batch(deliveries, "kept")
    broker.lose(BACKFILL_QUEUE)
    t0 = broker.sent[-1][1].sent_at + AGE + 1
    first = deliveries.sweep(AGE, now=t0)
    assert (first.missing, first.resent) == (1, {})
    # Missing again, but not long enough: a message between BRPOP and `unacked` is missing for an instant.
    assert deliveries.sweep(AGE, now=t0 + CONFIRM_S / 2).resent == {}
    confirmed = deliveries.sweep(AGE, now=t0 + CONFIRM_S)
    assert confirmed.resent == {"lost": INGEST_TASK}
    task_id, again = broker.sent[-1]
    assert (task_id, again.args, again.resent, again.missing_since) == ("lost", broker.sent[0][1].args, 1, None)
    # Sent again now: it waits a whole timeout before it is looked for again, and is then found queued.
    assert deliveries.sweep(AGE, now=t0 + CONFIRM_S + AGE / 2).looked == 1  # "kept" only
    assert deliveries.sweep(AGE, now=t0 + CONFIRM_S + AGE + 1).resent == {}
    assert deliveries.count() == 2


def test_a_delivery_seen_again_is_no_longer_missing(deliveries: Deliveries, broker: Broker) -> None:
    send_batch(deliveries, "restored")
    raw = broker.client.rpop(broker.base + BACKFILL_QUEUE)  # between `unacked` and its queue, on a restore
    t0 = broker.sent[0][1].sent_at + AGE + 1
    assert deliveries.sweep(AGE, now=t0).missing == 1
    assert raw is not None
    broker.client.lpush(broker.base + BACKFILL_QUEUE, raw)
    assert deliveries.sweep(AGE, now=t0 + CONFIRM_S).missing == 0
    broker.lose(BACKFILL_QUEUE)
    # Missing from scratch: one sweep is not enough.
    assert deliveries.sweep(AGE, now=t0 + 2 * CONFIRM_S).resent == {}
    assert deliveries.sweep(AGE, now=t0 + 3 * CONFIRM_S).resent == {"restored": INGEST_TASK}


def lose_and_sweep(deliveries: Deliveries, broker: Broker, task_id: str, queue: str, t0: float) -> float:
    """Lose the newest message of `queue`, then sweep until it is sent again or given up; the time reached."""
    broker.lose(queue)
    deliveries.sweep(AGE, now=t0)
    deliveries.sweep(AGE, now=t0 + CONFIRM_S)
    return t0 + CONFIRM_S + AGE + 1


def test_a_batch_lost_too_often_is_given_up_and_an_erasure_never(deliveries: Deliveries, broker: Broker) -> None:
    send_batch(deliveries, "b")
    deliveries.send("e", ERASE_TASK, ["er1"], ERASE_QUEUE, expires_s=None, resends=None)
    t = broker.sent[-1][1].sent_at + AGE + 1
    for _ in range(RESEND_LIMIT):
        t = lose_and_sweep(deliveries, broker, "b", BACKFILL_QUEUE, t)
    assert [task_id for task_id, _ in broker.sent].count("b") == 1 + RESEND_LIMIT
    broker.lose(BACKFILL_QUEUE)
    deliveries.sweep(AGE, now=t)
    swept = deliveries.sweep(AGE, now=t + CONFIRM_S)
    assert [(d.task, d.args[0], d.resent) for d in swept.given_up] == [(INGEST_TASK, "src", RESEND_LIMIT)]
    assert [task_id for task_id, _ in broker.sent].count("b") == 1 + RESEND_LIMIT
    # The erasure has been lost as often, and is still sent again each time.
    t = broker.sent[-1][1].sent_at + AGE + 1
    for _ in range(RESEND_LIMIT + 2):
        t = lose_and_sweep(deliveries, broker, "e", ERASE_QUEUE, t)
    assert [task_id for task_id, _ in broker.sent].count("e") == RESEND_LIMIT + 3
    assert deliveries.count() == 1


def test_an_expired_delivery_is_dropped_unsent(deliveries: Deliveries, broker: Broker) -> None:
    send_batch(deliveries, "old", expires_s=50.0)
    broker.lose(BACKFILL_QUEUE)
    swept = deliveries.sweep(AGE, now=broker.sent[0][1].sent_at + AGE + 1)
    assert (swept.expired, swept.resent, deliveries.count()) == (1, {}, 0)


def test_a_delivery_settled_during_a_sweep_is_not_brought_back(
    deliveries: Deliveries, broker: Broker, redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    send_batch(deliveries, "done")
    broker.lose(BACKFILL_QUEUE)
    t0 = broker.sent[0][1].sent_at + AGE + 1
    deliveries.sweep(AGE, now=t0)
    look = deliveries._in_broker

    def settled_meanwhile() -> set[str]:
        # The sweep has read the record; its task ends before the sweep writes it back.
        deliveries.settle("done")
        return look()

    monkeypatch.setattr(deliveries, "_in_broker", settled_meanwhile)
    swept = deliveries.sweep(AGE, now=t0 + CONFIRM_S)
    assert (swept.resent, len(broker.sent), deliveries.count()) == ({}, 1, 0)
    assert redis_target.client.exists(deliveries.keys.delivery("done")) == 0


def test_messages_that_are_not_celerys_are_ignored(deliveries: Deliveries, broker: Broker) -> None:
    broker.client.lpush(broker.base + BACKFILL_QUEUE, b"not json", json.dumps({"headers": {}}))
    broker.client.hset(broker.base + "unacked", "x", b"[]")
    send_batch(deliveries, "b")
    broker.ack("x")
    swept = deliveries.sweep(AGE, now=broker.sent[0][1].sent_at + AGE + 1)
    assert (swept.looked, swept.missing) == (1, 0)


@pytest.mark.integration
def test_a_message_a_real_app_sent_is_found() -> None:
    """kombu's own format: a message sent by a real app is found queued, and found missing once popped."""
    with open_redis("redis") as target:
        settings = Settings(redis_url="redis://127.0.0.1:6379/0", redis_prefix=target.prefix)
        app = create_app(settings)
        try:
            deliveries = Deliveries(target.client, target.prefix, celery_send(app))
            send_batch(deliveries, "real")
            sent_at = float(target.client.zscore(deliveries.keys.deliveries(), "real") or 0)
            assert deliveries.sweep(AGE, now=sent_at + AGE + 1).missing == 0
            target.client.rpop(Keys(target.prefix).celery() + BACKFILL_QUEUE)
            assert deliveries.sweep(AGE, now=sent_at + AGE + 2).missing == 1
            assert deliveries.sweep(AGE, now=sent_at + AGE + 2 + CONFIRM_S).resent == {"real": INGEST_TASK}
            raw = target.client.lindex(Keys(target.prefix).celery() + BACKFILL_QUEUE, 0)
            assert raw is not None
            headers = json.loads(raw)["headers"]
            assert headers["id"] == "real"
            # Monitoring sees the batch counted, not Celery's walk of every change.
            assert (headers["argsrepr"], headers["kwargsrepr"]) == ("['src', <1 items>, 'run']", "{}")
        finally:
            app.close()


def test_the_units_of_a_batch_given_up_are_dead_lettered_unless_committed(
    redis_target: RedisTarget, broker: Broker
) -> None:
    """`sweep_deliveries`, as beat runs it: one worker at a time, and a batch given up is dead-lettered."""
    client, prefix = redis_target.client, redis_target.prefix
    state = RedisStateStore(client, prefix)
    state.commit("src", {"done.md": ManifestEntry(version="1")})
    deliveries = Deliveries(client, prefix, broker.send)
    changes = [Change(unit_id=u, action=a, version="1") for u, a in (("a.md", "upsert"), ("done.md", "upsert"))]
    changes.append(Change(unit_id="gone.md", action="delete"))
    payload = [c.model_dump(mode="json") for c in changes]
    deliveries.send("b", INGEST_TASK, ["src", payload, None], BACKFILL_QUEUE, expires_s=None, resends=0)
    broker.lose(BACKFILL_QUEUE)
    settings = Settings(redis_prefix=prefix, visibility_timeout_s=0.001)
    leases = Leases(client, prefix)
    rt = cast(ClusterRuntime, SimpleNamespace(state=state, deliveries=deliveries, leases=leases, settings=settings))
    assert tasks.sweep_deliveries(rt).missing == 1
    client.zadd(deliveries.keys.deliveries(), {"b": 0.0})
    record = Delivery.model_validate_json(cast(bytes, client.get(deliveries.keys.delivery("b"))))
    client.set(deliveries.keys.delivery("b"), record.model_copy(update={"missing_since": 1.0}).model_dump_json())
    # Another worker sweeping now: this one skips.
    token = leases.acquire(tasks.SWEEP_LEASE, 60)
    assert token is not None
    assert tasks.sweep_deliveries(rt).looked == 0
    leases.release(tasks.SWEEP_LEASE, token)
    swept = tasks.sweep_deliveries(rt)
    assert [d.args[0] for d in swept.given_up] == ["src"]
    letters = state.dead_letters("src")
    assert [(d.unit_id, d.stage, d.error) for d in letters] == [("a.md", "store", "Lost")]
    assert "sent 1 times" in letters[0].message and "replay" in letters[0].message
    assert deliveries.count() == 0


def test_monitoring_sees_a_batch_counted_and_short_arguments_as_they_are() -> None:
    changes = [{"unit_id": f"{n}.md", "action": "upsert", "version": "1"} for n in range(100)]
    assert args_repr(["src", changes, None]) == "['src', <100 items>, None]"
    assert args_repr(["e-1"]) == "['e-1']"
    shown = args_repr(["x" * 500, {"scope": {"kind": "source", "source_id": "s" * 500}}])
    assert len(shown) < 150 and shown.startswith("['xxx") and "..." in shown
