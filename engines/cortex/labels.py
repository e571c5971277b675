"""Digests, the metadata that leaves the machine, and the labels an event carries (docs/spec/cortexdb.md §7.5-7.7).

CortexDB can narrow a listing or a pack by exact labels, so every field a filter may name is written as a
`tm:<tag>:<digest>` lookup label. Local paths never leave the machine: `wire_meta` sends a file's name alone,
and path filters match digests the envelope carries instead.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Any

from engines.contract import ItemKind, MemoryMeta, MetaFilter, holds_phone_number, redacted_id

MAX_LABEL_BYTES = 256
_THREAD_UUID = re.compile(r"thread-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_DRIVE = re.compile(r"[A-Za-z]:")


# A backfill digests the same folders, workspace, source and kind for every item of a batch: remember them.
@lru_cache(maxsize=8192)
def digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:16]


@lru_cache(maxsize=8192)
def path_digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:40]


def item_label(item_id: str) -> str:
    return f"tm:i:{digest(item_id)}"


def is_absolute(workspace: str) -> bool:
    """A workspace that names a place on a disk (`/…`, `~…`, `\\…`, `C:…`), not a logical id."""
    return workspace.startswith(("/", "~", "\\")) or bool(_DRIVE.match(workspace))


def file_name(path: str) -> str:
    return re.split(r"[/\\]", path)[-1]


def written_id(value: str | None) -> str | None:
    """A thread or source id as it goes on the wire: redacted when it holds a phone number."""
    return None if value is None else _written(value)


@lru_cache(maxsize=4096)
def _written(value: str) -> str:
    # A batch repeats its source and thread ids; the phone-number scan is the costly part.
    return redacted_id(value) if holds_phone_number(value) else value


def wire_dict(meta: MemoryMeta) -> dict[str, Any]:
    """The metadata sent, in the contract's wire form and field order: a file's name instead of its path, no folder,
    no absolute workspace, phone ids redacted."""
    out = meta.wire_dict()
    out.pop("folder", None)
    if "file_path" in out:
        name = file_name(out["file_path"])
        if name:
            out["file_path"] = name
        else:
            del out["file_path"]
    if "workspace" in out and is_absolute(out["workspace"]):
        del out["workspace"]
    if "thread_id" in out:
        out["thread_id"] = written_id(out["thread_id"])
    source = out["source"]
    if "id" in source and (written := _written(source["id"])) != source["id"]:
        out["source"] = {**source, "id": written}
    return out


def wire_meta(meta: MemoryMeta) -> MemoryMeta:
    """`wire_dict` as a `MemoryMeta`: what a reader of the envelope decodes."""
    return MemoryMeta.model_validate(wire_dict(meta))


def path_digests(path: str) -> list[str]:
    """Digests of `path` and of every prefix ending just before a `/` (the empty one before a leading `/` too)."""
    cut = path.rfind("/")
    above = _folder_digests(path[:cut]) if cut >= 0 else ()
    return list(dict.fromkeys((path_digest(path), *above)))


@lru_cache(maxsize=4096)
def _folder_digests(folder: str) -> tuple[str, ...]:
    """Digests of the prefixes of `folder` that end just before a `/`, shortest first, then of `folder` itself:
    what every file in it shares."""
    prefixes = []
    at = folder.find("/")
    while at >= 0:
        prefixes.append(folder[:at])
        at = folder.find("/", at + 1)
    prefixes.append(folder)
    return tuple(path_digest(prefix) for prefix in prefixes)


def lookup_labels(item_id: str, meta: MemoryMeta) -> list[str]:
    """The narrowing labels of an item, in the spec's order (`meta` is the original, not the wire form)."""
    labels = [item_label(item_id)]
    thread, source = written_id(meta.thread_id), written_id(meta.source.id)
    if thread is not None:
        labels.append(f"tm:t:{digest(thread)}")
    if source is not None:
        labels.append(f"tm:s:{digest(source)}")
    if meta.repo is not None:
        labels.append(f"tm:r:{digest(meta.repo)}")
    absolute = meta.workspace is not None and is_absolute(meta.workspace)
    if meta.workspace is not None and not absolute:
        labels.append(f"tm:w:{digest(meta.workspace)}")
    if meta.agent_id is not None:
        labels.append(f"tm:a:{digest(meta.agent_id)}")
    if meta.language is not None:
        labels.append(f"tm:l:{digest(meta.language)}")
    labels.append(f"tm:k:{digest(meta.source.kind.value)}")
    if meta.workspace is not None and absolute:
        labels.append(f"tm:w:{path_digest(meta.workspace)[:16]}")
    return labels


def readable_labels(
    kind: ItemKind, wire: dict[str, Any], pages: tuple[int, int] | None, section: str | None
) -> list[str]:
    """Labels a person reads in CortexDB's own tools; never filtered on. `wire` is the metadata's `wire_dict`."""
    labels = [f"kind:{kind.value}"]
    agent, thread, file = wire.get("agent_id"), wire.get("thread_id"), wire.get("file_path")
    if agent is not None:
        labels.append(f"agent:{agent}")
    # Only a generated thread id: a channel's thread id can name a person.
    if thread is not None and _THREAD_UUID.fullmatch(thread):
        labels.append(f"thread:{thread}")
    if file is not None:
        labels.append(f"file:{file}")
    if pages is not None:
        first, last = pages
        labels.append(f"page:{first}" if first == last else f"page:{first}-{last}")
    if section is not None:
        labels.append(f"section:{section}")
    return [label for label in labels if len(label.encode("utf-8")) <= MAX_LABEL_BYTES]


def _id_labels(tag: str, value: str) -> list[str]:
    forms = [value, redacted_id(value)] if holds_phone_number(value) else [value]
    return [f"tm:{tag}:{digest(form)}" for form in forms]


def narrowing_labels(filter: MetaFilter) -> list[str]:
    """The labels of the one field a read narrows by (any of them matches), or none."""
    if filter.thread_id is not None:
        return _id_labels("t", filter.thread_id)
    if filter.source_id is not None:
        return _id_labels("s", filter.source_id)
    if filter.repo is not None:
        return [f"tm:r:{digest(filter.repo)}"]
    if filter.workspace is not None:
        return [f"tm:w:{digest(filter.workspace)}"]
    if filter.agent_id is not None:
        return [f"tm:a:{digest(filter.agent_id)}"]
    if filter.language is not None:
        return [f"tm:l:{digest(filter.language)}"]
    return [f"tm:k:{digest(kind.value)}" for kind in dict.fromkeys(filter.sources)]
