"""The embedded pipeline end to end on a generated folder of mixed formats, with the real converter pool,
the local engine and the SQLite state store: first ingest, edits, deletes, renames, touches, secrets and
hostile files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.contract import FetchMode, FetchRequest, Hit, ListRequest, MetaFilter
from tests.fixtures.documents import (
    corrupt_pdf_bytes,
    docx_bytes,
    html_bytes,
    ipynb_bytes,
    pdf_bytes,
    pptx_bytes,
    xlsx_bytes,
    zip_bomb_bytes,
)
from worker.control import ensure_local_source
from worker.embedded.runtime import EmbeddedRuntime
from worker.settings import Settings

pytestmark = pytest.mark.e2e

SECRETS = {
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEsecretkeymaterial\n-----END RSA PRIVATE KEY-----": "MIIEsecretkeymaterial",
    "Authorization: Bearer abcdefgh12345678": "abcdefgh12345678",
    "open https://ots.example/secret/AbC123xyz now": "AbC123xyz",
    "api_key=abcd1234efgh": "abcd1234efgh",
    "password: hunter2": "hunter2",
    "use sk-abcdefghijklmnopqrstuvwx now": "sk-abcdefghijklmnopqrstuvwx",
    "ghp_abcdefghijklmnopqrstuvwxyz0123": "ghp_abcdefghijklmnopqrstuvwxyz0123",
    "AKIAABCDEFGHIJKLMNOP": "AKIAABCDEFGHIJKLMNOP",
    "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.abcdefghijk done": "eyJhbGciOiJIUzI1NiJ9",
    "xoxb-1234567890-abcdef": "xoxb-1234567890-abcdef",
    "glpat-abcdefghijklmnop": "glpat-abcdefghijklmnop",
    "sk_live_abcdefghijklmnop1": "sk_live_abcdefghijklmnop1",
    "CPF 529.982.247-25": "529.982.247-25",
    "CNPJ 11.222.333/0001-81": "11.222.333/0001-81",
    "CUIT 20-12345678-6": "20-12345678-6",
    "IBAN GB82 WEST 1234 5698 7654 32": "GB82 WEST",
    "card 4111 1111 1111 1111": "4111 1111",
    "aadhaar 2341 2341 2346": "2341 2341 2346",
    "DNI 12345678Z": "12345678Z",
    "NIE X1234567L": "X1234567L",
    "NINO AB123456C": "AB123456C",
    "SSN 123-45-6789": "123-45-6789",
    "RRN 900101-1234568": "900101-1234568",  # a valid RRN: one failing its check digit is kept
    "RFC GODE561231GR8": "GODE561231GR8",
    "PAN ABCDE1234F": "ABCDE1234F",
    "call +14155552671": "+14155552671",
    "call 415-555-2671": "415-555-2671",
    "My Number 123456789012": "123456789012",
}


def _write(root: Path, relative: str, data: bytes | str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def _make_folder(root: Path) -> dict[str, str]:
    """A folder of every convertible kind; returns each file's relative path and a word only it holds."""
    files = {
        "notes/plan.md": ("# Plan\n\nThe zebracorn launch is on Friday.\n", "zebracorn"),
        "notes/todo.txt": ("buy quokkafruit and milk\n", "quokkafruit"),
        "code/tool.py": ('"""Helper."""\n\ndef axolotlify():\n    return 1\n', "axolotlify"),
        "site/page.html": (html_bytes("Ocelot page", "<p>The ocelotine report is here.</p>"), "ocelotine"),
        "data/table.csv": ("name,city\nnarwhalia,Oslo\n", "narwhalia"),
        "lab/run.ipynb": (ipynb_bytes([("markdown", "# Run\n\npangolinity results")]), "pangolinity"),
        "docs/report.pdf": (pdf_bytes(["Intro page", "The capybarine figures", "Closing"]), "capybarine"),
        "docs/memo.docx": (docx_bytes(["Memo", "The wombatish plan stands."], headings={0: 1}), "wombatish"),
        "docs/deck.pptx": (pptx_bytes([["Deck", "The lemurine roadmap"]]), "lemurine"),
        "docs/sheet.xlsx": (xlsx_bytes({"Budget": [["item", "cost"], ["tapirium", "12"]]}), "tapirium"),
    }
    for relative, (data, _) in files.items():
        _write(root, relative, data)
    _write(root, ".hidden/secret.md", "hidden files are ignored")
    _write(root, "node_modules/dep/readme.md", "dependencies are ignored")
    return {relative: word for relative, (_, word) in files.items()}


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[EmbeddedRuntime]:
    settings = Settings(data_dir=tmp_path / "data", convert_workers=2, convert_timeout_s=30)
    with EmbeddedRuntime(settings) as runtime:
        yield runtime


