"""A ZIP archive in a folder, end to end through the embedded runtime: its members stored as documents of their
own (`notes.zip!/...`, converted by their own formats: markdown, a feed, HTML without its chrome, Word), its
bomb and its lying member dead-lettered while the rest is stored, a member taken out of the archive forgotten,
and the archive's deletion forgetting them all."""

from __future__ import annotations

import io
import os
import struct
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from engines.contract import Hit, ListRequest
from tests.fixtures.documents import docx_bytes
from worker.control import ensure_local_source
from worker.embedded.runtime import EmbeddedRuntime
from worker.settings import Settings

pytestmark = pytest.mark.e2e

FEED = b"""<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>The Heron Gazette</title><description>News from the marsh</description>
<item><title>Herons return early</title><description><![CDATA[<p>The <b>egretoid</b> herons are back.</p>]]>
</description></item></channel></rss>
"""
PAGE = b"""<html><head><title>Reed beds</title></head><body>
<header><nav><a href="/">Home</a> <a href="/login">Log in</a></nav></header>
<main><h1>Reed beds</h1><p>The bitternesque call carries at dusk.</p>
<button>move to sidebar</button></main><footer>Copyright marsh club</footer></body></html>
"""
MEMBERS: dict[str, bytes] = {
    "README.md": b"# Marsh notes\n\nThe heronite survey begins.\n",
    "docs/": b"",
    "docs/deep/guide.md": b"# Guide\n\nWaders by the wadebridgian reeds.\n",
    "feeds/news.xml": FEED,
    "site/reeds.html": PAGE,
    "reports/memo.docx": docx_bytes(["Memo", "The grebeworthy plan stands."], headings={0: 1}),
    ".hidden.md": b"hidden members are ignored",
    "node_modules/dep/readme.md": b"dependencies are ignored",
    "bomb.txt": b"\0" * (5 * 1024 * 1024),
    "liar.txt": b"plover " * 100_000,
}
WORDS = {
    "notes.zip!/README.md": "heronite",
    "notes.zip!/docs/deep/guide.md": "wadebridgian",
    "notes.zip!/feeds/news.xml": "egretoid",
    "notes.zip!/site/reeds.html": "bitternesque",
    "notes.zip!/reports/memo.docx": "grebeworthy",
    "plain.md": "avocetish",
}


def _archive(members: Mapping[str, bytes]) -> bytes:
    """`members` zipped, with `liar.txt` (when there) declaring a tenth of the bytes it inflates to."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return _declare_size(buffer.getvalue(), "liar.txt", 70_000) if "liar.txt" in members else buffer.getvalue()


def _declare_size(data: bytes, name: str, size: int) -> bytes:
    out, encoded = bytearray(data), name.encode()
    # Uncompressed size at +24 of a central header (name at +46), at +22 of a local header (name at +30).
    for signature, name_len_at, name_at, size_at in ((b"PK\x01\x02", 28, 46, 24), (b"PK\x03\x04", 26, 30, 22)):
        at = out.find(signature)
        while at >= 0:
            length = struct.unpack_from("<H", out, at + name_len_at)[0]
            if out[at + name_at : at + name_at + length] == encoded:
                struct.pack_into("<I", out, at + size_at, size)
            at = out.find(signature, at + 4)
    return bytes(out)


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[EmbeddedRuntime]:
    settings = Settings(data_dir=tmp_path / "data", convert_workers=2, convert_timeout_s=30)
    with EmbeddedRuntime(settings) as runtime:
        yield runtime


async def _stored(runtime: EmbeddedRuntime, root: Path) -> dict[str, list[Hit]]:
    page = await runtime.engine.list(ListRequest(limit=200))
    assert page.next_cursor is None
    found: dict[str, list[Hit]] = {}
    for hit in page.items:
        assert hit.meta.file_path is not None
        found.setdefault(os.path.relpath(hit.meta.file_path, root), []).append(hit)
    return found


async def test_archive_members_are_stored_refused_and_forgotten(runtime: EmbeddedRuntime, tmp_path: Path) -> None:
    root = tmp_path / "folder"
    root.mkdir()
    archive = root / "notes.zip"
    archive.write_bytes(_archive(MEMBERS))
    (root / "plain.md").write_text("# Plain\n\nthe avocetish note\n")
    real = Path(os.path.realpath(root))
    entry = ensure_local_source(runtime.state, root)

    report, batches = await runtime.sync(entry.id)
    assert (report.listed, report.skipped) == (7, 1)  # six documents and the liar offered; the bomb refused
    assert sum(b.failed for b in batches) == 1
    stored = await _stored(runtime, real)
    assert sorted(stored) == sorted(WORDS)
    for unit_id, word in WORDS.items():
        (hit,) = stored[unit_id]
        assert word in hit.text, unit_id
        assert hit.meta.file_path == f"{real}/{unit_id}"
        assert hit.meta.folder == os.path.dirname(hit.meta.file_path)
        assert hit.meta.source.id == entry.id
    feed = stored["notes.zip!/feeds/news.xml"][0]
    assert "## Herons return early" in feed.text and "<rss" not in feed.text
    page = stored["notes.zip!/site/reeds.html"][0].text
    assert all(chrome not in page for chrome in ("Home", "Log in", "move to sidebar", "Copyright marsh club"))
    letters = {letter.unit_id: letter for letter in runtime.state.dead_letters(entry.id)}
    assert sorted(letters) == ["notes.zip!/bomb.txt", "notes.zip!/liar.txt"]
    assert letters["notes.zip!/bomb.txt"].stage == "list" and "zip bomb" in letters["notes.zip!/bomb.txt"].message
    assert letters["notes.zip!/liar.txt"].stage == "read"
    assert "cannot read 'notes.zip!/liar.txt'" in letters["notes.zip!/liar.txt"].message
    assert "does not match its declared size" in letters["notes.zip!/liar.txt"].message

    # Taking a member out rewrites the archive: every member is read again, only the one that went is forgotten.
    kept_ids = {unit_id: stored[unit_id][0].id for unit_id in WORDS}
    archive.write_bytes(_archive({k: v for k, v in MEMBERS.items() if k != "docs/deep/guide.md"}))
    report, batches = await runtime.sync(entry.id)
    assert report.deletes == 1
    assert sum(b.stored for b in batches) == 0  # the rest read back identical: nothing converted or stored
    stored = await _stored(runtime, real)
    assert sorted(stored) == sorted(set(WORDS) - {"notes.zip!/docs/deep/guide.md"})
    assert all(stored[unit_id][0].id == kept_ids[unit_id] for unit_id in stored)

    # Deleting the archive forgets every member and settles its dead letters; the plain file stays.
    archive.unlink()
    report, _ = await runtime.sync(entry.id)
    assert report.deletes == 4
    assert sorted(await _stored(runtime, real)) == ["plain.md"]
    assert runtime.state.dead_letters(entry.id) == []
