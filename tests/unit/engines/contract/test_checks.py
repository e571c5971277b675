"""Every `check()` refuses with the contract's exact message; errors, descriptor, exports."""

from __future__ import annotations

import types
from collections.abc import Callable
from datetime import UTC, date, datetime

import pytest

import engines.contract as contract
from engines.contract import (
    ConfigError,
    ConflictError,
    Conversation,
    Document,
    DocumentBody,
    EngineDescriptor,
    EngineError,
    EraseRequest,
    Error,
    ErrorKind,
    ExploreRequest,
    Facet,
    FetchMode,
    FetchRequest,
    ForgetTarget,
    GetRequest,
    Hit,
    InvalidRequestError,
    ItemKind,
    Learning,
    LearningKind,
    ListRequest,
    MemoryMeta,
    MetaFilter,
    Namespace,
    NotFoundError,
    Reach,
    RecallRequest,
    Role,
    TimeHint,
    Turn,
    UnauthorizedError,
    UnavailableError,
    UnsupportedError,
    error_for,
    validate_many,
)

HINT_BACKWARDS = TimeHint.model_validate({"from": "2026-10-05", "to": "2026-10-04"})
HINT_BAD_ZONE = TimeHint.model_validate({"from": "2026-10-04", "to": "2026-10-04", "zone": "Mars/Olympus"})

CHECK_VECTORS: list[tuple[object, str]] = [
    (Document(body=DocumentBody.of_text("  \n")), "document body must not be empty"),
    (
        Document(body=DocumentBody.of_uri("https://x")),
        "document body is an unresolved uri; resolve it through a source first",
    ),
    (Conversation(turns=[]), "conversation must have at least one turn"),
    (
        Conversation(turns=[Turn(role=Role.USER, text="hi"), Turn(role=Role.ASSISTANT, text=" ")]),
        "conversation turns must not be empty",
    ),
    (Learning(text=" ", kind=LearningKind.FACT, confidence=0.5), "learning text must not be empty"),
    (
        Learning(text="x", kind=LearningKind.FACT, confidence=1.5),
        "learning confidence 1.5 is outside 0.0..=1.0",
    ),
    (
        Learning(text="x", kind=LearningKind.FACT, confidence=-0.1),
        "learning confidence -0.1 is outside 0.0..=1.0",
    ),
    (
        Learning(text="x", kind=LearningKind.FACT, confidence=float("nan")),
        "learning confidence nan is outside 0.0..=1.0",
    ),
    (RecallRequest(question=" ", limit=1), "recall question must not be empty"),
    (RecallRequest(question="q", limit=0), "recall limit must be positive"),
    (
        RecallRequest(question="q", limit=1, refers_to=HINT_BACKWARDS),
        "refers_to runs backwards: 2026-10-05 is after 2026-10-04",
    ),
    (FetchRequest(query="", mode=FetchMode.KEYWORD, limit=1), "fetch query must not be empty"),
    (FetchRequest(query="q", mode=FetchMode.KEYWORD, limit=-1), "fetch limit must be positive"),
    (
        FetchRequest(query="q", mode=FetchMode.KEYWORD, limit=1, refers_to=HINT_BAD_ZONE),
        "refers_to zone `Mars/Olympus` is not a known time zone",
    ),
    (ListRequest(limit=0), "list limit must be positive"),
    (ForgetTarget.by_ids([]), "forget needs at least one id"),
    (ForgetTarget.by_filter(MetaFilter()), "forget refuses an empty filter, which would mean everything"),
    (ExploreRequest(facet=Facet.KIND, limit=0), "explore limit must be between 1 and 500"),
    (ExploreRequest(facet=Facet.KIND, limit=501), "explore limit must be between 1 and 500"),
    (
        ExploreRequest(facet=Facet.KIND, limit=1, scan_limit=0),
        "explore scan_limit must be between 1 and 50000",
    ),
    (
        ExploreRequest(facet=Facet.KIND, limit=1, scan_limit=50_001),
        "explore scan_limit must be between 1 and 50000",
    ),
    (GetRequest(ids=[]), "get takes between 1 and 200 ids"),
    (GetRequest(ids=["x"] * 201), "get takes between 1 and 200 ids"),
    (GetRequest(ids=["x", " "]), "get ids must not be blank"),
    (EraseRequest(reach=Reach.subtree(Namespace.ROOT)), "erasing the whole tree needs whole_tree: true"),
    (
        EraseRequest(reach=Reach(at=Namespace.ROOT, descendants=True), kinds=list(ItemKind)),
        "erasing the whole tree needs whole_tree: true",
    ),
]


