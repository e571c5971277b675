"""`ConversationReader` and `sources.threads`: four thread formats, roles, timestamps, units and their refusals.

Every fixture is built here: thread files written into `tmp_path`, and small ChatGPT and Claude exports shaped
as those services write them (a branched `mapping`; `chat_messages` with tool blocks).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engines.contract import InvalidRequestError, NotFoundError, Role, SourceKind, ToolCallRef, Turn
from pipeline.chunk import DEFAULT_WINDOW_TURNS
from pipeline.items import ItemRules, assemble_items
from sources import REGISTRY, RESCAN, ConditionalSource, ReaderOptions, SourceRequest, WatchableSource
from sources import conversation as conversation_module
from sources.conversation import ConversationReader, thread_id_refusal
from sources.threads import ROLES, load_thread_file, parse_timestamp, role_of
from tinymemory_ingest.cli import app

T0 = 1714564800  # 2024-05-01T12:00:00Z
AT0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def write(root: Path, rel: str, content: object) -> Path:
    """`root/rel` holding `content`: bytes and text as they are, anything else as JSON."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def jsonl(*messages: dict[str, Any]) -> str:
    return "".join(json.dumps(message) + "\n" for message in messages)


def chatgpt_node(node_id: str, parent: str | None, role: str | None, text: str | None, **extra: Any) -> dict[str, Any]:
    """A `mapping` node; `role=None` is the empty root ChatGPT puts above every conversation."""
    message = None
    if role is not None:
        author = {"role": role, "name": extra.pop("name", None), "metadata": {}}
        content = extra.pop("content", {"content_type": "text", "parts": [text]})
        message = {"id": node_id, "author": author, "content": content, "create_time": extra.pop("at", None)}
        message |= {"status": "finished_successfully", "recipient": "all", "metadata": {}, **extra}
    return {"id": node_id, "message": message, "parent": parent, "children": []}


def chatgpt_conversation(conversation_id: str, nodes: list[dict[str, Any]], current: str) -> dict[str, Any]:
    mapping = {node["id"]: node for node in nodes}
    for node in nodes:
        if node["parent"] is not None:
            mapping[node["parent"]]["children"].append(node["id"])
    return {
        "title": f"chat {conversation_id}",
        "create_time": T0,
        "update_time": T0 + 600,
        "mapping": mapping,
        "current_node": current,
        "conversation_id": conversation_id,
        "id": conversation_id,
        "moderation_results": [],
    }


def branched_chatgpt(conversation_id: str = "c-1") -> dict[str, Any]:
    """Edited once: the first answer was regenerated, and the person went on from the second one."""
    return chatgpt_conversation(
        conversation_id,
        [
            chatgpt_node("root", None, None, None),
            chatgpt_node("sys", "root", "system", ""),  # ChatGPT's empty system message
            chatgpt_node("u1", "sys", "user", "what is a zeolite?", at=T0 + 1),
            chatgpt_node("a1-old", "u1", "assistant", "an abandoned answer", at=T0 + 2),
            chatgpt_node("a1", "u1", "assistant", "a porous mineral", at=T0 + 3),
            chatgpt_node(
                "hidden", "a1", "user", "memory context", metadata={"is_visually_hidden_from_conversation": True}
            ),
            chatgpt_node(
                "u2",
                "hidden",
                "user",
                "",
                content={
                    "content_type": "multimodal_text",
                    "parts": [
                        {"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"},
                        "and this picture?",
                    ],
                },
                at=T0 + 4,
            ),
            chatgpt_node(
                "call",
                "u2",
                "assistant",
                None,
                recipient="python",
                content={"content_type": "code", "language": "python", "text": "measure(img)"},
                at=T0 + 5,
            ),
            chatgpt_node(
                "out",
                "call",
                "tool",
                None,
                name="python",
                content={"content_type": "execution_output", "text": "pores: 0.4 nm"},
                at=T0 + 6,
            ),
            chatgpt_node("a2", "out", "assistant", "its pores are 0.4 nm wide", at=T0 + 7),
            chatgpt_node("u2-old", "a1-old", "user", "never seen again", at=T0 + 8),
        ],
        current="a2",
    )


