"""A link source over a sitemap on a real loopback web site, synced by both runtimes.

Each runtime goes through the same story: a first sync stores every page of the sitemap's host and dead-letters
the page that redirects to the cloud metadata address; an unchanged sync costs one conditional request per page
and stores nothing; a new ETag replaces a page's item; a 404 deletes it; a 503 deletes nothing. The guard
reaches loopback only because the settings allow private networks; link-local stays refused even so.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.contract import InvalidRequestError, ListRequest, MetaFilter
from engines.local import LocalEngine
from sources import REGISTRY, SourceRequest
from tests.fixtures.web_site import Page, WebSite, html, sitemap_xml
from tests.integration.cluster import Cluster, cluster_fixture
from worker import control
from worker.embedded import EmbeddedRuntime
from worker.settings import Settings
from worker.state.base import StateStore

PAGES = ("/a", "/b", "/c")
METADATA = "http://169.254.169.254/latest/meta-data/"


@pytest.fixture
def site() -> Iterator[WebSite]:
    with WebSite() as served:
        for path in PAGES:
            name = path.strip("/")
            served.pages[path] = Page(html(f"Page {name}", f"the page {name} about basalt{name}"), etag=f'"{name}1"')
        served.redirect("/meta", METADATA)
        served.pages["/sitemap.xml"] = Page(
            sitemap_xml([served.url(p) for p in (*PAGES, "/meta")]), content_type="application/xml"
        )
        yield served


async def _items(engine: LocalEngine, source_id: str) -> dict[str, tuple[str, str]]:
    """page path → (item id, text) of its one item."""
    page = await engine.list(ListRequest(limit=500, filter=MetaFilter(source_id=source_id)))
    assert page.next_cursor is None
    items: dict[str, tuple[str, str]] = {}
    for hit in page.items:
        path = "/" + (hit.meta.url or "").split("/", 3)[3]
        assert path not in items, f"{path} has more than one item"
        items[path] = (hit.id, hit.text)
    return items


def _letters(state: StateStore, source_id: str) -> dict[str, tuple[str, str]]:
    return {d.unit_id: (d.stage, d.message) for d in state.dead_letters(source_id)}


def _request(site: WebSite) -> SourceRequest:
    return SourceRequest(kind="link", target=site.url("/sitemap.xml"), sitemap=True, id="web")


def _assert_metadata_refused(letters: dict[str, tuple[str, str]], site: WebSite) -> None:
    stage, message = letters[site.url("/meta")]
    assert stage == "list"
    assert "redirect not followed" in message and "169.254.169.254 is a link-local address" in message


@pytest.mark.e2e
async def test_a_sitemap_in_the_embedded_runtime(tmp_path: Path, site: WebSite) -> None:
    settings = Settings(data_dir=tmp_path / "data", convert_workers=1, allow_private_networks=True)
    with EmbeddedRuntime(settings) as runtime:
        entry = control.add_source(runtime.state, _request(site))
        first, _ = await runtime.sync(entry.id)
        assert (first.listed, first.upserts, first.skipped) == (3, 3, 1)
        stored = await _items(runtime.engine, entry.id)
        assert sorted(stored) == list(PAGES) and "basalta" in stored["/a"][1]
        assert all(site.requests[p] == 1 for p in PAGES)  # the read took the body the listing fetched
        assert site.requests["/meta"] == 1  # and the metadata address was never asked
        _assert_metadata_refused(_letters(runtime.state, entry.id), site)

        site.reset_counts()
        unchanged, batches = await runtime.sync(entry.id)
        assert (unchanged.upserts, unchanged.deletes, batches) == (0, 0, [])
        assert all((site.requests[p], site.not_modified[p]) == (1, 1) for p in PAGES)
        assert site.requests["/sitemap.xml"] == 1
        assert await _items(runtime.engine, entry.id) == stored

        site.pages["/b"] = Page(html("Page b", "the page b rewritten about gneiss"), etag='"b2"')
        changed, _ = await runtime.sync(entry.id)
        assert (changed.upserts, changed.deletes) == (1, 0)
        now = await _items(runtime.engine, entry.id)
        assert "gneiss" in now["/b"][1] and now["/b"][0] != stored["/b"][0]
        assert now["/a"] == stored["/a"] and len(now) == 3

        del site.pages["/c"]
        deleted, _ = await runtime.sync(entry.id)
        assert (deleted.upserts, deleted.deletes) == (0, 1)
        assert sorted(await _items(runtime.engine, entry.id)) == ["/a", "/b"]

        before = await _items(runtime.engine, entry.id)
        site.pages["/a"] = Page("down for maintenance", status=503)
        failing, _ = await runtime.sync(entry.id)
        assert (failing.upserts, failing.deletes) == (0, 0)
        assert await _items(runtime.engine, entry.id) == before


@pytest.mark.e2e
async def test_a_single_page_in_the_embedded_runtime(tmp_path: Path, site: WebSite) -> None:
    settings = Settings(data_dir=tmp_path / "data", convert_workers=1, allow_private_networks=True)
    with EmbeddedRuntime(settings) as runtime:
        entry = control.add_source(runtime.state, SourceRequest(kind="link", target=site.url("/a")))
        first, _ = await runtime.sync(entry.id)
        assert first.upserts == 1 and "basalta" in (await _items(runtime.engine, entry.id))["/a"][1]
        site.pages["/a"] = Page("gone", status=410)
        gone, _ = await runtime.sync(entry.id)
        assert gone.deletes == 1 and await _items(runtime.engine, entry.id) == {}


@pytest.mark.e2e
async def test_private_networks_stay_closed_unless_the_settings_open_them(tmp_path: Path, site: WebSite) -> None:
    with EmbeddedRuntime(Settings(data_dir=tmp_path / "data", convert_workers=1)) as runtime:
        entry = control.add_source(runtime.state, _request(site))
        with pytest.raises(InvalidRequestError, match=re.escape("127.0.0.1 is not a public address")):
            await runtime.sync(entry.id)
    assert sum(site.requests.values()) == 0


# -- the same story in real Celery workers ------------------------------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


def _stored(cluster: Cluster) -> dict[str, tuple[str, str]]:
    async def read() -> dict[str, tuple[str, str]]:
        engine = LocalEngine(cluster.data_dir / "memory.sqlite3")
        try:
            return await _items(engine, "web")
        finally:
            engine.close()

    return asyncio.run(read())


def _synced(cluster: Cluster, what: str, within_s: float = 60):  # type: ignore[no-untyped-def]
    """Ask for a sync and wait until it and its batches are done; its report."""
    state = cluster.state()
    last = state.last_sync("web")
    since = last.finished_at if last is not None else None
    assert cluster.sync("web")

    def done() -> bool:
        report = state.last_sync("web")
        return report is not None and report.finished_at != since and cluster.idle()

    cluster.wait(done, within_s, what)
    time.sleep(0.3)  # a batch acknowledged as the queue empties is committed right after
    cluster.wait(cluster.idle, within_s, what)
    return state.last_sync("web")


@pytest.mark.integration
@pytest.mark.slow
def test_a_sitemap_in_celery_workers(cluster: Cluster, site: WebSite) -> None:
    cluster.extra_env["TINYMEMORY_ALLOW_PRIVATE_NETWORKS"] = "true"
    cluster.state().put_source(REGISTRY.configure(_request(site)))
    cluster.start_worker()
    first = _synced(cluster, "the first sync", 120)
    assert (first.listed, first.upserts, first.skipped) == (3, 3, 1)
    cluster.wait(lambda: len(_stored(cluster)) == 3, 30, "three pages stored")
    stored = _stored(cluster)
    assert "basaltb" in stored["/b"][1]
    _assert_metadata_refused(_letters(cluster.state(), "web"), site)

    site.reset_counts()
    unchanged = _synced(cluster, "the unchanged sync")
    assert (unchanged.upserts, unchanged.deletes) == (0, 0)
    assert all((site.requests[p], site.not_modified[p]) == (1, 1) for p in PAGES)
    assert _stored(cluster) == stored

    site.pages["/b"] = Page(html("Page b", "the page b rewritten about gneiss"), etag='"b2"')
    del site.pages["/c"]
    changed = _synced(cluster, "the change and the deletion")
    assert (changed.upserts, changed.deletes) == (1, 1)
    cluster.wait(lambda: sorted(_stored(cluster)) == ["/a", "/b"], 30, "the deletion")
    now = _stored(cluster)
    assert "gneiss" in now["/b"][1] and now["/a"] == stored["/a"]

    site.pages["/a"] = Page("down for maintenance", status=503)
    failing = _synced(cluster, "the failing sync")
    assert (failing.upserts, failing.deletes) == (0, 0)
    assert _stored(cluster) == now
