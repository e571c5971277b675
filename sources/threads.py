"""Conversation threads as files: the four formats a conversation source reads, parsed into turns.

Pure functions over bytes already read. A file holds a docs/spec/sources-and-documents.md §8.1 thread JSON object
(`{"title"?, "messages": [{"role", "content", "created_at" | "timestamp" | "at"?, "tool_calls"?: [{"name", "id"?}]}]}`)
or JSON lines of such messages (one thread each), or a ChatGPT or Claude `conversations.json` export (a list of
conversations). Of a ChatGPT conversation's tree of messages (`mapping`) only the branch ending at `current_node` is the
thread: the other branches are edits and regenerations the person moved away from. The format is told from the content
(only a `.jsonl` name promises JSON lines); anything else is refused naming the file. An export's conversations are kept
as compact JSON, each with a version hashed from it: smaller than the parsed tree, and enough to tell which threads
changed without making their turns.

A message of an unknown role (`ROLES`) is dropped (docs/spec/sources-and-documents.md §8.1), as is one without text
unless it called tools (its text is then the calls). A timestamp that cannot be read leaves its turn without a time.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final

from engines.contract import InvalidRequestError, Role, ToolCallRef, Turn, as_utc

ROLES: Final[Mapping[str, Role]] = {
    name: role
    for role, names in (
        (Role.USER, ("user", "human")),
        (Role.ASSISTANT, ("assistant", "agent", "ai", "bot", "model")),
        (Role.SYSTEM, ("system", "developer")),
        (Role.TOOL, ("tool", "function")),
    )
    for name in names
}
"""docs/spec/sources-and-documents.md §8.1: the role names a thread may use (trimmed, lowercased), and the contract role
each one is."""

_TIME_KEYS: Final = ("created_at", "timestamp", "at")
_MILLISECONDS_FROM: Final = 10**12
_UTF8_BOM: Final = "\ufeff"
_JSONL_SUFFIX: Final = ".jsonl"
# ChatGPT's custom instructions: stored as a message, but what the person configured, not what was said.
_CHATGPT_CONTEXT: Final = "user_editable_context"

JsonObject = dict[str, object]


class ThreadFormat(StrEnum):
    """The formats of thread files, as error messages name them."""

    THREAD_JSON = "thread JSON"
    JSON_LINES = "JSON lines"
    CHATGPT = "ChatGPT export"
    CLAUDE = "Claude export"


@dataclass(frozen=True, slots=True)
class Thread:
    """A thread's kept turns in order; when its export says it last changed; the messages dropped for an
    unknown role, counted by the role they named."""

    turns: tuple[Turn, ...]
    updated_at: datetime | None = None
    dropped: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ExportedThread:
    """One conversation of an export: its place in the export's list, its id (as the export gives it, unchecked),
    format, compact JSON (`record`) and the version hashed from it."""

    index: int
    thread_id: str
    format: ThreadFormat
    record: str
    version: str


@dataclass(frozen=True, slots=True)
class Export:
    """The threads of one export file in file order, and the entries refused, as (`[index]`, reason)."""

    threads: tuple[ExportedThread, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()

    def thread(self, thread_id: str) -> ExportedThread | None:
        return next((t for t in self.threads if t.thread_id == thread_id), None)


def role_of(value: object) -> Role | None:
    """The contract role a message's role names (docs/spec/sources-and-documents.md §8.1), or None when it names none
    this source knows."""
    return ROLES.get(value.strip().lower()) if isinstance(value, str) else None


def parse_timestamp(value: object) -> datetime | None:
    """docs/spec/sources-and-documents.md §8.1: an RFC 3339 string, or epoch milliseconds when at least 10^12 in size,
    else seconds; None for anything else, and for an instant outside the years 1 to 9999 (a naive string is taken as
    UTC)."""
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not math.isfinite(value):
                return None
            seconds = value / 1000 if abs(value) >= _MILLISECONDS_FROM else value
            return datetime.fromtimestamp(seconds, UTC)
        if isinstance(value, str) and value.strip():
            return as_utc(datetime.fromisoformat(value.strip()))
    except (ValueError, OverflowError, OSError):
        return None
    return None


def load_thread_file(data: bytes, name: str) -> Thread | Export:
    """A thread file's one thread, or an export's threads (not yet made into turns); `name` is how error
    messages name the file. An unrecognised file, or a thread with nothing to keep, is `InvalidRequestError`."""
    try:
        text = data.decode("utf-8").removeprefix(_UTF8_BOM)
    except UnicodeDecodeError as exc:
        raise InvalidRequestError(f"{name}: not UTF-8 text, so not a conversation thread or export") from exc
    if name.endswith(_JSONL_SUFFIX):
        return _lines_thread(text, name)
    try:
        document = json.loads(text)
    except RecursionError as exc:
        raise InvalidRequestError(f"{name}: JSON nested too deeply to be a conversation") from exc
    except ValueError as exc:  # not JSON (perhaps JSON lines), or a number too long to convert
        return _lines_thread(text, name, not_json=exc)
    if isinstance(document, dict):
        if isinstance(document.get("messages"), list):
            return _thread(document["messages"], name, ThreadFormat.THREAD_JSON)
        if "role" in document:  # JSON lines of a single message
            return _thread([document], name, ThreadFormat.JSON_LINES)
        raise _unrecognised(name, 'it is a JSON object without "messages"')
    if isinstance(document, list):
        return _export(document, name)
    raise _unrecognised(name, f"it is a JSON {type(document).__name__}")


def exported_turns(thread: ExportedThread, where: str) -> Thread:
    """The turns of one conversation of an export; `where` names it in errors (`<file>#<thread id>`)."""
    record = json.loads(thread.record)
    if thread.format is ThreadFormat.CHATGPT:
        return _chatgpt_thread(record, where)
    return _claude_thread(record, where)


def _lines_thread(text: str, name: str, not_json: ValueError | None = None) -> Thread:
    """JSON lines; `not_json` is why the whole text is not JSON, the error to give if its first line is not."""
    messages: list[object] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        message = _line_message(line)
        if message is None and not_json is not None and not messages:
            raise _unrecognised(name, f"it is not JSON ({not_json})") from not_json
        if message is None:
            raise InvalidRequestError(f"{name}: line {number} is not a JSON message object")
        messages.append(message)
    return _thread(messages, name, ThreadFormat.JSON_LINES)


def _line_message(line: str) -> JsonObject | None:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def _thread(messages: list[object], name: str, form: ThreadFormat) -> Thread:
    turns = _Turns()
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidRequestError(f"{name}: message {index} of the {form} is not an object")
        at = next((parse_timestamp(message[key]) for key in _TIME_KEYS if message.get(key) is not None), None)
        turns.add(message.get("role"), _content_text(message.get("content")), at, _listed_calls(message))
    return turns.thread(name)


def _content_text(content: object) -> str:
    """A string, or the text of a list of parts (strings or `{"type": "text", "text"}`; images have none)."""
    parts = content if isinstance(content, list) else [content]
    return "\n".join(text for part in parts if (text := _part_text(part)))


def _part_text(part: object) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict) and part.get("type", "text") == "text":
        return _string(part.get("text"))
    return ""


def _listed_calls(message: JsonObject) -> list[_Call]:
    """`tool_calls` as spec JSON gives them (`name`, `id`), or as OpenAI's API does (`function.name`)."""
    calls = message.get("tool_calls")
    found: list[_Call] = []
    for call in calls if isinstance(calls, list) else ():
        spec = _object(_object(call).get("function")) or _object(call)
        if _string(spec.get("name")):
            found.append(_call(spec.get("name"), _object(call).get("id"), spec.get("arguments", spec.get("input"))))
    return found