def claude_conversation(uuid: str = "d0c5e1f2-0000-4000-8000-000000000001") -> dict[str, Any]:
    def message(sender: str, at: int, *content: dict[str, Any], text: str = "") -> dict[str, Any]:
        stamp = datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
        return {
            "uuid": f"m{at}",
            "sender": sender,
            "text": text,
            "content": list(content),
            "created_at": stamp,
            "updated_at": stamp,
            "attachments": [],
            "files": [],
        }

    return {
        "uuid": uuid,
        "name": "weather",
        "created_at": "2024-05-01T12:00:00.000000Z",
        "updated_at": "2024-05-01T12:10:00.000000Z",
        "account": {"uuid": "acct"},
        "chat_messages": [
            message("human", T0 + 1, {"type": "text", "text": "will it rain in Oslo?"}),
            message(
                "assistant",
                T0 + 2,
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "toolu_01", "name": "web_search", "input": {"query": "Oslo rain"}},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "name": "web_search",
                    "content": [{"type": "text", "text": "Oslo: showers"}],
                },
                {"type": "text", "text": "yes, showers are expected"},
            ),
            message("human", T0 + 3, text="thanks"),  # an older export: text only, no content blocks
        ],
    }


def turns(reader: ConversationReader, unit_id: str) -> list[tuple[str, str]]:
    content = reader.read(unit_id)
    return [(turn.role.value, turn.text) for turn in content.turns or ()]


def ids(reader: ConversationReader) -> list[str]:
    return [unit.id for unit in reader.list_units().units]


def skipped(reader: ConversationReader) -> dict[str, str]:
    return {entry.unit_id: entry.reason for entry in reader.list_units().skipped}


# -- the four formats ---------------------------------------------------------------------------------------


def test_thread_json(tmp_path: Path) -> None:
    write(
        tmp_path,
        "threads/plan.json",
        {
            "title": "Plan",
            "messages": [
                {"role": "user", "content": "when is the launch?", "created_at": "2024-05-01T12:00:00Z"},
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "on Friday"}],
                    "timestamp": (T0 + 60) * 1000,
                },
                {"role": "assistant", "content": "   "},  # blank: dropped
                {"role": "assistant", "content": "", "tool_calls": [{"name": "calendar", "id": "call-1"}]},
                {"role": "tool", "content": "Friday 10:00", "at": T0 + 120, "tool_calls": [{"name": "calendar"}]},
            ],
        },
    )
    reader = ConversationReader(tmp_path)
    assert ids(reader) == ["threads/plan.json"]
    content = reader.read("threads/plan.json")
    assert content.turns == (
        Turn(role=Role.USER, text="when is the launch?", at=AT0),
        Turn(role=Role.ASSISTANT, text="on Friday", at=datetime(2024, 5, 1, 12, 1, tzinfo=UTC)),
        Turn(role=Role.ASSISTANT, text="calendar", tool_calls=[ToolCallRef(name="calendar", id="call-1")]),
        Turn(
            role=Role.TOOL,
            text="Friday 10:00",
            at=datetime(2024, 5, 1, 12, 2, tzinfo=UTC),
            tool_calls=[ToolCallRef(name="calendar")],
        ),
    )
    assert content.origin.thread_id == "plan" and content.name == "threads/plan.json"
    assert content.origin.observed_at == datetime(2024, 5, 1, 12, 2, tzinfo=UTC)  # the last timed turn


def test_json_lines_by_name_and_by_content(tmp_path: Path) -> None:
    lines = jsonl({"role": "human", "content": "hi", "at": T0}, {"role": "ai", "content": "hello"})
    write(tmp_path, "a.jsonl", "\n" + lines + "\n\n")
    write(tmp_path, "b.json", lines)  # JSON lines under a .json name: told from the content
    write(tmp_path, "c.jsonl", jsonl({"role": "user", "content": "one line"}))
    reader = ConversationReader(tmp_path)
    assert ids(reader) == ["a.jsonl", "b.json", "c.jsonl"]
    assert turns(reader, "a.jsonl") == turns(reader, "b.json") == [("user", "hi"), ("assistant", "hello")]
    assert turns(reader, "c.jsonl") == [("user", "one line")]
    assert reader.read("a.jsonl").origin.thread_id == "a"


