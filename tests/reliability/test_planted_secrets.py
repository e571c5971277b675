"""Planted secrets in every format the pipeline reads, stored through the real pipeline into the local engine
(embedded runtime): a folder of markdown, PDF, Word, Excel, HTML and a notebook; a conversation thread and a
ChatGPT export; a file of a GitHub repository (the fake API); an RSS feed entry (a loopback site). Every
stored item is read back, page by page, and none may hold any planted secret."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from sources import SourceRequest
from tests.e2e.test_embedded_pipeline import SECRETS
from tests.fixtures.documents import docx_bytes, html_bytes, ipynb_bytes, pdf_bytes, xlsx_bytes
from tests.fixtures.github_fake import FakeGitHub, GitRepo
from tests.fixtures.web_site import Page, WebSite
from tests.reliability.conftest import Figures, every_item
from worker import control
from worker.embedded import EmbeddedRuntime
from worker.settings import Settings

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# Every class the scrubber knows (planted text → the part that must not survive), one per line.
PLANTED = list(SECRETS)
FORBIDDEN = sorted(set(SECRETS.values()))


def _marker(fmt: str) -> str:
    """A word only the items of one format hold, so a format that stored nothing cannot pass unseen."""
    return f"kiwimark{fmt}"


def _lines(fmt: str) -> list[str]:
    return [f"The {_marker(fmt)} credentials dump.", *PLANTED]


def _chatgpt_export(fmt: str) -> list[dict[str, object]]:
    def node(node_id: str, parent: str | None, role: str | None, text: str, children: list[str]) -> dict[str, object]:
        message = None if role is None else {"author": {"role": role}, "content": {"parts": [text]}, "create_time": 1}
        return {"id": node_id, "message": message, "parent": parent, "children": children}

    mapping = {
        "root": node("root", None, None, "", ["q"]),
        "q": node("q", "root", "user", "\n".join(_lines(fmt)), ["a"]),
        "a": node("a", "q", "assistant", "Noted: " + " ".join(PLANTED[:5]), []),
    }
    return [
        {"id": "leak-1", "title": "leak", "create_time": 1, "update_time": 2, "mapping": mapping, "current_node": "a"}
    ]


def _folder(root: Path) -> None:
    text = "\n\n".join(_lines("md"))
    files: dict[str, bytes] = {
        "leaky.md": f"# Credentials\n\n{text}\n".encode(),
        "leaky.pdf": pdf_bytes(["\n".join(_lines("pdf"))]),
        "leaky.docx": docx_bytes(_lines("docx")),
        "leaky.xlsx": xlsx_bytes({"Keys": [["what"], *([line] for line in _lines("xlsx"))]}),
        "leaky.html": html_bytes("Keys", "".join(f"<p>{line}</p>" for line in _lines("html"))),
        "leaky.ipynb": ipynb_bytes([("markdown", "\n\n".join(_lines("ipynb"))), ("code", f"token = '{PLANTED[7]}'")]),
    }
    root.mkdir()
    for name, data in files.items():
        (root / name).write_bytes(data)


def _threads(root: Path) -> None:
    (root / "export").mkdir(parents=True)
    thread = {
        "messages": [{"role": "user", "content": "\n".join(_lines("thread"))}, {"role": "assistant", "content": "ok"}]
    }
    (root / "leak.json").write_text(json.dumps(thread))
    (root / "export" / "conversations.json").write_text(json.dumps(_chatgpt_export("export")))


def _feed() -> Page:
    description = "".join(f"&lt;p&gt;{line}&lt;/p&gt;" for line in _lines("feed")).replace("\n", "&#10;")
    item = (
        "<item><guid>tag:leak.example,2025:1</guid><title>Leak</title><link>https://leak.example/1</link>"
        f"<pubDate>Sat, 01 Mar 2025 09:00:00 GMT</pubDate><description>{description}</description></item>"
    )
    body = (
        f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>Leaks</title>{item}</channel></rss>'
    )
    return Page(body=body, content_type="application/rss+xml; charset=utf-8")


@pytest.fixture
def github(tmp_path: Path) -> Iterator[FakeGitHub]:
    repo = GitRepo.create(tmp_path / "repo")
    repo.write("config/settings.md", "\n\n".join(_lines("github")) + "\n")
    repo.commit("add the settings")
    with FakeGitHub() as server:
        server.add_repo("acme/leaky", repo)
        yield server


def _leaks(text: str) -> list[str]:
    """The planted secrets found in `text`, as written or with their spacing changed (a PDF's line breaks)."""
    squeezed = re.sub(r"\s+", "", text)
    return [s for s in FORBIDDEN if s in text or (len(s) >= 8 and re.sub(r"\s+", "", s) in squeezed)]


async def test_no_planted_secret_is_stored_in_any_format(tmp_path: Path, github: FakeGitHub, figures: Figures) -> None:
    _folder(tmp_path / "folder")
    _threads(tmp_path / "chats")
    settings = Settings(
        data_dir=tmp_path / "data", convert_workers=1, github_api_url=github.url, allow_private_networks=True
    )
    with WebSite({"/feed.xml": _feed()}) as site, EmbeddedRuntime(settings) as runtime:
        requests = [
            SourceRequest(kind="folder", target=str(tmp_path / "folder")),
            SourceRequest(kind="conversation", target=str(tmp_path / "chats")),
            SourceRequest(kind="github", target="acme/leaky"),
            SourceRequest(kind="rss", target=site.url("/feed.xml")),
        ]
        for request in requests:
            entry = control.add_source(runtime.state, request)
            await runtime.sync(entry.id)
        letters = runtime.state.dead_letters()
        hits = await every_item(runtime.engine, page=7)

    formats = ["md", "pdf", "docx", "xlsx", "html", "ipynb", "thread", "export", "github", "feed"]
    holding = {fmt: [h for h in hits if _marker(fmt) in h.text] for fmt in formats}
    leaked = {(h.meta.file_path or h.meta.url or h.id, s) for h in hits for s in _leaks(h.text)}
    redactions = sum(h.text.count("[REDACTED") for h in hits)
    figures(
        f"secrets leaked: {len(leaked)}; {len(FORBIDDEN)} secret classes planted in {len(formats)} formats, "
        f"{len(hits)} items read back, {redactions} redactions; dead letters: {len(letters)}"
    )
    assert leaked == set()
    assert letters == []
    assert all(holding.values()), {fmt: len(found) for fmt, found in holding.items()}
    for fmt, found in holding.items():
        text = "".join(h.text for h in found)
        assert "[REDACTED_PRIVATE_KEY]" in text and "[REDACTED_PII_PHONE]" in text, fmt
