"""Forget by `memory_ids` and erase by scope, on both wires."""

from __future__ import annotations

import pytest

from engines.contract import (
    Conversation,
    EraseRequest,
    ForgetTarget,
    InvalidRequestError,
    ItemKind,
    Learning,
    LearningKind,
    ListRequest,
    MemoryMeta,
    MetaFilter,
    Namespace,
    Reach,
    Role,
    Turn,
    UnsupportedError,
)
from tests.fixtures.cortex_double import Served, served

NODE = Namespace.parse("team:erased")
CHILD = Namespace.parse("team:erased/agent:child")
SANDBOX = Namespace.parse("team:erased/service:flow")
SIBLING = Namespace.parse("team:kept")


def fact(text: str, namespace: Namespace = Namespace.ROOT, tags: list[str] | None = None) -> Learning:
    return Learning(
        text=text, kind=LearningKind.FACT, confidence=0.5, meta=MemoryMeta(namespace=namespace, tags=tags or [])
    )


async def listed(server: Served) -> list[str]:
    async with server.engine() as engine:
        page = await engine.list(ListRequest(filter=MetaFilter(reach=Reach.subtree(Namespace.ROOT)), limit=100))
        return sorted(hit.text for hit in page.items)


async def test_forget_by_ids_names_events_everywhere_and_counts_items(either: Served) -> None:
    talk = Conversation(turns=[Turn(role=Role.USER, text=f"turn {n}") for n in range(3)])
    hidden = fact("in a sandbox", SANDBOX)
    async with either.engine() as engine:
        await engine.store_many([talk, hidden, fact("stays")])
        mark = either.mark()
        report = await engine.forget(ForgetTarget.by_ids([talk.fingerprint(), hidden.fingerprint(), "unknown"]))
        assert report.forgotten == 2
        forgets = [r.body for r in either.double.requests[mark:] if r.path.endswith("forget")]
        assert len(forgets) == 2
        for body in forgets:
            assert body["cascade"] == "redact_events" and body["audit_note"] == "tinymemory: forget"
            assert body["layers"] == ["events"] and list(body["selector"]) == ["memory_ids"]
            assert "confirm_all" not in body
        assert sorted(len(b["selector"]["memory_ids"]) for b in forgets) == [1, 3]
        assert (await engine.forget(ForgetTarget.by_ids([talk.fingerprint()]))).forgotten == 0
        # A forget by memory_ids releases the events' keys: storing the item again writes it anew.
        receipt = await engine.store(talk)
        assert not receipt.replayed
    assert sorted(r.content["text"] for r in either.double.events()) == ["stays", "turn 0", "turn 1", "turn 2"]


async def test_forget_by_filter_removes_only_what_it_matches_and_never_sends_an_empty_selector(either: Served) -> None:
    async with either.engine() as engine:
        await engine.store_many([fact(f"drop {n}", tags=["drop"]) for n in range(100)])
        await engine.store_many(
            [fact(f"drop {n}", tags=["drop"]) for n in range(100, 120)] + [fact("keep", tags=["keep"])]
        )
        mark = either.mark()
        assert (await engine.forget(ForgetTarget.by_filter(MetaFilter(tags_any=["drop"])))).forgotten == 120
        batches = [
            len(r.body["selector"]["memory_ids"]) for r in either.double.requests[mark:] if r.path.endswith("forget")
        ]
        assert batches == [100, 20]
        mark = either.mark()
        assert (await engine.forget(ForgetTarget.by_filter(MetaFilter(tags_any=["none"])))).forgotten == 0
        assert not any(r.path.endswith("forget") for r in either.double.requests[mark:])
        with pytest.raises(InvalidRequestError):
            await engine.forget(ForgetTarget.by_filter(MetaFilter()))
    assert await listed(either) == ["keep"]


