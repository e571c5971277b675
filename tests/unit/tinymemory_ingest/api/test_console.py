"""The console in-process: pages render as plain HTML (no script needed), logins keep the token in a strict
cookie, every action needs an admin and the session's CSRF token, reads are confined to the token's reach,
and ordinary mistakes are pages that say what was wrong."""

from __future__ import annotations

import html
import re
from pathlib import Path

import httpx
import pytest

from engines.contract import Document, MemoryMeta, Namespace, SourceKind
from tests.unit.tinymemory_ingest.api.conftest import Api
from worker.control import SourceEntry
from worker.records import DeadLetter
from worker.state.sqlite import SqliteStateStore

PAGES = ["/sources", "/progress", "/progress/live", "/dead-letters", "/erasures", "/search", "/explore", "/login"]
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(page: httpx.Response) -> str:
    found = _CSRF.search(page.text)
    assert found is not None, page.text
    return found.group(1)


async def log_in(api: Api, token: str) -> None:
    login = await api.client.get("/login")
    sent = await api.client.post("/login", data={"token": token, "csrf": csrf_of(login), "next": "/sources"})
    assert sent.status_code == 303 and sent.headers["location"] == "/sources", sent.text


def _token(api: Api, name: str, **rights: object) -> str:
    return api.token(name, **rights)["Authorization"].removeprefix("Bearer ")