def test_chatgpt_export_keeps_only_the_current_branch(tmp_path: Path) -> None:
    write(tmp_path, "export/conversations.json", [branched_chatgpt("c-1")])
    reader = ConversationReader(tmp_path)
    assert ids(reader) == ["export/conversations.json#c-1"]
    content = reader.read("export/conversations.json#c-1")
    assert [(t.role.value, t.text) for t in content.turns or ()] == [
        ("user", "what is a zeolite?"),
        ("assistant", "a porous mineral"),
        ("user", "and this picture?"),  # the image part has no text
        ("assistant", "measure(img)"),
        ("tool", "pores: 0.4 nm"),
        ("assistant", "its pores are 0.4 nm wide"),
    ]
    calls = [t.tool_calls for t in content.turns or ()]
    assert calls[3] == [ToolCallRef(name="python")] and calls[4] == [ToolCallRef(name="python")]
    assert content.turns is not None and content.turns[0].at == datetime.fromtimestamp(T0 + 1, UTC)
    assert content.origin.thread_id == "c-1" and content.origin.observed_at == datetime.fromtimestamp(T0 + 7, UTC)


def test_claude_export_keeps_tool_use(tmp_path: Path) -> None:
    write(tmp_path, "conversations.json", [claude_conversation("d0c5")])
    reader = ConversationReader(tmp_path)
    assert ids(reader) == ["conversations.json#d0c5"]
    content = reader.read("conversations.json#d0c5")
    assert [(t.role.value, t.text, t.tool_calls) for t in content.turns or ()] == [
        ("user", "will it rain in Oslo?", []),
        ("assistant", "let me look", [ToolCallRef(name="web_search", id="toolu_01")]),
        ("tool", "Oslo: showers", [ToolCallRef(name="web_search", id="toolu_01")]),
        ("assistant", "yes, showers are expected", []),
        ("user", "thanks", []),
    ]
    assert content.origin.observed_at == datetime.fromtimestamp(T0 + 3, UTC)


def test_a_tool_use_without_text_keeps_its_input_as_text(tmp_path: Path) -> None:
    chat = claude_conversation("x")
    chat["chat_messages"] = [
        {
            "sender": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "zeolite"}}],
        }
    ]
    write(tmp_path, "conversations.json", [chat])
    (turn,) = ConversationReader(tmp_path).read("conversations.json#x").turns or ()
    assert (turn.text, turn.tool_calls) == ('search {"q": "zeolite"}', [ToolCallRef(name="search", id="t1")])


def test_an_export_with_both_services_and_a_stranger(tmp_path: Path) -> None:
    write(tmp_path, "all.json", [branched_chatgpt("g"), claude_conversation("c"), {"hello": 1}, branched_chatgpt("g")])
    reader = ConversationReader(tmp_path)
    assert ids(reader) == ["all.json#c", "all.json#g"]
    assert skipped(reader) == {
        "all.json#[2]": 'neither a ChatGPT ("mapping") nor a Claude ("chat_messages") conversation',
        "all.json#[3]": "its id 'g' appears earlier in the export; only that is read",
    }


# -- roles and timestamps -----------------------------------------------------------------------------------

ROLE_TABLE = [
    ("user", Role.USER),
    ("human", Role.USER),
    (" Human ", Role.USER),
    ("assistant", Role.ASSISTANT),
    ("agent", Role.ASSISTANT),
    ("AI", Role.ASSISTANT),
    ("bot", Role.ASSISTANT),
    ("model", Role.ASSISTANT),
    ("system", Role.SYSTEM),
    ("developer", Role.SYSTEM),
    ("tool", Role.TOOL),
    ("Function", Role.TOOL),
    ("narrator", None),
    ("", None),
    (None, None),
    (3, None),
]