async def _all(runtime: EmbeddedRuntime) -> list[Hit]:
    hits, cursor = [], None
    while True:
        page = await runtime.engine.list(ListRequest(limit=200, cursor=cursor))
        hits.extend(page.items)
        if page.next_cursor is None:
            return hits
        cursor = page.next_cursor


def _by_path(hits: list[Hit], root: Path) -> dict[str, list[Hit]]:
    found: dict[str, list[Hit]] = {}
    for hit in hits:
        assert hit.meta.file_path is not None
        found.setdefault(os.path.relpath(hit.meta.file_path, root), []).append(hit)
    return found


async def _fetch_ids(runtime: EmbeddedRuntime, word: str) -> set[str]:
    page = await runtime.engine.fetch(FetchRequest(query=word, mode=FetchMode.KEYWORD, limit=10))
    return {hit.id for hit in page.hits}


async def test_every_document_is_stored_once_with_its_metadata(runtime: EmbeddedRuntime, tmp_path: Path) -> None:
    root = tmp_path / "folder"
    words = _make_folder(root)
    entry = ensure_local_source(runtime.state, root)
    sync, batches = await runtime.sync(entry.id)
    assert (sync.listed, sync.upserts, sync.skipped) == (10, 10, 0)
    assert sum(b.failed for b in batches) == 0, runtime.state.dead_letters()
    by_path = _by_path(await _all(runtime), Path(os.path.realpath(root)))
    assert sorted(by_path) == sorted(words)
    for relative, word in words.items():
        (hit,) = by_path[relative]
        assert word in hit.text, relative
        assert hit.meta.source.kind.value == "folder" and hit.meta.source.id == entry.id
        assert hit.meta.workspace == os.path.realpath(root)
        assert hit.meta.folder == os.path.dirname(hit.meta.file_path or "")
        assert hit.meta.observed_at is not None
        assert await _fetch_ids(runtime, word) == {hit.id}, relative
    assert by_path["code/tool.py"][0].meta.language == "python"
    report = by_path["docs/report.pdf"][0]
    assert report.text.count("\f") == 2  # three pages, form feeds kept

    again, batches = await runtime.sync(entry.id)
    assert (again.upserts, again.deletes, sum(b.stored for b in batches)) == (0, 0, 0)


async def test_edit_delete_rename_and_touch(runtime: EmbeddedRuntime, tmp_path: Path) -> None:
    root = tmp_path / "folder"
    _make_folder(root)
    entry = ensure_local_source(runtime.state, root)
    await runtime.sync(entry.id)
    before = await _all(runtime)

    _write(root, "notes/plan.md", "# Plan\n\nThe launch moved: now the flamingozoid launch is on Monday.\n")
    (root / "notes/todo.txt").unlink()
    (root / "docs/memo.docx").rename(root / "docs/memo-final.docx")
    tool = root / "code/tool.py"
    os.utime(tool, ns=(tool.stat().st_atime_ns, tool.stat().st_mtime_ns + 5_000_000_000))

    sync, batches = await runtime.sync(entry.id)
    assert (sync.upserts, sync.deletes) == (3, 2)  # plan edited, memo renamed, tool touched; todo and old memo gone
    assert sum(b.unchanged for b in batches) == 1  # the touched file was read, found identical, not converted
    after = _by_path(await _all(runtime), Path(os.path.realpath(root)))
    assert "notes/todo.txt" not in after and "docs/memo.docx" not in after
    assert "wombatish" in after["docs/memo-final.docx"][0].text
    assert await _fetch_ids(runtime, "zebracorn") == set()
    assert await _fetch_ids(runtime, "flamingozoid") == {after["notes/plan.md"][0].id}
    assert await _fetch_ids(runtime, "quokkafruit") == set()
    tool_before = next(h for h in before if (h.meta.file_path or "").endswith("code/tool.py"))
    assert after["code/tool.py"][0].id == tool_before.id
    assert sum(len(hits) for hits in after.values()) == 9