def _add_source(api: Api, folder: Path, source_id: str = "notes", namespace: str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    state = SqliteStateStore(api.settings.state_file)
    entry = SourceEntry(id=source_id, kind="folder", label=source_id, path=str(folder), namespace=namespace)
    state.put_source(entry)
    state.add_dead_letter(
        DeadLetter(source_id=source_id, unit_id="broken.pdf", stage="convert", error="ConvertError", message="bad PDF")
    )
    state.close()


async def test_every_page_renders_for_the_root_on_loopback_without_a_script(api: Api) -> None:
    for path in PAGES:
        page = await api.client.get(path)
        assert page.status_code == 200, (path, page.text)
        if path != "/progress/live":
            assert page.headers["content-type"].startswith("text/html")
            assert '<script src="/static/console.js" defer></script>' in page.text
            assert "<script>" not in page.text  # nothing inline: the pages work with scripts off
    assert (await api.client.get("/", follow_redirects=False)).headers["location"] == "/sources"
    assert (await api.client.get("/static/console.css")).status_code == 200


async def test_the_progress_page_shows_an_admin_the_vector_backlog(api: Api, tmp_path: Path) -> None:
    await api.engine.wait_for_vectors(timeout_s=20)  # type: ignore[attr-defined]
    live = await api.client.get("/progress/live")
    assert 'id="vectors-title"' in live.text and 'data-vectors="0"' in live.text
    assert "every passage has its vector" in live.text
    vectors = (await api.client.get("/v1/status")).json()["vectors"]
    assert (vectors["waiting"], vectors["eta_s"]) == (0, 0.0)
    _add_source(api, tmp_path / "notes")
    await log_in(api, _token(api, "reader", read_only=True))
    assert "vectors-title" not in (await api.client.get("/progress/live")).text  # the whole file's: an admin's


async def test_without_tokens_only_loopback_is_answered(api: Api) -> None:
    elsewhere = await api.client.get("http://memory.example/sources")
    assert elsewhere.status_code == 403 and "loopback" in elsewhere.text
    assert elsewhere.headers["content-type"].startswith("text/html")


async def test_a_login_keeps_the_token_in_a_strict_http_only_cookie(api: Api) -> None:
    token = _token(api, "ops", admin=True)
    redirected = await api.client.get("/sources", follow_redirects=False)
    assert (redirected.status_code, redirected.headers["location"]) == (303, "/login?next=/sources")
    login = await api.client.get("/login")
    wrong = await api.client.post("/login", data={"token": "nope", "csrf": csrf_of(login)}, follow_redirects=True)
    assert "not valid" in wrong.text and "tm_token" not in api.client.cookies
    sent = await api.client.post("/login", data={"token": token, "csrf": csrf_of(login), "next": "/sources"})
    cookie = next(v for v in sent.headers.get_list("set-cookie") if v.startswith("tm_token="))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    shown = await api.client.get("/sources")
    assert shown.status_code == 200 and "ops (admin)" in shown.text and "logged in as ops" in shown.text


async def test_a_login_goes_back_only_to_a_page_of_the_console(api: Api) -> None:
    token = _token(api, "ops", admin=True)
    login = await api.client.get("/login")
    for target in ("//evil.example/x", "https://evil.example/", "\\\\evil"):
        sent = await api.client.post("/login", data={"token": token, "csrf": csrf_of(login), "next": target})
        assert sent.headers["location"] == "/"


async def test_a_login_form_from_elsewhere_is_refused(api: Api) -> None:
    token = _token(api, "ops", admin=True)
    forged = await api.client.post("/login", data={"token": token, "csrf": "0" * 64})
    assert forged.status_code == 403 and "CSRF" in forged.text and "tm_token" not in api.client.cookies


async def test_every_action_needs_the_session_csrf_token(api: Api, tmp_path: Path) -> None:
    _add_source(api, tmp_path / "notes")
    page = await api.client.get("/sources")
    actions = ["/sources/notes/sync", "/sources/notes/enabled", "/sources/notes/remove", "/dead-letters/replay"]
    for action in [*actions, "/dead-letters/purge", "/erasures", "/sources"]:
        for sent in ({}, {"csrf": "f" * 64}):
            refused = await api.client.post(action, data=sent)
            assert refused.status_code == 403 and "CSRF" in refused.text, action
    # The right token works, and a disabled source is shown so.
    done = await api.client.post(
        "/sources/notes/enabled", data={"csrf": csrf_of(page), "enabled": "false"}, follow_redirects=True
    )
    assert "notes is disabled" in done.text and ">Enable<" in done.text


async def test_a_read_only_token_sees_status_and_search_but_no_action(api: Api, tmp_path: Path) -> None:
    _add_source(api, tmp_path / "notes")
    await log_in(api, _token(api, "reader", read_only=True))
    sources = await api.client.get("/sources")
    assert sources.status_code == 200 and "notes" in sources.text and "reader (read-only)" in sources.text
    assert not re.search(r'action="/(sources|dead-letters|erasures)', sources.text)
    letters = await api.client.get("/dead-letters")
    assert "bad PDF" in letters.text and "Replay" not in letters.text
    assert 'href="/erasures"' not in sources.text
    assert (await api.client.get("/erasures")).status_code == 403
    found = await api.client.get("/search", params={"q": "zeolites"})
    assert found.status_code == 200 and "zeolites" in found.text
    csrf = csrf_of(sources)  # the logout form's: a valid token for this session
    for action, data in (
        ("/sources/notes/sync", {}),
        ("/sources/notes/remove", {}),
        ("/dead-letters/purge", {"confirm": "on"}),
        ("/erasures", {"scope": "source", "target": "notes", "confirm": "notes"}),
    ):
        refused = await api.client.post(action, data={"csrf": csrf, **data})
        assert refused.status_code == 403 and "admin" in refused.text, action
    assert (await api.client.get("/dead-letters")).text.count("bad PDF") == 1  # nothing was purged


async def test_reads_are_confined_to_the_token_reach(api: Api) -> None:
    await log_in(api, _token(api, "alice", place="user:a", reach="inherit"))
    found = await api.client.get("/search", params={"q": "zeolites", "mode": "keyword"})
    assert "alice likes zeolites" in found.text and "the root knows" in found.text
    assert "bob likes zeolites" not in found.text
    bob = await api.engine.store(
        Document.from_text("bob keeps a secret zeolite", meta=MemoryMeta(namespace=Namespace.parse("user:b")))
    )
    hidden = await api.client.get(f"/items/{bob.id}")
    assert hidden.status_code == 404 and "no item" in hidden.text
    facets = await api.client.get("/explore", params={"facet": "tag"})
    # The root's and alice's documents are tagged, her learning is not; bob's two are out of reach.
    assert re.search(r'class="bar-count">2<', facets.text) and "1 items have no tag" in facets.text


async def test_search_shows_hits_an_answer_with_citations_and_items_with_redactions_marked(api: Api) -> None:
    stored = await api.engine.store(
        Document.from_text("# Vault\n\nthe quartz password: [REDACTED] stays here", title="vault")
    )
    found = await api.client.get("/search", params={"q": "quartz", "kind": "document"})
    assert f'href="/items/{stored.id}"' in found.text
    assert re.search(r'<ol class="citations">\s*<li id="cite-1"><a href="/items/', found.text)
    item = await api.client.get(f"/items/{stored.id}")
    assert '<mark class="redacted">[REDACTED]</mark>' in item.text and "quartz password" in item.text
    none = await api.client.get("/search", params={"q": "quartz", "kind": "learning"})
    assert f"/items/{stored.id}" not in none.text


async def test_explore_drills_down_by_adding_the_bucket_to_the_filter(api: Api) -> None:
    shown = await api.client.get("/explore", params={"facet": "kind"})
    assert re.search(r'href="/explore\?facet=source&amp;kind=document"', shown.text), shown.text
    drilled = await api.client.get("/explore", params={"facet": "tag", "kind": "document"})
    assert "kind = document" in drilled.text and re.search(r'class="bar-count">3<', drilled.text)
    assert 'href="/explore?facet=tag"' in drilled.text  # the undo link drops the kind


@pytest.mark.parametrize(
    ("path", "params", "said"),
    [
        ("/search", {"q": "x", "mode": "psychic"}, "fetch mode 'psychic' is not one of"),
        ("/search", {"q": "x", "kind": "gossip"}, "kind 'gossip' is not one of"),
        ("/explore", {"facet": "colour"}, "facet 'colour' is not one of"),
        ("/erasures/nope", {}, "no erasure 'nope'"),
        ("/dead-letters", {"source": "ghost"}, "no source 'ghost'"),
    ],
)
async def test_an_ordinary_mistake_is_a_page_that_says_what_was_wrong(
    api: Api, path: str, params: dict[str, str], said: str
) -> None:
    page = await api.client.get(path, params=params)
    assert page.status_code in (400, 403, 404) and page.headers["content-type"].startswith("text/html")
    assert said in html.unescape(page.text) and "Traceback" not in page.text


async def test_an_erasure_needs_its_target_typed_again(api: Api, tmp_path: Path) -> None:
    _add_source(api, tmp_path / "notes")
    csrf = csrf_of(await api.client.get("/erasures"))
    unconfirmed = await api.client.post(
        "/erasures", data={"csrf": csrf, "scope": "source", "target": "notes", "confirm": "note"}, follow_redirects=True
    )
    assert "type 'notes' again to confirm" in html.unescape(unconfirmed.text)
    assert "data-erasure=" not in unconfirmed.text
    asked = await api.client.post(
        "/erasures", data={"csrf": csrf, "scope": "source", "target": "notes", "confirm": "notes"}
    )
    assert asked.status_code == 303 and asked.headers["location"].startswith("/erasures/")
    receipt = await api.client.get(asked.headers["location"])
    assert "source notes" in receipt.text and 'id="erasure-status"' in receipt.text
    listed = await api.client.get("/erasures")
    assert listed.text.count("data-erasure=") == 1


async def test_purging_dead_letters_needs_the_box_ticked(api: Api, tmp_path: Path) -> None:
    _add_source(api, tmp_path / "notes")
    csrf = csrf_of(await api.client.get("/dead-letters"))
    kept = await api.client.post("/dead-letters/purge", data={"csrf": csrf, "source": "notes"}, follow_redirects=True)
    assert "tick the box" in kept.text and "bad PDF" in kept.text
    gone = await api.client.post(
        "/dead-letters/purge", data={"csrf": csrf, "source": "notes", "confirm": "on"}, follow_redirects=True
    )
    assert "purged 1 dead letters" in gone.text and "bad PDF" not in gone.text


async def test_a_bad_source_is_refused_with_the_reason(api: Api, tmp_path: Path) -> None:
    csrf = csrf_of(await api.client.get("/sources"))
    bad = await api.client.post(
        "/sources", data={"csrf": csrf, "kind": "folder", "target": str(tmp_path / "missing"), "interval_s": "-3"}
    )
    assert bad.status_code == 400 and "interval_s" in bad.text
    unknown = await api.client.post("/sources", data={"csrf": csrf, "kind": "carrier-pigeon", "target": "x"})
    assert unknown.status_code == 400 and "carrier-pigeon" in unknown.text


async def test_removing_a_source_forgets_its_items_unless_they_are_kept(api: Api, tmp_path: Path) -> None:
    _add_source(api, tmp_path / "notes")
    _add_source(api, tmp_path / "other", source_id="other")
    for source_id in ("notes", "other"):
        meta = MemoryMeta.from_source(SourceKind.FOLDER, source_id)
        await api.engine.store(Document.from_text(f"{source_id} remembers the gannet", meta=meta))
    csrf = csrf_of(await api.client.get("/sources"))
    forgot = await api.client.post("/sources/notes/remove", data={"csrf": csrf}, follow_redirects=True)
    assert "removed notes; 1 items forgotten" in forgot.text and 'data-source="notes"' not in forgot.text
    kept = await api.client.post(
        "/sources/other/remove", data={"csrf": csrf, "keep_items": "on"}, follow_redirects=True
    )
    assert "removed other; its items were kept" in kept.text
    found = await api.client.get("/search", params={"q": "gannet", "mode": "keyword"})
    assert "other remembers the gannet" in found.text and "notes remembers" not in found.text