@pytest.mark.parametrize(("name", "role"), ROLE_TABLE)
def test_role_mapping(name: object, role: Role | None) -> None:
    assert role_of(name) is role


def test_the_role_table_is_the_spec_one() -> None:
    assert sorted(ROLES) == sorted(
        ["user", "human", "assistant", "agent", "ai", "bot", "model", "system", "developer", "tool", "function"]
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-05-01T12:00:00Z", AT0),
        ("2024-05-01T14:00:00+02:00", AT0),
        ("2024-05-01T12:00:00.250000Z", AT0.replace(microsecond=250000)),
        ("2024-05-01T12:00:00", AT0),  # no offset: taken as UTC
        (T0, AT0),
        (T0 + 0.5, AT0.replace(microsecond=500000)),
        (T0 * 1000, AT0),
        (T0 * 1000 + 250, AT0.replace(microsecond=250000)),
        (10**12, datetime(2001, 9, 9, 1, 46, 40, tzinfo=UTC)),  # the first number read as milliseconds
        (10**12 - 1, None),  # seconds: past the year 9999
        (-86400, datetime(1969, 12, 31, tzinfo=UTC)),
        ("yesterday", None),
        ("", None),
        (True, None),
        (float("nan"), None),
        (1e300, None),
        ([T0], None),
    ],
)
def test_timestamps(value: object, expected: datetime | None) -> None:
    assert parse_timestamp(value) == expected


def test_an_unreadable_timestamp_keeps_the_turn(tmp_path: Path) -> None:
    write(tmp_path, "t.json", {"messages": [{"role": "user", "content": "kept", "at": "half past nine"}]})
    content = ConversationReader(tmp_path).read("t.json")
    assert content.turns == (Turn(role=Role.USER, text="kept"),)
    assert content.origin.observed_at == datetime.fromtimestamp((tmp_path / "t.json").stat().st_mtime_ns / 1e9, UTC)


# -- unknown roles and unrecognised files -------------------------------------------------------------------


def test_a_thread_of_only_unknown_roles_is_refused_naming_them(tmp_path: Path) -> None:
    write(
        tmp_path,
        "odd.json",
        {"messages": [{"role": "narrator", "content": "once upon a time"}, {"role": "chorus", "content": "la la"}]},
    )
    write(tmp_path, "fine.json", {"messages": [{"role": "user", "content": "hello"}]})
    reader = ConversationReader(tmp_path)
    assert ids(reader) == ["fine.json", "odd.json"]  # listing does not parse single threads
    with pytest.raises(InvalidRequestError) as caught:
        reader.read("odd.json")
    assert caught.value.message.startswith("odd.json: no message has a known role (found 'chorus', 'narrator')")
    assert turns(reader, "fine.json") == [("user", "hello")]


def test_some_unknown_roles_are_dropped_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write(
        tmp_path,
        "t.jsonl",
        jsonl(
            {"role": "user", "content": "q"},
            {"role": "narrator", "content": "meanwhile"},
            {"role": "assistant", "content": "a"},
        ),
    )
    with caplog.at_level(logging.WARNING, logger="sources.conversation"):
        assert turns(ConversationReader(tmp_path), "t.jsonl") == [("user", "q"), ("assistant", "a")]
    assert "t.jsonl: messages of unknown roles dropped (1 with role 'narrator')" in caplog.text


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"name": "not a thread"}', 'it is a JSON object without "messages"'),
        (b'"just a string"', "it is a JSON str"),
        (b"hello, this is prose\nover two lines\n", "it is not JSON (Expecting value"),
        (b'{"messages": [', "it is not JSON"),
    ],
)
def test_an_unrecognised_file_is_refused_naming_it(tmp_path: Path, data: bytes, reason: str) -> None:
    write(tmp_path, "notes/x.json", data)
    with pytest.raises(InvalidRequestError) as caught:
        ConversationReader(tmp_path).read("notes/x.json")
    assert caught.value.message.startswith(f"notes/x.json: not a conversation thread or export ({reason}")
    assert "ChatGPT or Claude conversations.json" in caught.value.message


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xfe\x00{", "not UTF-8 text"),
        (b'{"messages": [{"role": "user", "content": "   "}]}', "the thread has no message with text to store"),
        (b'{"messages": ["hi"]}', "message 0 of the thread JSON is not an object"),
        (b'{"role": "user", "content": "a"}\n[1]\n', "line 2 is not a JSON message object"),
    ],
)
def test_broken_threads_are_refused_clearly(tmp_path: Path, data: bytes, message: str) -> None:
    write(tmp_path, "t.json", data)
    with pytest.raises(InvalidRequestError, match=message):
        ConversationReader(tmp_path).read("t.json")


