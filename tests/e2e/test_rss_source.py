"""An RSS feed on a real loopback server, synced by the embedded runtime and by real Celery workers.

Each runtime stores every entry with its link, time and title; an unchanged feed costs one conditional
request (a 304) and changes nothing; an edited entry replaces its item; an entry that rolls off the feed stays
stored; a feed that turns into something that is not XML fails the listing with a clear error and leaves what
was stored. A 500-entry feed goes in several batches while the feed is fetched only a few times. The command
line adds a feed with `--max-items` and syncs it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engines.contract import Hit, InvalidRequestError, ListRequest, MemoryEngine, MetaFilter
from engines.local import LocalEngine
from sources import REGISTRY, SourceRequest
from tests.fixtures.web_site import Page, WebSite
from tests.integration.cluster import Cluster, cluster_fixture
from tinymemory_ingest.cli import app
from worker import control
from worker.embedded import EmbeddedRuntime
from worker.settings import Settings

FEED = "/feed.xml"
BIG = "/big.xml"
START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def when(n: int) -> datetime:
    return START + timedelta(hours=n)


def entry_xml(n: int, body: str | None = None) -> str:
    text = body if body is not None else f"Entry {n} is about the quokka colony number {n}."
    return (
        f"<item><guid>tag:news.example,2025:post-{n:03}</guid><title>Post {n}</title>"
        f"<link>https://news.example/posts/{n}</link><pubDate>{format_datetime(when(n), usegmt=True)}</pubDate>"
        f"<description>&lt;p&gt;{text}&lt;/p&gt;</description></item>"
    )


def feed(*entries: str) -> Page:
    channel = f"<channel><title>News</title>{''.join(entries)}</channel>"
    body = f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0">{channel}</rss>'
    return Page(
        body=body,
        content_type="application/rss+xml; charset=utf-8",
        etag=f'"{hashlib.sha256(body.encode()).hexdigest()[:12]}"',
    )


async def _hits(engine: MemoryEngine, source_id: str) -> list[Hit]:
    hits: list[Hit] = []
    cursor = None
    while True:
        page = await engine.list(ListRequest(limit=500, cursor=cursor, filter=MetaFilter(source_id=source_id)))
        hits.extend(page.items)
        if page.next_cursor is None:
            return hits
        cursor = page.next_cursor


def _by_link(hits: list[Hit]) -> dict[str, Hit]:
    return {hit.meta.url or "": hit for hit in hits}


def _link(n: int) -> str:
    return f"https://news.example/posts/{n}"


def _check_first_sync(hits: list[Hit]) -> None:
    stored = _by_link(hits)
    assert sorted(stored) == sorted(_link(n) for n in range(3))
    hit = stored[_link(1)]
    assert hit.text == "# Post 1\n\nEntry 1 is about the quokka colony number 1."
    assert hit.meta.observed_at == when(1) and hit.meta.source.id == "news"


@pytest.fixture
def site() -> Iterator[WebSite]:
    with WebSite({FEED: feed(*(entry_xml(n) for n in range(3)))}) as running:
        yield running


# -- the embedded runtime ----------------------------------------------------------------------------------


@pytest.mark.e2e
async def test_a_feed_in_the_embedded_runtime(tmp_path: Path, site: WebSite) -> None:
    settings = Settings(data_dir=tmp_path / "data", convert_workers=1, allow_private_networks=True)
    with EmbeddedRuntime(settings) as runtime:
        entry = control.add_source(runtime.state, SourceRequest(kind="rss", target=site.url(FEED), id="news"))
        first, _ = await runtime.sync(entry.id)
        assert (first.listed, first.upserts) == (3, 3)
        _check_first_sync(await _hits(runtime.engine, "news"))
        assert site.requests[FEED] == 1  # the entries were read from the feed the listing fetched

        site.reset_counts()
        again, batches = await runtime.sync(entry.id)
        assert (again.upserts, again.deletes, batches) == (0, 0, [])
        assert (site.requests[FEED], site.not_modified[FEED]) == (1, 1)

        site.pages[FEED] = feed(entry_xml(0), entry_xml(1, "Entry 1 now covers the wombat burrows."), entry_xml(2))
        site.reset_counts()
        _, batches = await runtime.sync(entry.id)
        stored = _by_link(await _hits(runtime.engine, "news"))
        assert stored[_link(1)].text.endswith("wombat burrows.") and len(stored) == 3
        assert not any("quokka colony number 1." in hit.text for hit in stored.values())
        assert sum(b.stored for b in batches) == 1 and sum(b.forgotten for b in batches) == 1
        assert site.requests[FEED] == 1

        site.pages[FEED] = feed(entry_xml(1, "Entry 1 now covers the wombat burrows."), entry_xml(2), entry_xml(3))
        rolled, _ = await runtime.sync(entry.id)
        assert rolled.deletes == 0
        assert sorted(_by_link(await _hits(runtime.engine, "news"))) == [_link(n) for n in range(4)]

        site.pages[FEED] = Page(body="<<<< this is no feed >>>>", content_type="application/rss+xml")
        with pytest.raises(InvalidRequestError, match=f"{site.url(FEED)} is not an RSS or Atom feed: it is not well"):
            await runtime.sync(entry.id)
        assert len(await _hits(runtime.engine, "news")) == 4


@pytest.mark.e2e
async def test_a_500_entry_feed_goes_in_several_batches_fetched_a_few_times(tmp_path: Path) -> None:
    with WebSite({BIG: feed(*(entry_xml(n) for n in range(500)))}) as site:
        settings = Settings(data_dir=tmp_path / "data", convert_workers=2, allow_private_networks=True)
        with EmbeddedRuntime(settings) as runtime:
            request = SourceRequest(kind="rss", target=site.url(BIG), id="big", max_items=500)
            entry = control.add_source(runtime.state, request)
            report, batches = await runtime.sync(entry.id)
            assert (report.upserts, report.batches) == (500, 5)
            assert sum(b.stored for b in batches) == 500 and len(await _hits(runtime.engine, "big")) == 500
            print(f"500 entries in {report.batches} batches: the feed fetched {site.requests[BIG]} times")
            # The listing, and at most once more in each text preparation process (its own cache).
            assert site.requests[BIG] <= 1 + settings.convert_workers


# -- the command line --------------------------------------------------------------------------------------


@pytest.mark.e2e
def test_the_command_line_adds_a_feed_with_max_items(
    tmp_path: Path, site: WebSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.pages[FEED] = feed(*(entry_xml(n) for n in range(7)))
    monkeypatch.setenv("TINYMEMORY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TINYMEMORY_CONVERT_WORKERS", "1")
    monkeypatch.setenv("TINYMEMORY_ALLOW_PRIVATE_NETWORKS", "true")
    monkeypatch.delenv("TINYMEMORY_CONFIG", raising=False)
    runner = CliRunner()
    added = runner.invoke(app, ["sources", "add", "rss", site.url(FEED), "--max-items", "5"], catch_exceptions=False)
    assert added.exit_code == 0
    source_id = added.stdout.strip()
    shown = json.loads(runner.invoke(app, ["sources", "show", source_id, "--json"]).stdout)
    assert (shown["source"]["kind"], shown["source"]["max_items"], shown["source"]["url"]) == (
        "rss_feed",
        5,
        site.url(FEED),
    )
    synced = runner.invoke(app, ["sources", "sync", source_id], catch_exceptions=False)
    assert synced.exit_code == 0 and "synced: 5 changed" in synced.stdout
    listed = json.loads(runner.invoke(app, ["list", "--json"]).stdout)["hits"]
    assert sorted(hit["meta"]["url"] for hit in listed) == sorted(_link(n) for n in range(5))


# -- real Celery workers -----------------------------------------------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


def _stored(cluster: Cluster, source_id: str) -> list[Hit]:
    async def read() -> list[Hit]:
        engine = LocalEngine(cluster.data_dir / "memory.sqlite3")
        try:
            return await _hits(engine, source_id)
        finally:
            engine.close()

    return asyncio.run(read())


def _synced(cluster: Cluster, source_id: str, since: datetime | None) -> bool:
    last = cluster.state().last_sync(source_id)
    return last is not None and (since is None or last.finished_at > since) and cluster.idle()


def _sync(cluster: Cluster, source_id: str, what: str) -> None:
    last = cluster.state().last_sync(source_id)
    assert cluster.sync(source_id)
    cluster.wait(lambda: _synced(cluster, source_id, None if last is None else last.finished_at), 60, what)


def _logs(cluster: Cluster) -> str:
    return "".join(path.read_text(errors="replace") for path in sorted(cluster.root.glob("worker-*.log")))


@pytest.mark.integration
@pytest.mark.slow
def test_a_feed_in_celery_workers(cluster: Cluster, site: WebSite) -> None:
    site.pages[BIG] = feed(*(entry_xml(n) for n in range(500)))
    cluster.extra_env["TINYMEMORY_ALLOW_PRIVATE_NETWORKS"] = "true"
    state = cluster.state()
    state.put_source(REGISTRY.configure(SourceRequest(kind="rss", target=site.url(FEED), id="news")))
    big = SourceRequest(kind="rss", target=site.url(BIG), id="big", max_items=500)
    state.put_source(REGISTRY.configure(big))
    cluster.start_worker()

    _sync(cluster, "news", "the first sync")
    first = _stored(cluster, "news")
    _check_first_sync(first)
    site.reset_counts()
    _sync(cluster, "news", "the unchanged sync")
    assert (site.requests[FEED], site.not_modified[FEED]) == (1, 1)
    assert sorted(hit.id for hit in _stored(cluster, "news")) == sorted(hit.id for hit in first)

    site.pages[FEED] = feed(entry_xml(1, "Entry 1 now covers the wombat burrows."), entry_xml(2), entry_xml(3))
    _sync(cluster, "news", "the edit and the roll-off")
    stored = _by_link(_stored(cluster, "news"))
    assert sorted(stored) == [_link(n) for n in range(4)] and stored[_link(1)].text.endswith("wombat burrows.")
    assert not any("quokka colony number 1." in hit.text for hit in stored.values())

    site.pages[FEED] = Page(body="<<<< this is no feed >>>>", content_type="application/rss+xml")
    requests = site.requests[FEED]
    assert cluster.sync("news")
    message = f"{site.url(FEED)} is not an RSS or Atom feed"
    cluster.wait(lambda: site.requests[FEED] > requests and message in _logs(cluster), 60, "the refused feed")
    assert len(_stored(cluster, "news")) == 4

    site.reset_counts()
    _sync(cluster, "big", "the 500-entry feed's sync")
    cluster.wait(lambda: cluster.committed("big") == 500 and cluster.idle(), 120, "the 500 entries")
    assert len(_stored(cluster, "big")) == 500 and cluster.state().last_sync("big").batches == 5  # type: ignore[union-attr]
    print(f"500 entries in 5 batches by Celery: the feed fetched {site.requests[BIG]} times")
    assert site.requests[BIG] <= 2