def _export(records: list[object], name: str) -> Export:
    threads: dict[str, ExportedThread] = {}
    refused: list[tuple[str, str]] = []
    for index, record in enumerate(records):
        thread = _exported(index, record)
        if thread is None:
            refused.append((f"[{index}]", 'neither a ChatGPT ("mapping") nor a Claude ("chat_messages") conversation'))
        elif thread.thread_id in threads:
            refused.append(
                (f"[{index}]", f"its id {thread.thread_id!r} appears earlier in the export; only that is read")
            )
        else:
            threads[thread.thread_id] = thread
    if records and not threads:
        raise _unrecognised(name, "it is a JSON list, but not of ChatGPT or Claude conversations")
    return Export(tuple(threads.values()), tuple(refused))


def _exported(index: int, record: object) -> ExportedThread | None:
    if not isinstance(record, dict):
        return None
    if isinstance(record.get("mapping"), dict):
        form, thread_id = ThreadFormat.CHATGPT, _string(record.get("id")) or _string(record.get("conversation_id"))
    elif isinstance(record.get("chat_messages"), list):
        form, thread_id = ThreadFormat.CLAUDE, _string(record.get("uuid"))
    else:
        return None
    compact = json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    version = hashlib.sha256(compact.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return ExportedThread(index, thread_id, form, compact, version)


def _chatgpt_thread(record: JsonObject, where: str) -> Thread:
    turns = _Turns()
    for node in _current_branch(_object(record.get("mapping")), record.get("current_node"), where):
        message = node.get("message")
        if not isinstance(message, dict) or _hidden(message):
            continue
        author = _object(message.get("author"))
        role = author.get("role")
        turns.add(
            role,
            _chatgpt_text(_object(message.get("content"))),
            parse_timestamp(message.get("create_time")),
            _chatgpt_calls(message, author, role_of(role)),
        )
    return turns.thread(where, _updated(record, "update_time", "create_time"))


def _current_branch(mapping: JsonObject, current: object, where: str) -> list[JsonObject]:
    """The nodes from the root to `current`, following `parent` up and then reversing; a loop is refused."""
    if not isinstance(current, str) or current not in mapping:
        raise InvalidRequestError(f"{where}: current_node {current!r} is not a node of its mapping")
    branch: list[JsonObject] = []
    seen: set[str] = set()
    node_id: object = current
    while isinstance(node_id, str) and node_id in mapping:
        if node_id in seen:
            raise InvalidRequestError(f"{where}: its mapping loops back to node {node_id!r}")
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise InvalidRequestError(f"{where}: node {node_id!r} of its mapping is not an object")
        branch.append(node)
        node_id = node.get("parent")
    branch.reverse()
    return branch


def _hidden(message: JsonObject) -> bool:
    hidden = _object(message.get("metadata")).get("is_visually_hidden_from_conversation") is True
    return hidden or _object(message.get("content")).get("content_type") == _CHATGPT_CONTEXT


def _chatgpt_text(content: JsonObject) -> str:
    """The text parts of a message; code and tool output keep theirs in `text`."""
    parts = content.get("parts")
    return _content_text(parts) if isinstance(parts, list) else _string(content.get("text"))


def _chatgpt_calls(message: JsonObject, author: JsonObject, role: Role | None) -> list[_Call]:
    """An assistant message addressed to a tool (`recipient`) calls it; a tool's message names the tool."""
    if role is Role.ASSISTANT:
        recipient = _string(message.get("recipient"))
        return [_call(recipient)] if recipient and recipient != "all" else []
    name = _string(author.get("name"))
    return [_call(name)] if role is Role.TOOL and name else []


def _claude_thread(record: JsonObject, where: str) -> Thread:
    messages = record.get("chat_messages")
    turns = _Turns()
    for index, message in enumerate(messages if isinstance(messages, list) else ()):
        if not isinstance(message, dict):
            raise InvalidRequestError(f"{where}: chat message {index} is not an object")
        _claude_message(turns, message)
    return turns.thread(where, _updated(record, "updated_at", "created_at"))


def _claude_message(turns: _Turns, message: JsonObject) -> None:
    sender, at = message.get("sender"), parse_timestamp(message.get("created_at"))
    content = message.get("content")
    blocks = [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []
    if not blocks:
        turns.add(sender, _string(message.get("text")), at)
        return
    texts: list[str] = []
    calls: list[_Call] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "tool_result":
            # A result answers the calls before it: they end the sender's turn, and the result is a tool's turn.
            turns.add(sender, "\n\n".join(texts), at, calls)
            texts, calls = [], []
            result = [_call(block.get("name"), block.get("tool_use_id"))]
            turns.add(Role.TOOL.value, _content_text(block.get("content")), at, result)
        elif kind == "tool_use":
            calls.append(_call(block.get("name"), block.get("id"), block.get("input")))
        elif kind == "text" and _string(block.get("text")):
            texts.append(_string(block.get("text")))
    turns.add(sender, "\n\n".join(texts), at, calls)


def _updated(record: JsonObject, *keys: str) -> datetime | None:
    return next((moment for key in keys if (moment := parse_timestamp(record.get(key))) is not None), None)


_Call = tuple[ToolCallRef, str]
"""A tool call as a message gives it, and its input: the turn's text when the message has no text."""


class _Turns:
    """The turns of one thread as they are found, and the messages dropped for an unknown role."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.unknown: Counter[str] = Counter()

    def add(self, role_name: object, text: str, at: datetime | None, calls: list[_Call] | None = None) -> None:
        calls = calls or []
        if not text.strip():
            if not calls:
                return  # docs/spec/sources-and-documents.md §8.1: blank content drops the message, whatever its role
            text = "\n".join(f"{ref.name} {detail}".rstrip() for ref, detail in calls)
        role = role_of(role_name)
        if role is None:
            self.unknown[role_name.strip() if isinstance(role_name, str) else "(none)"] += 1
            return
        self.turns.append(Turn(role=role, text=_clean(text), at=at, tool_calls=[ref for ref, _ in calls]))

    def thread(self, where: str, updated_at: datetime | None = None) -> Thread:
        """The thread collected; one left with no turn is refused, naming the unknown roles when there were."""
        dropped = tuple(sorted(self.unknown.items()))
        if not self.turns and dropped:
            roles = ", ".join(repr(role) for role, _ in dropped)
            raise InvalidRequestError(
                f"{where}: no message has a known role (found {roles}); known roles are {', '.join(ROLES)}"
            )
        if not self.turns:
            raise InvalidRequestError(f"{where}: the thread has no message with text to store")
        return Thread(tuple(self.turns), updated_at, dropped)


def _unrecognised(name: str, why: str) -> InvalidRequestError:
    return InvalidRequestError(
        f'{name}: not a conversation thread or export ({why}); expected a JSON object with "messages", '
        "JSON lines of messages, or a ChatGPT or Claude conversations.json"
    )


def _call(name: object, call_id: object = None, detail: object = None) -> _Call:
    return ToolCallRef(name=_clean(_string(name)) or "tool", id=_clean(_string(call_id)) or None), _detail(detail)


def _object(value: object) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _string(value: object) -> str:
    return value if isinstance(value, str) else ""


def _detail(value: object) -> str:
    if value is None or value == {} or value == "":
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _clean(text: str) -> str:
    # JSON can escape a lone surrogate, which no store can hold: such a character becomes U+FFFD.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text