async def test_hosted_forget_retries_what_is_transient(hosted: Served) -> None:
    async with hosted.engine() as engine:
        await engine.store(fact("short lived"))
        hosted.double.faults.fail_next(1, match="memory/forget")
        assert (await engine.forget(ForgetTarget.by_filter(MetaFilter(kinds=[ItemKind.LEARNING])))).forgotten == 1
    claims = [r.headers.get("idempotency-key") for r in hosted.double.requests if r.path == "memory/forget"]
    assert len(claims) == 2 and claims[0] != claims[1]  # a fresh claim on every attempt


async def _erasable(server: Served) -> None:
    async with server.engine() as engine:
        await engine.store_many(
            [
                fact("node fact", NODE),
                fact("child fact", CHILD),
                fact("sandbox fact", SANDBOX),
                fact("sibling fact", SIBLING),
            ]
        )


async def test_erase_removes_a_node_and_everything_below_and_keeps_the_sibling(either: Served) -> None:
    await _erasable(either)
    async with either.engine() as engine:
        with pytest.raises(InvalidRequestError, match="whole_tree: true"):
            await engine.erase(EraseRequest(reach=Reach.subtree(Namespace.ROOT)))
        mark = either.mark()
        report = await engine.erase(EraseRequest(reach=Reach.subtree(NODE)))
        assert report.erased_scopes == 3
        sent = [r.body for r in either.double.requests[mark:] if r.path.endswith("erasures")]
        assert [body["scope"].count("/") for body in sent] == [3, 3, 2]  # deepest first, each kind scope alone
        assert all(body["audit_note"] == "tinymemory: erase" for body in sent)
        assert all(body.get("confirm_all") is (None if either.wire.hosted else True) for body in sent)
        assert len(report.receipts) == 3
        # Erase is deletion: storing an erased item again is new, never a replay.
        assert not (await engine.store(fact("node fact", NODE))).replayed
    assert await listed(either) == ["node fact", "sibling fact"]


async def test_erase_of_one_kind_at_one_node(direct: Served) -> None:
    await _erasable(direct)
    async with direct.engine() as engine:
        report = await engine.erase(EraseRequest(reach=Reach.exact(NODE), kinds=[ItemKind.LEARNING]))
        assert report.erased_scopes == 1
    assert await listed(direct) == ["child fact", "sibling fact"]


async def test_a_running_erasure_is_polled_until_done() -> None:
    with served("direct", erasure_polls_before_done=2) as direct:
        await _erasable(direct)
        async with direct.engine() as engine:
            report = await engine.erase(EraseRequest(reach=Reach.exact(SIBLING)))
        polls = [r for r in direct.double.requests if r.method == "GET" and r.path.startswith("v1/erasures/")]
        assert (
            len(polls) == 3
            and [r.status for r in polls] == [200] * 3
            and report.receipts == [polls[0].path.rpartition("/")[2]]
        )


async def test_the_whole_tree_on_the_hosted_wire_is_one_delete(hosted: Served) -> None:
    await _erasable(hosted)
    async with hosted.engine() as engine:
        report = await engine.erase(EraseRequest(reach=Reach.subtree(Namespace.ROOT), whole_tree=True))
    assert report.erased_scopes == 4 and report.receipts == []
    assert [r.method for r in hosted.double.requests if r.path == "memory"] == ["DELETE"]
    assert hosted.double.events() == []


async def test_hosted_erasures_retry_only_an_incomplete_one(hosted: Served) -> None:
    await _erasable(hosted)
    hosted.double.faults.erasure_incomplete(2)
    async with hosted.engine() as engine:
        report = await engine.erase(EraseRequest(reach=Reach.exact(SIBLING)))
        assert report.erased_scopes == 1
        hosted.double.faults.erasure_incomplete(3)
        with pytest.raises(Exception, match="502"):
            await engine.erase(EraseRequest(reach=Reach.exact(NODE)))


async def test_a_server_without_erasures_is_unsupported(direct: Served) -> None:
    await _erasable(direct)
    direct.double.faults.fail_next(1, status=404, code="NOT_FOUND", match="v1/erasures")
    async with direct.engine() as engine:
        with pytest.raises(UnsupportedError):
            await engine.erase(EraseRequest(reach=Reach.exact(SIBLING)))