def test_an_unrecognised_export_is_skipped_at_listing(tmp_path: Path) -> None:
    write(tmp_path, "list.json", [1, 2, 3])
    write(tmp_path, "ok.json", {"messages": [{"role": "user", "content": "hi"}]})
    reader = ConversationReader(tmp_path)
    assert ids(reader) == ["ok.json"]
    assert skipped(reader)["list.json"].startswith(
        "list.json: not a conversation thread or export (it is a JSON list, but not of ChatGPT or Claude"
    )


# -- hostile input ------------------------------------------------------------------------------------------


def test_deeply_nested_json_is_refused_not_raised(tmp_path: Path) -> None:
    write(tmp_path, "deep.json", b"[" * 200_000 + b"]" * 200_000)
    write(tmp_path, "deep2.json", b'{"messages": ' + b"[" * 200_000 + b"]" * 200_000 + b"}")
    reader = ConversationReader(tmp_path)
    assert "deep.json" in skipped(reader) and "nested too deeply" in skipped(reader)["deep.json"]
    with pytest.raises(InvalidRequestError, match="nested too deeply"):
        reader.read("deep2.json")


def test_a_mapping_that_loops_is_refused(tmp_path: Path) -> None:
    chat = chatgpt_conversation(
        "loop", [chatgpt_node("a", "b", "user", "one"), chatgpt_node("b", "a", "assistant", "two")], current="a"
    )
    write(tmp_path, "conversations.json", [chat])
    with pytest.raises(InvalidRequestError, match="its mapping loops back to node"):
        ConversationReader(tmp_path).read("conversations.json#loop")


def test_a_missing_current_node_is_refused(tmp_path: Path) -> None:
    chat = branched_chatgpt("c")
    chat["current_node"] = "nowhere"
    write(tmp_path, "conversations.json", [chat])
    with pytest.raises(InvalidRequestError, match="current_node 'nowhere' is not a node of its mapping"):
        ConversationReader(tmp_path).read("conversations.json#c")


def test_lone_surrogates_and_huge_numbers_do_not_break_a_thread(tmp_path: Path) -> None:
    digits = "9" * 5000
    write(tmp_path, "t.json", '{"messages": [{"role": "user", "content": "bad \\ud800 char", "at": 1}]}')
    write(tmp_path, "n.json", '{"messages": [{"role": "user", "content": "x", "at": ' + digits + "}]}")
    reader = ConversationReader(tmp_path)
    assert turns(reader, "t.json") == [("user", "bad \ufffd\ufffd\ufffd char")]
    with pytest.raises(InvalidRequestError, match=r"n\.json: not a conversation thread or export"):
        reader.read("n.json")


# -- units, ids and containment -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("thread_id", "refused"),
    [
        ("c-1", False),
        ("../etc", True),
        ("a/b", True),
        ("a\\b", True),
        ("..", True),
        ("", True),
        ("x#y", True),
        ("tab\there", True),
        ("é-ü", False),
        ("x" * 256, True),
    ],
)
def test_thread_ids(thread_id: str, refused: bool) -> None:
    assert (thread_id_refusal(thread_id) is not None) is refused