async def test_planted_secrets_are_stored_scrubbed(runtime: EmbeddedRuntime, tmp_path: Path) -> None:
    root = tmp_path / "folder"
    _write(root, "leaky.md", "# Credentials dump\n\n" + "\n\n".join(SECRETS) + "\n")
    _write(root, "leaky.docx", docx_bytes(list(SECRETS)))
    entry = ensure_local_source(runtime.state, root)
    await runtime.sync(entry.id)
    hits = await _all(runtime)
    assert len(hits) == 2
    for hit in hits:
        for secret in SECRETS.values():
            assert secret not in hit.text, (hit.meta.file_path, secret)
        for token in ("[REDACTED_PRIVATE_KEY]", "[REDACTED]", "[REDACTED_PII_CPF]", "[REDACTED_PII_PHONE]"):
            assert token in hit.text, (hit.meta.file_path, token)


async def test_hostile_files_become_dead_letters_and_the_rest_is_stored(
    runtime: EmbeddedRuntime, tmp_path: Path
) -> None:
    root = tmp_path / "folder"
    _write(root, "good.md", "# Good\n\nthe dromedarian note\n")
    _write(root, "broken.pdf", corrupt_pdf_bytes())
    _write(root, "bomb.xlsx", zip_bomb_bytes())
    _write(root, "noise.md", os.urandom(4096).replace(b"\n", b"\x00") + b"\xff\xfe")
    with (root / "huge.log").open("wb") as sparse:
        sparse.truncate(1024**3)
    os.symlink(root / "loop-b", root / "loop-a")
    os.symlink(root / "loop-a", root / "loop-b")
    entry = ensure_local_source(runtime.state, root)
    await runtime.sync(entry.id)

    hits = await _all(runtime)
    assert [os.path.basename(h.meta.file_path or "") for h in hits] == ["good.md"]
    letters = {letter.unit_id: letter for letter in runtime.state.dead_letters(entry.id)}
    assert sorted(letters) == ["bomb.xlsx", "broken.pdf", "huge.log", "loop-a", "loop-b", "noise.md"]
    assert "over the 10 MiB file limit" in letters["huge.log"].message
    assert "symbolic link" in letters["loop-a"].message
    assert "bomb.xlsx" in letters["bomb.xlsx"].message and "64 MiB" in letters["bomb.xlsx"].message
    assert letters["broken.pdf"].stage == "convert"
    assert letters["noise.md"].stage == "convert"

    # Fixing a file clears its dead letter on the next sync.
    _write(root, "noise.md", "now it is text: the dromedarian sequel\n")
    await runtime.sync(entry.id)
    assert "noise.md" not in {letter.unit_id for letter in runtime.state.dead_letters(entry.id)}
    assert len(await _all(runtime)) == 2


async def test_a_namespace_and_a_filter_reach_the_items(runtime: EmbeddedRuntime, tmp_path: Path) -> None:
    root = tmp_path / "team-notes"
    _write(root, "a.md", "alpacaroo")
    entry = ensure_local_source(runtime.state, root).model_copy(update={"namespace": "team:acme"})
    runtime.state.put_source(entry)
    await runtime.sync(entry.id)
    hits = await _all(runtime)
    assert [str(h.meta.namespace) for h in hits] == ["team:acme"]
    scoped = await runtime.engine.list(ListRequest(limit=5, filter=MetaFilter(source_id=entry.id)))
    assert [h.id for h in scoped.items] == [hits[0].id]
