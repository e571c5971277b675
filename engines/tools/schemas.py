"""The frozen descriptions and JSON Schemas of the seven tools (docs/spec/tools-and-context.md §7), word for word.

Models see these texts, and a fixture test freezes them: change one only on purpose, and bless the
fixture again. Every builder returns new dicts, so a caller may change what it gets without harm.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engines.contract import Facet, FetchMode, ItemKind, LearningKind, Role, SourceKind
from engines.tools.names import (
    MEMORY_EXPLORE,
    MEMORY_FETCH,
    MEMORY_FORGET,
    MEMORY_GET,
    MEMORY_LIST,
    MEMORY_RECALL,
    MEMORY_STORE,
)

JsonObject = dict[str, Any]
"""A decoded JSON object: tool arguments, and the schemas that describe them."""

LIMIT_MAX = 50
LIMIT_DEFAULT = 10
IDS_MAX = 200
CONFIDENCE_DEFAULT = 0.8

DESCRIPTIONS: dict[str, str] = {
    MEMORY_RECALL: "Ask long-term memory a question and get back a written answer together with the memories it "
    "relied on. Reach for this first whenever you need to know what has been remembered about a subject. If the "
    "question concerns a particular time, fill in `refers_to`.",
    MEMORY_FETCH: "Search long-term memory and get the matching memories themselves, best match first, without a "
    "written answer. Use it when you need the stored wording. To see more, pass the `next_cursor` you were given "
    "back as `cursor`. If the search concerns a particular time, fill in `refers_to`.",
    MEMORY_LIST: "Walk through stored memories without a search query, optionally narrowed by a filter. To see "
    "more, pass the `next_cursor` you were given back as `cursor`.",
    MEMORY_GET: "Read whole memories by id; ids come from recall citations and from fetch and list results. An id "
    "that names no memory you can see is reported under `missing`.",
    MEMORY_EXPLORE: "Count stored memories for each value of one facet (for example kind, source, folder, thread "
    "or tag), largest group first, to learn what memory holds before narrowing a filter.",
    MEMORY_STORE: "Save one memory. Give exactly one of `learning` (a short distilled statement worth keeping, such "
    "as a preference, fact, procedure or correction), `document` (a text, optionally titled) or `conversation` "
    "(turns in order). Saving the same memory again does no harm.",
    MEMORY_FORGET: "Delete memories, either by `ids` or by a `filter` that sets at least one field, never both. Ids "
    "you cannot see are left alone and reported under `skipped`.",
}

_READ_FILTER = "Limits which memories are considered; every field you set must match."
_FORGET_FILTER = "Deletes every memory this filter matches; set at least one field."
_REFERS_TO = (
    "The local calendar days the request is about, worked out from the current date and time you were given. "
    'Fill it in whenever the request names or implies a time, in any language (for example "yesterday", '
    '"last Saturday", "in March"). For a single day, make `from` equal to `to`. When a word could point to the '
    "past or to the future, cover both days. Prefer this to `filter.observed_after` and `filter.observed_before`: "
    "those drop every memory recorded on other days, while this only ranks the matching days first."
)
_MODE = (
    "Ranking method: `keyword` matches words, `vector` matches meaning, `hybrid` combines both. Only the methods "
    "this memory supports are listed."
)
# The facets a model may group by: every one but `namespace`, which the host alone decides about.
_MODEL_FACETS: tuple[str, ...] = tuple(f.value for f in Facet if f is not Facet.NAMESPACE)


def _text(description: str) -> JsonObject:
    return {"description": description, "type": "string"}


def _time(description: str) -> JsonObject:
    return {"description": description, "format": "date-time", "type": "string"}


def _choice(values: Sequence[str], description: str | None = None) -> JsonObject:
    schema: JsonObject = {"enum": list(values), "type": "string"}
    return schema if description is None else {"description": description, **schema}


def _strings(description: str, items: JsonObject | None = None) -> JsonObject:
    return {"description": description, "items": items or {"type": "string"}, "type": "array"}


def _object(properties: JsonObject, required: Sequence[str] = (), description: str | None = None) -> JsonObject:
    schema: JsonObject = {"additionalProperties": False}
    if description is not None:
        schema["description"] = description
    schema["properties"] = properties
    if required:
        schema["required"] = list(required)
    schema["type"] = "object"
    return schema


def filter_schema(description: str = _READ_FILTER) -> JsonObject:
    """The filter object every read tool takes (and forget, under another description)."""
    return _object(
        {
            "agent_id": _text("Only memories produced by this exact agent id."),
            "file_path": _text("Only memories from this file path, or from paths below it."),
            "folder": _text("Only memories from this folder, or from folders below it."),
            "kinds": _strings(
                "Only memories of these kinds; leave it empty for every kind.", _choice([k.value for k in ItemKind])
            ),
            "observed_after": _time("Only memories observed at or after this RFC 3339 time."),
            "observed_before": _time("Only memories observed strictly before this RFC 3339 time."),
            "repo": _text("Only memories from this exact code project, written `owner/name` or as its remote URL."),
            "sources": _strings(
                "Only memories that came from these kinds of source; leave it empty for every source.",
                _choice([s.value for s in SourceKind]),
            ),
            "tags_any": _strings("Only memories that carry at least one of these tags."),
            "thread_id": _text("Only memories from this exact conversation thread."),
            "url": _text("Only memories read from this exact URL."),
            "workspace": _text("Only memories from this exact workspace."),
        },
        description=description,
    )


def _refers_to() -> JsonObject:
    days = {
        "from": _text("First local day covered, written YYYY-MM-DD."),
        "to": _text("Last local day covered, written YYYY-MM-DD; it is included."),
    }
    return _object(days, ["from", "to"], _REFERS_TO)


def _limit(description: str) -> JsonObject:
    return {
        "default": LIMIT_DEFAULT,
        "description": description,
        "maximum": LIMIT_MAX,
        "minimum": 1,
        "type": "integer",
    }


def _ids(description: str) -> JsonObject:
    return {**_strings(description), "maxItems": IDS_MAX, "minItems": 1}


def _cursor() -> JsonObject:
    return _text("The `next_cursor` of an earlier result, to continue where it stopped.")


def _recall() -> JsonObject:
    return _object(
        {
            "filter": filter_schema(),
            "instructions": _text("Optional guidance for the answer, such as its length, format or focus."),
            "limit": _limit("Upper bound on how many memories the answer may cite."),
            "question": _text("What you want to know, in plain language."),
            "refers_to": _refers_to(),
        },
        ["question"],
    )


def default_mode(modes: Sequence[FetchMode]) -> FetchMode:
    """The mode a fetch without one uses: hybrid when served, else the first served (`modes` not empty)."""
    return FetchMode.HYBRID if FetchMode.HYBRID in modes else modes[0]


def _fetch(modes: Sequence[FetchMode]) -> JsonObject:
    mode = {"default": default_mode(modes).value, **_choice([m.value for m in modes], _MODE)}
    return _object(
        {
            "cursor": _cursor(),
            "filter": filter_schema(),
            "limit": _limit("Upper bound on how many memories come back."),
            "mode": mode,
            "query": _text("The words or idea to search for."),
            "refers_to": _refers_to(),
        },
        ["query"],
    )


def _list() -> JsonObject:
    return _object(
        {
            "cursor": _cursor(),
            "filter": filter_schema(),
            "limit": _limit("Upper bound on how many memories come back."),
        }
    )


def _get() -> JsonObject:
    return _object({"ids": _ids("Ids of the memories to read.")}, ["ids"])


def _explore() -> JsonObject:
    return _object(
        {
            "facet": _choice(_MODEL_FACETS, "The property to group memories by."),
            "filter": filter_schema(),
            "limit": _limit("Upper bound on how many values come back."),
        },
        ["facet"],
    )


def _learning() -> JsonObject:
    kinds = {
        "default": LearningKind.FACT.value,
        **_choice([k.value for k in LearningKind], "Which sort of statement this is."),
    }
    confidence = {
        "default": CONFIDENCE_DEFAULT,
        "description": "How certain the statement is, from 0 to 1.",
        "maximum": 1.0,
        "minimum": 0.0,
        "type": "number",
    }
    properties = {
        "confidence": confidence,
        "evidence": _text("What the statement rests on."),
        "learning_kind": kinds,
        "text": _text("The statement itself, specific and understandable on its own."),
    }
    return _object(properties, ["text"], "A short, distilled statement worth keeping.")


def _conversation() -> JsonObject:
    turn = _object(
        {
            "role": _choice([r.value for r in Role], "Who is speaking."),
            "text": _text("What that speaker said."),
        },
        ["role", "text"],
    )
    turns = {"description": "The turns, oldest first.", "items": turn, "minItems": 1, "type": "array"}
    return _object({"turns": turns}, ["turns"], "A dialogue worth keeping.")


def _store() -> JsonObject:
    document = {
        "text": _text("The body of the text, usually markdown."),
        "title": _text("An optional title for the text."),
    }
    return _object(
        {
            "conversation": _conversation(),
            "document": _object(document, ["text"], "A text worth keeping whole."),
            "learning": _learning(),
            "tags": _strings("Free-form labels to file the memory under."),
        }
    )


def _forget() -> JsonObject:
    return _object({"filter": filter_schema(_FORGET_FILTER), "ids": _ids("Ids of the memories to delete.")})


_BUILDERS: dict[str, Callable[[], JsonObject]] = {
    MEMORY_RECALL: _recall,
    MEMORY_LIST: _list,
    MEMORY_GET: _get,
    MEMORY_EXPLORE: _explore,
    MEMORY_STORE: _store,
    MEMORY_FORGET: _forget,
}


def parameters(name: str, modes: Sequence[FetchMode]) -> JsonObject:
    """The parameter schema of tool `name`; `modes` (the engine's, in `FetchMode` order) shape `memory_fetch`."""
    return _fetch(modes) if name == MEMORY_FETCH else _BUILDERS[name]()