def test_path_escapes_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(tmp_path, "outside.json", {"messages": [{"role": "user", "content": "secret"}]})
    write(root, "conversations.json", [branched_chatgpt("c-1")])
    os.symlink(tmp_path / "outside.json", root / "link.json")
    reader = ConversationReader(root)
    assert ids(reader) == ["conversations.json#c-1"]
    assert skipped(reader) == {"link.json": "symbolic link (not followed)"}
    for unit_id in ("../outside.json", "/etc/passwd", "link.json", "conversations.json#../c-1", "x/../../outside.json"):
        with pytest.raises(InvalidRequestError):
            reader.read(unit_id)
    with pytest.raises(InvalidRequestError, match=r"thread id 'a/b' contains '/'"):
        reader.read("conversations.json#a/b")


def test_an_export_thread_whose_id_escapes_is_skipped(tmp_path: Path) -> None:
    write(tmp_path, "conversations.json", [branched_chatgpt("../../etc/passwd"), branched_chatgpt("ok")])
    reader = ConversationReader(tmp_path)
    assert ids(reader) == ["conversations.json#ok"]
    assert skipped(reader) == {"conversations.json#[0]": "its id '../../etc/passwd' contains '/' or '\\'"}


def test_file_names_with_the_thread_mark_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, "a#b.json", {"messages": [{"role": "user", "content": "hi"}]})
    assert skipped(ConversationReader(tmp_path)) == {"a#b.json": conversation_module.REASON_MARK_IN_NAME}


def test_wrong_unit_ids_for_what_the_file_holds(tmp_path: Path) -> None:
    write(tmp_path, "conversations.json", [branched_chatgpt("c-1")])
    write(tmp_path, "t.json", {"messages": [{"role": "user", "content": "hi"}]})
    reader = ConversationReader(tmp_path)
    with pytest.raises(InvalidRequestError, match=r"an export of 1 threads; read 'conversations\.json#<id>'"):
        reader.read("conversations.json")
    with pytest.raises(NotFoundError, match=r"thread 'gone' is not in conversations\.json"):
        reader.read("conversations.json#gone")
    with pytest.raises(NotFoundError, match="it holds one thread"):
        reader.read("t.json#t")
    with pytest.raises(NotFoundError):
        reader.read("missing.json")


def test_other_files_are_not_offered(tmp_path: Path) -> None:
    write(tmp_path, "README.md", "# threads\n")
    write(tmp_path, ".hidden.json", {"messages": []})
    write(tmp_path, "t.json", {"messages": [{"role": "user", "content": "hi"}]})
    assert ids(ConversationReader(tmp_path)) == ["t.json"]
    assert ids(ConversationReader(tmp_path, include=["**/*.md"])) == ["README.md"]


def test_versions(tmp_path: Path) -> None:
    single = write(tmp_path, "t.json", {"messages": [{"role": "user", "content": "hi"}]})
    write(tmp_path, "conversations.json", [branched_chatgpt("a"), branched_chatgpt("b")])
    reader = ConversationReader(tmp_path)
    before = {unit.id: unit for unit in reader.list_units().units}
    st = single.stat()
    assert before["t.json"].version == f"{st.st_size}:{st.st_mtime_ns}"
    assert before["conversations.json#a"].size == (tmp_path / "conversations.json").stat().st_size

    grown = branched_chatgpt("b")
    grown["mapping"]["a2"]["message"]["content"]["parts"] = ["its pores are 0.4 nm wide, roughly"]
    write(tmp_path, "conversations.json", [branched_chatgpt("a"), grown])
    after = {unit.id: unit.version for unit in reader.list_units().units}
    assert after["conversations.json#a"] == before["conversations.json#a"].version  # unchanged: not read again
    assert after["conversations.json#b"] != before["conversations.json#b"].version
    assert reader.read("conversations.json#b").version == after["conversations.json#b"]

    write(tmp_path, "conversations.json", [grown])
    assert ids(reader) == ["conversations.json#b", "t.json"]


