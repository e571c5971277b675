"""Namespaces: the tree of memory nodes, and `Reach`, the set of nodes a read may see.

A namespace is written `team:acme/agent:writer`; the root prints `root`. A `service` node is a
sandbox: a read of everything below a node never enters one (docs/spec/contract.md §9, §10).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any, ClassVar

from pydantic import ConfigDict, GetCoreSchemaHandler, GetJsonSchemaHandler, field_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from engines.contract.enums import SegmentKind
from engines.contract.errors import InvalidRequestError
from engines.contract.serialization import Text, WireModel

MAX_DEPTH = 8
MAX_SEGMENT_ID = 128
ROOT_LABEL = "root"

_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,128}")
_SANITIZED_KEEP = 119
_TOO_DEEP = "a namespace nests at most 8 deep"


def _id_problem(segment_id: str) -> str | None:
    if _ID_PATTERN.fullmatch(segment_id):
        return None
    return f"namespace id `{segment_id}` must be 1 to 128 characters of A-Z, a-z, 0-9, `_` or `-`"


def _fnv1a32(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


class Segment(WireModel):
    """One step of a namespace path: a kind and an id of 1..128 characters of `[A-Za-z0-9_-]`."""

    model_config = ConfigDict(frozen=True)

    kind: SegmentKind
    id: Text

    def __init__(self, kind: SegmentKind | str, id: str) -> None:
        problem = _id_problem(id) if isinstance(id, str) else None
        if problem:
            raise InvalidRequestError(problem)
        super().__init__(kind=kind, id=id)

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        problem = _id_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    def __str__(self) -> str:
        return f"{self.kind.prefix}:{self.id}"

    @classmethod
    def sanitized(cls, kind: SegmentKind, raw: str) -> Segment:
        """Map any host id onto the id charset; distinct inputs never share an id (but `""` and `_`)."""
        if _id_problem(raw) is None:
            return cls(kind, raw)
        if raw == "":
            return cls(kind, "_")
        cleaned = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "-" for c in raw)
        digest = _fnv1a32(raw.encode("utf-8", "surrogatepass"))
        return cls(kind, f"{cleaned[:_SANITIZED_KEEP]}-{digest:08x}")


class Namespace:
    """An immutable path of segments; the empty path is the root. Hashable, ordered by its text."""

    __slots__ = ("_segments", "_text")
    ROOT: ClassVar[Namespace]

    def __init__(self, segments: Iterable[Segment] = ()) -> None:
        parts = tuple(segments)
        if len(parts) > MAX_DEPTH:
            raise InvalidRequestError(_TOO_DEEP)
        self._segments = parts
        self._text = "/".join(str(s) for s in parts) or ROOT_LABEL

    @classmethod
    def parse(cls, text: str) -> Namespace:
        """Read a path (`team:acme/agent:writer`, `root` or empty); a bad one is InvalidRequestError."""
        return _parse(text.strip())

    @classmethod
    def agent(cls, raw: str) -> Namespace:
        return cls((Segment.sanitized(SegmentKind.AGENT, raw),))

    @classmethod
    def source(cls, raw: str) -> Namespace:
        return cls((Segment.sanitized(SegmentKind.SOURCE, raw),))

    @property
    def segments(self) -> tuple[Segment, ...]:
        return self._segments

    @property
    def depth(self) -> int:
        return len(self._segments)

    @property
    def is_root(self) -> bool:
        return not self._segments

    def child(self, segment: Segment) -> Namespace:
        return Namespace((*self._segments, segment))

    def parent(self) -> Namespace | None:
        return None if self.is_root else Namespace(self._segments[:-1])

    def ancestors(self) -> list[Namespace]:
        """Proper ancestors, root first."""
        return [Namespace(self._segments[:n]) for n in range(len(self._segments))]

    def ancestors_and_self(self) -> list[Namespace]:
        return [*self.ancestors(), self]

    def is_within(self, other: Namespace) -> bool:
        """True when `other` is this node or one of its ancestors."""
        depth = len(other._segments)
        return self._segments[:depth] == other._segments

    def shared_ancestor(self) -> Namespace:
        """The nearest node at or above this one whose last segment is not an agent."""
        parts = self._segments
        while parts and parts[-1].kind is SegmentKind.AGENT:
            parts = parts[:-1]
        return Namespace(parts)

    def __iter__(self) -> Iterator[Segment]:
        return iter(self._segments)

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Namespace({self._text!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Namespace):
            return NotImplemented
        return self._segments == other._segments

    def __hash__(self) -> int:
        return hash(self._segments)

    def __lt__(self, other: Namespace) -> bool:
        return self._text < other._text

    @classmethod
    def _coerce(cls, value: object) -> Namespace:
        if isinstance(value, Namespace):
            return value
        if isinstance(value, str):
            try:
                return cls.parse(value)
            except InvalidRequestError as err:
                raise ValueError(err.message) from None
        raise ValueError("a namespace is written as a path string such as `team:acme/agent:writer`")

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls._coerce,
            serialization=core_schema.plain_serializer_function_ser_schema(str, when_used="json"),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string", "examples": ["root", "team:acme/agent:writer"]}


Namespace.ROOT = Namespace()


@lru_cache(maxsize=4096)
def _parse(text: str) -> Namespace:
    # Namespaces are immutable, so a parsed path can be shared by every item that names it.
    if text in ("", ROOT_LABEL):
        return Namespace.ROOT
    parts = text.split("/")
    if len(parts) > MAX_DEPTH:
        raise InvalidRequestError(_TOO_DEEP)
    return Namespace(_parse_segment(part) for part in parts)


def _parse_segment(part: str) -> Segment:
    prefix, colon, segment_id = part.partition(":")
    if not colon:
        raise InvalidRequestError(f"namespace segment `{part}` must be written kind:id")
    kind = SegmentKind.from_prefix(prefix)
    if kind is None:
        raise InvalidRequestError(f"`{prefix}` is not a namespace segment kind")
    return Segment(kind, segment_id)


class Reach(WireModel):
    """The nodes a read may see: `at`, its ancestors when `inherit`, the nodes below when `descendants`.

    A descendant read never enters a `service` sandbox below `at`; a sibling is never admitted.
    """

    model_config = ConfigDict(frozen=True)

    at: Namespace = Namespace.ROOT
    inherit: bool = True
    descendants: bool = False

    @classmethod
    def of(cls, at: Namespace) -> Reach:
        """`at` and every ancestor: what an agent shares with its team and the root."""
        return cls(at=at, inherit=True, descendants=False)

    @classmethod
    def exact(cls, at: Namespace) -> Reach:
        return cls(at=at, inherit=False, descendants=False)

    @classmethod
    def subtree(cls, at: Namespace) -> Reach:
        """`at` and every node below it, except sandboxes below it."""
        return cls(at=at, inherit=False, descendants=True)

    def admits(self, ns: Namespace) -> bool:
        at = self.at.segments
        held = ns.segments
        if held == at:
            return True
        if len(held) < len(at):
            return self.inherit and at[: len(held)] == held
        if not self.descendants or held[: len(at)] != at:
            return False
        return all(s.kind is not SegmentKind.SERVICE for s in held[len(at) :])

    @staticmethod
    def admitted_by(reach: Reach | None, ns: Namespace) -> bool:
        """`reach.admits(ns)`; no reach means the root's subtree (every node but sandboxes)."""
        return (reach or _ROOT_SUBTREE).admits(ns)

    def within(self, outer: Reach) -> bool:
        """True when every namespace this reach can admit, `outer` admits too."""
        if not outer.admits(self.at):
            return False
        if self.inherit and not all(outer.admits(a) for a in self.at.ancestors()):
            return False
        # At maximum depth no descendant can exist, so `descendants` widens nothing there.
        return not (
            self.descendants
            and self.at.depth < MAX_DEPTH
            and (not outer.descendants or not self.at.is_within(outer.at))
        )

    def nodes(self) -> list[Namespace]:
        """The nodes the reach names without discovery: `at` and, when `inherit`, its ancestors."""
        return self.at.ancestors_and_self() if self.inherit else [self.at]


_ROOT_SUBTREE = Reach.subtree(Namespace.ROOT)