@pytest.mark.parametrize(("request_", "message"), CHECK_VECTORS)
def test_check_refuses_with_the_contract_message(request_: object, message: str) -> None:
    check: Callable[[], None] = request_.check  # type: ignore[attr-defined]
    with pytest.raises(InvalidRequestError) as caught:
        check()
    assert caught.value.message == message
    assert str(caught.value) == f"invalid request: {message}"


VALID = [
    Document.from_text("x"),
    Conversation(turns=[Turn(role=Role.USER, text="hi")]),
    Learning(text="x", kind=LearningKind.FACT, confidence=0.0),
    Learning(text="x", kind=LearningKind.FACT, confidence=1.0),
    RecallRequest(question="q", limit=1),
    FetchRequest(query="q", mode=FetchMode.VECTOR, limit=10**9),
    ListRequest(limit=1),
    ForgetTarget.by_ids(["a"]),
    ForgetTarget.by_filter(MetaFilter(reach=Reach())),
    ExploreRequest(facet=Facet.TAG, limit=500, scan_limit=50_000),
    GetRequest(ids=["x"] * 200),
    EraseRequest(reach=Reach.subtree(Namespace.ROOT), whole_tree=True),
    EraseRequest(reach=Reach.subtree(Namespace.ROOT), kinds=[ItemKind.LEARNING]),
    EraseRequest(reach=Reach.of(Namespace.ROOT)),
]


@pytest.mark.parametrize("request_", VALID)
def test_check_accepts_valid_requests(request_: object) -> None:
    request_.check()  # type: ignore[attr-defined]


def test_validate_many() -> None:
    with pytest.raises(InvalidRequestError, match="store_many takes between 1 and 100 items"):
        validate_many([])
    with pytest.raises(InvalidRequestError, match="store_many takes between 1 and 100 items"):
        validate_many([Document.from_text("x")] * 101)
    with pytest.raises(InvalidRequestError, match="learning text must not be empty"):
        validate_many([Document.from_text("x"), Learning(text="", kind=LearningKind.FACT, confidence=1)])
    validate_many([Document.from_text("x")] * 100)


ERROR_TABLE = [
    (UnsupportedError, ErrorKind.UNSUPPORTED, "unsupported:", False),
    (InvalidRequestError, ErrorKind.INVALID_REQUEST, "invalid request:", False),
    (UnauthorizedError, ErrorKind.UNAUTHORIZED, "unauthorized:", False),
    (NotFoundError, ErrorKind.NOT_FOUND, "not found:", False),
    (ConflictError, ErrorKind.CONFLICT, "conflict:", False),
    (UnavailableError, ErrorKind.UNAVAILABLE, "unavailable:", True),
    (EngineError, ErrorKind.ENGINE, "engine error:", False),
    (ConfigError, ErrorKind.CONFIG, "configuration error:", False),
]


@pytest.mark.parametrize(("cls", "kind", "prefix", "transient"), ERROR_TABLE)
def test_error_kinds(cls: type[Error], kind: ErrorKind, prefix: str, transient: bool) -> None:
    err = cls("went wrong")
    assert isinstance(err, Error)
    assert (err.kind, err.prefix, err.message) == (kind, prefix, "went wrong")
    assert str(err) == f"{prefix} went wrong"
    assert err.is_transient() is transient
    assert err == cls("went wrong") and hash(err) == hash(cls("went wrong"))
    assert err != cls("other")
    assert error_for(kind, "went wrong") == err


def test_errors_of_different_classes_are_not_equal_and_survive_pickling() -> None:
    import pickle

    assert EngineError("x") != ConfigError("x")
    assert pickle.loads(pickle.dumps(UnavailableError("later"))) == UnavailableError("later")