def test_a_broken_export_keeps_the_threads_the_host_holds(tmp_path: Path) -> None:
    write(tmp_path, "conversations.json", b'[{"id": "a", "mapping": {')  # half written
    reader = ConversationReader(tmp_path)
    assert isinstance(reader, ConditionalSource)
    known = {"conversations.json#a": "v1", "conversations.json#b": "v2", "other.json": "9:9"}
    listing = reader.list_units_since(known)
    assert [(u.id, u.version) for u in listing.units] == [
        ("conversations.json#a", "v1"),
        ("conversations.json#b", "v2"),
    ]
    ((unit_id, reason),) = [(s.unit_id, s.reason) for s in listing.skipped]
    assert unit_id == "conversations.json" and reason.startswith("conversations.json: not a conversation")
    assert reader.list_units().units == ()  # with nothing held, nothing to keep


def test_an_export_over_the_cap_keeps_the_threads_the_host_holds(tmp_path: Path) -> None:
    write(tmp_path, "conversations.json", [branched_chatgpt("a")])
    reader = ConversationReader(tmp_path, max_file_bytes=100)
    listing = reader.list_units_since({"conversations.json#a": "v1"})
    assert [(u.id, u.version) for u in listing.units] == [("conversations.json#a", "v1")]
    assert "over the 100 bytes file limit" in listing.skipped[0].reason


def test_a_thread_file_grown_past_the_cap_keeps_what_the_host_holds(tmp_path: Path) -> None:
    write(tmp_path, "t.json", {"messages": [{"role": "user", "content": "x" * 200}]})
    listing = ConversationReader(tmp_path, max_file_bytes=100).list_units_since({"t.json": "9:9", "u.json": "1:1"})
    assert [(u.id, u.version) for u in listing.units] == [("t.json", "9:9")]  # u.json is gone: not kept
    assert [s.unit_id for s in listing.skipped] == ["t.json"]


def test_reading_an_export_parses_it_once_while_it_is_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "conversations.json", [branched_chatgpt(f"c{n}") for n in range(5)])
    calls: list[str] = []
    original = conversation_module.load_thread_file

    def counting(data: bytes, name: str) -> object:
        calls.append(name)
        return original(data, name)

    monkeypatch.setattr(conversation_module, "load_thread_file", counting)
    reader = ConversationReader(tmp_path)
    for unit_id in ids(reader):
        reader.read(unit_id)
    assert calls == ["conversations.json"]
    write(tmp_path, "conversations.json", [branched_chatgpt("c0")])
    os.utime(tmp_path / "conversations.json", ns=(1, 1))
    reader.read("conversations.json#c0")
    assert calls == ["conversations.json", "conversations.json"]


def test_origin_metadata(tmp_path: Path) -> None:
    folder = tmp_path / "chats"
    write(folder, "sub/t.json", {"messages": [{"role": "user", "content": "hi"}, {"role": "ai", "content": "yo"}]})
    entry = REGISTRY.configure(SourceRequest(kind="conversation", target=str(folder), namespace="team:acme"))
    reader = REGISTRY.reader_for(entry, ReaderOptions())
    assert isinstance(reader, ConversationReader) and isinstance(reader, WatchableSource)
    meta = reader.read("sub/t.json").origin
    real = os.path.realpath(folder)
    assert (meta.source.kind, meta.source.id, str(meta.namespace)) == (SourceKind.CONVERSATION, entry.id, "team:acme")
    assert (meta.workspace, meta.folder, meta.file_path) == (real, f"{real}/sub", f"{real}/sub/t.json")
    assert (meta.thread_id, meta.turns and (meta.turns.first, meta.turns.last)) == ("t", (0, 1))


