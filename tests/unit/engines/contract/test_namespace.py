"""Namespaces and reach: parsing, sanitising, the worked admits table and the `within` truth table."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engines.contract import (
    InvalidRequestError,
    MemoryMeta,
    Namespace,
    Reach,
    Segment,
    SegmentKind,
)

P = Namespace.parse
R = Namespace.ROOT
T = P("team:acme")
W = P("team:acme/agent:writer")
H = P("team:acme/agent:writer/agent:drafter")
E = P("team:acme/agent:editor")
S = P("team:acme/service:flow")
B = P("team:acme/service:flow/agent:bot")
D = P("/".join(f"agent:d{i}" for i in range(8)))
TREE = {"R": R, "T": T, "W": W, "H": H, "E": E, "S": S, "B": B}


def both(at: Namespace) -> Reach:
    return Reach(at=at, inherit=True, descendants=True)


# docs/spec/contract.md §10.3
ADMITS_TABLE = [
    (Reach.of(W), "RTW"),
    (Reach.of(E), "RTE"),
    (Reach.exact(W), "W"),
    (Reach.of(H), "RTWH"),
    (Reach.subtree(W), "WH"),
    (Reach.subtree(T), "TWHE"),
    (both(T), "RTWHE"),
    (Reach.of(R), "R"),
    (Reach(), "R"),
    (Reach.subtree(R), "RTWHE"),
    (Reach.exact(S), "S"),
    (Reach.subtree(S), "SB"),
    (Reach.of(B), "RTSB"),
]


@pytest.mark.parametrize(("reach", "admitted"), ADMITS_TABLE)
def test_reach_admits_table(reach: Reach, admitted: str) -> None:
    assert "".join(name for name, ns in TREE.items() if reach.admits(ns)) == admitted


def test_no_reach_reads_the_root_subtree_without_sandboxes() -> None:
    assert "".join(name for name, ns in TREE.items() if Reach.admitted_by(None, ns)) == "RTWHE"


# docs/spec/contract.md §10.4
WITHIN_TABLE = [
    (Reach.exact(W), Reach.of(W), True),
    (Reach.of(W), Reach.of(W), True),
    (Reach.of(W), Reach.exact(W), False),
    (Reach.exact(T), Reach.of(W), True),
    (Reach.of(H), Reach.of(W), False),
    (Reach.of(E), Reach.of(W), False),
    (Reach.subtree(H), Reach.subtree(W), True),
    (Reach.subtree(W), Reach.of(W), False),
    (Reach.subtree(W), Reach.subtree(H), False),
    (both(W), Reach.subtree(T), False),
    (both(W), both(R), True),
    (Reach.of(T), Reach.subtree(R), True),
    (Reach.exact(S), Reach.subtree(T), False),
    (Reach.exact(S), Reach.subtree(S), True),
    (Reach.of(S), Reach.subtree(S), False),
    (Reach.subtree(D), Reach.exact(D), True),
    (Reach.subtree(R), Reach.subtree(R), True),
]


@pytest.mark.parametrize(("reach", "outer", "expected"), WITHIN_TABLE)
def test_within_truth_table(reach: Reach, outer: Reach, expected: bool) -> None:
    assert reach.within(outer) is expected


def test_nodes_without_discovery() -> None:
    assert Reach.of(W).nodes() == [R, T, W]
    assert Reach.exact(W).nodes() == [W]
    assert Reach.subtree(T).nodes() == [T]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("agent", "namespace segment `agent` must be written kind:id"),
        ("robot:x", "`robot` is not a namespace segment kind"),
        ("workspace:x", "`workspace` is not a namespace segment kind"),
        ("agent:", "namespace id `` must be 1 to 128 characters of A-Z, a-z, 0-9, `_` or `-`"),
        ("agent:a.b", "namespace id `a.b` must be 1 to 128 characters of A-Z, a-z, 0-9, `_` or `-`"),
        ("agent:a/", "namespace segment `` must be written kind:id"),
        ("agent:a//agent:b", "namespace segment `` must be written kind:id"),
        ("/".join(["agent:a"] * 9), "a namespace nests at most 8 deep"),
        (
            "agent:" + "x" * 129,
            "namespace id `" + "x" * 129 + "` must be 1 to 128 characters of A-Z, a-z, 0-9, `_` or `-`",
        ),
    ],
)
def test_parse_refusals(text: str, message: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        Namespace.parse(text)
    assert caught.value.message == message


def test_parse_accepts_root_forms_and_strips() -> None:
    assert Namespace.parse("") == R
    assert Namespace.parse("  root ") == R
    assert str(R) == "root"
    assert str(Namespace.parse(" ws:acme/agent:a ")) == "ws:acme/agent:a"
    assert Namespace.parse("ws:acme").segments[0].kind is SegmentKind.WORKSPACE


def test_bad_namespace_inside_a_model_is_a_validation_error_with_the_message() -> None:
    with pytest.raises(ValidationError, match="is not a namespace segment kind"):
        MemoryMeta.model_validate({"namespace": "robot:x"})


def test_tree_navigation() -> None:
    assert H.parent() == W
    assert R.parent() is None
    assert H.ancestors() == [R, T, W]
    assert H.ancestors_and_self() == [R, T, W, H]
    assert H.is_within(T) and H.is_within(H) and H.is_within(R)
    assert not T.is_within(H)
    assert not P("team:acmex").is_within(T)
    assert T.child(Segment(SegmentKind.AGENT, "writer")) == W
    with pytest.raises(InvalidRequestError, match="at most 8 deep"):
        D.child(Segment(SegmentKind.AGENT, "x"))


def test_shared_ancestor_skips_agents() -> None:
    assert P("agent:a/agent:b").shared_ancestor() == R
    assert W.shared_ancestor() == T
    assert B.shared_ancestor() == S


def test_segment_refuses_bad_ids_and_prints_its_prefix() -> None:
    with pytest.raises(InvalidRequestError):
        Segment(SegmentKind.AGENT, "a b")
    assert str(Segment(SegmentKind.WORKSPACE, "acme")) == "ws:acme"
    assert Segment.model_validate({"kind": "workspace", "id": "acme"}) == Segment(SegmentKind.WORKSPACE, "acme")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("writer", "writer"),
        ("o'neil@acme.com", "o-neil-acme-com-c5acae54"),
        ("a.b", "a-b-108bf50c"),
        ("", "_"),
        ("é" * 300, "-" * 119 + "-2748e235"),
    ],
)
def test_sanitized_examples(raw: str, expected: str) -> None:
    assert Segment.sanitized(SegmentKind.AGENT, raw).id == expected


def test_sanitized_constructors() -> None:
    assert str(Namespace.agent("a.b")) == "agent:a-b-108bf50c"
    assert str(Namespace.source("notes")) == "source:notes"
    assert Segment.sanitized(SegmentKind.AGENT, "a.b") != Segment.sanitized(SegmentKind.AGENT, "a_b")