def test_descriptor_ensure_mode() -> None:
    descriptor = EngineDescriptor(id="x", label="X", description="d", fetch_modes=(FetchMode.HYBRID,))
    assert descriptor.supports(FetchMode.HYBRID)
    assert not descriptor.supports(FetchMode.KEYWORD)
    descriptor.ensure_mode(FetchMode.HYBRID)
    with pytest.raises(UnsupportedError) as caught:
        descriptor.ensure_mode(FetchMode.KEYWORD)
    assert str(caught.value) == "unsupported: engine does not offer keyword fetch"


def test_time_hint_matches_in_its_zone_and_ranks_stably() -> None:
    hint = TimeHint(from_=date(2026, 10, 4), to=date(2026, 10, 4), zone="Asia/Tokyo")
    assert hint.matches(datetime(2026, 10, 3, 15, 0, tzinfo=UTC))  # 00:00 on the 4th in Tokyo
    assert not hint.matches(datetime(2026, 10, 3, 14, 59, tzinfo=UTC))

    def hit(name: str, seen: datetime | None) -> Hit:
        return Hit(id=name, kind=ItemKind.DOCUMENT, text=name, meta=MemoryMeta(observed_at=seen))

    inside = datetime(2026, 10, 4, 1, tzinfo=UTC)
    hits = [hit("a", None), hit("b", inside), hit("c", datetime(2020, 1, 1, tzinfo=UTC)), hit("d", inside)]
    assert [h.id for h in hint.rank(hits)] == ["b", "d", "a", "c"]


def test_render_text() -> None:
    assert Document.from_text("body", title="T").render_text() == "# T\n\nbody"
    assert Document.from_text("body", title="  ").render_text() == "body"
    assert Document(body=DocumentBody.of_uri("https://x")).render_text() == "https://x"
    convo = Conversation.model_validate(
        {
            "turns": [
                {"role": "user", "text": "hi"},
                {
                    "role": "assistant",
                    "text": "yo",
                    "tool_calls": [{"name": "read_config", "id": "call_1"}, {"name": "grep"}],
                },
            ]
        }
    )
    assert convo.render_text() == "user: hi\nassistant: yo [tools: read_config (call_1), grep]"
    learning = Learning(text="t", kind=LearningKind.FACT, confidence=0.5)
    assert learning.render_text() == "t"
    assert learning.confidence_value() == 0.5
    assert Document.from_text("x").confidence_value() is None
    assert [i.item_kind for i in (Document.from_text("x"), convo, learning)] == list(ItemKind)


def test_memory_meta_from_source() -> None:
    meta = MemoryMeta.from_source(contract.SourceKind.FOLDER, "notes")
    assert meta.model_dump(mode="json") == {"source": {"kind": "folder", "id": "notes"}}


def _isort_key(name: str) -> tuple[int, str]:
    # ruff's RUF022 order: CONSTANTS, then Classes, then functions.
    if name.isupper():
        return (0, name)
    return (1, name) if name[0].isupper() else (2, name)


def test_contract_all_is_complete_and_sorted() -> None:
    # The package's inner modules are attributes of it once imported; they are not its public surface.
    public = {
        name
        for name, value in vars(contract).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(contract.__all__) == public
    assert contract.__all__ == sorted(contract.__all__, key=_isort_key)


def test_limits() -> None:
    assert (contract.MAX_STORE_MANY, contract.MAX_GET_IDS, contract.MAX_BUCKETS) == (100, 200, 500)
    assert (contract.MAX_SCAN_LIMIT, contract.DEFAULT_SCAN_LIMIT, contract.LISTING_PAGE) == (
        50_000,
        5_000,
        200,
    )
    assert (contract.MAX_DEPTH, contract.MAX_SEGMENT_ID, contract.ROOT_LABEL) == (8, 128, "root")


def test_enum_orders_follow_the_contract() -> None:
    assert [k.value for k in contract.SourceKind] == [
        "folder",
        "file",
        "link",
        "github",
        "rss",
        "conversation",
        "agent",
        "import",
    ]
    assert [m.value for m in FetchMode] == ["keyword", "vector", "hybrid"]
    assert [k.prefix for k in contract.SegmentKind] == [
        "agent",
        "team",
        "user",
        "ws",
        "project",
        "source",
        "service",
    ]