def test_a_thread_that_outgrows_one_window_keeps_its_first_item(tmp_path: Path) -> None:
    # The origin's turn range {0, n-1} is what the first window of the grown thread carries too, so the item
    # the whole thread was is the same item (the same fingerprint) as that first window.
    def items(count: int) -> list[str]:
        write(tmp_path, "t.jsonl", jsonl(*({"role": "user", "content": f"turn {n}"} for n in range(count))))
        content = ConversationReader(tmp_path).read("t.jsonl")
        assert content.turns is not None
        return [item.fingerprint() for item in assemble_items(content.turns, content.origin, ItemRules()).items]

    (whole,) = items(DEFAULT_WINDOW_TURNS)
    first, _ = items(DEFAULT_WINDOW_TURNS + 1)
    assert first == whole


# -- configuring and watching -------------------------------------------------------------------------------


def test_configure(tmp_path: Path) -> None:
    folder = tmp_path / "chats"
    folder.mkdir()
    entry = REGISTRY.configure(SourceRequest(kind="conversation", target=str(folder), include=["**/*.txt"]))
    assert (entry.kind, entry.path, entry.label, entry.include) == (
        "conversation",
        str(folder),
        str(folder),
        ["**/*.txt"],
    )
    assert entry.id.startswith("chats-")
    with pytest.raises(InvalidRequestError, match="is not a folder; a conversation source reads a folder"):
        REGISTRY.configure(SourceRequest(kind="conversation", target=str(write(folder, "t.json", "{}"))))
    with pytest.raises(InvalidRequestError, match="branch does not apply to conversation sources"):
        REGISTRY.configure(SourceRequest(kind="conversation", target=str(folder), branch="main"))
    with pytest.raises(NotFoundError, match="does not exist"):
        REGISTRY.configure(SourceRequest(kind="conversation", target=str(tmp_path / "nope")))


def test_cli_sources_add_conversation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYMEMORY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TINYMEMORY_CONVERT_WORKERS", "1")
    monkeypatch.delenv("TINYMEMORY_CONFIG", raising=False)
    folder = tmp_path / "chats"
    write(folder, "t.json", {"messages": [{"role": "user", "content": "the zeolite order ships Friday"}]})
    runner = CliRunner()
    added = runner.invoke(app, ["sources", "add", "conversation", str(folder), "--id", "chats"], catch_exceptions=False)
    assert (added.exit_code, added.stdout.strip()) == (0, "chats")
    listed = runner.invoke(app, ["sources", "list", "--json"], catch_exceptions=False)
    (shown,) = json.loads(listed.stdout)
    assert (shown["id"], shown["kind"], shown["path"]) == ("chats", "conversation", str(folder))
    synced = runner.invoke(app, ["sources", "sync", "chats"], catch_exceptions=False)
    assert synced.exit_code == 0 and "synced: 1 changed" in synced.stdout
    fetched = runner.invoke(app, ["fetch", "zeolite", "--mode", "keyword", "--json"], catch_exceptions=False)
    (hit,) = json.loads(fetched.stdout)["hits"]
    assert (hit["meta"]["thread_id"], hit["meta"]["source"]["kind"]) == ("t", "conversation")


def test_a_changed_export_asks_for_a_rescan(tmp_path: Path) -> None:
    write(tmp_path, "conversations.json", [branched_chatgpt("a")])
    write(tmp_path, "t.json", {"messages": [{"role": "user", "content": "hi"}]})
    seen: list[set[str]] = []
    arrived = threading.Event()

    def on_change(changed: set[str]) -> None:
        seen.append(changed)
        arrived.set()

    reader = ConversationReader(tmp_path)
    with reader.watch(on_change, debounce_s=0.05, reconcile_s=60):
        write(tmp_path, "t.json", {"messages": [{"role": "user", "content": "hello"}]})
        assert arrived.wait(5)
        arrived.clear()
        write(tmp_path, "conversations.json", [branched_chatgpt("a"), branched_chatgpt("b")])
        assert arrived.wait(5)
    assert seen[0] == {"t.json"} and seen[-1] == {RESCAN}


def test_load_thread_file_names_the_file_in_every_refusal() -> None:
    for data in (b"", b"{}", b"[]x", b"\x00\x01"):
        with pytest.raises(InvalidRequestError) as caught:
            load_thread_file(data, "some/where.json")
        assert caught.value.message.startswith("some/where.json: ")
