"""A sync that outlasts its lease is still the only one of its source: a real `tinymemory worker` keeps the
sync lease extended while the sync runs, so a second enqueue meanwhile is refused (and remembered).

The lease is 1 s and the sync's listing takes 3 s: the sitemap the link source lists is served with a delay.
Every sitemap request starts one listing, so two listings overlap exactly when two requests start less than
the delay apart.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sources import REGISTRY, SourceRequest
from tests.fixtures.web_site import Page, WebSite, sitemap_xml
from tests.integration.cluster import Cluster, cluster_fixture
from tests.reliability.conftest import Figures
from worker.cluster.runtime import sync_lease
from worker.redis.leases import Leases

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LEASE_S = 1.0
LISTING_S = 3.0
SITEMAP = "/sitemap.xml"


class TimedSite(WebSite):
    """A web site that notes when each request to a path began."""

    def __init__(self) -> None:
        super().__init__()
        self.started: dict[str, list[float]] = {}

    def count(self, path: str, *, conditional: bool, not_modified: bool) -> None:
        self.started.setdefault(path, []).append(time.monotonic())
        super().count(path, conditional=conditional, not_modified=not_modified)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


def _overlaps(starts: list[float], length_s: float) -> int:
    """How many of the requests began while an earlier one, lasting `length_s`, was still being answered."""
    ordered = sorted(starts)
    return sum(later - earlier < length_s for earlier, later in itertools.pairwise(ordered))


def _log(cluster: Cluster) -> bytes:
    return (cluster.root / "worker-0.log").read_bytes()


def test_a_sync_longer_than_its_lease_is_never_run_twice_at_once(
    cluster: Cluster, figures: Figures, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lease is taken where the sync is asked for (here) and kept where it runs (the worker).
    monkeypatch.setenv("TINYMEMORY_SYNC_LEASE_S", str(LEASE_S))
    cluster.extra_env.update({"TINYMEMORY_SYNC_LEASE_S": str(LEASE_S), "TINYMEMORY_ALLOW_PRIVATE_NETWORKS": "true"})
    site = TimedSite()
    with site:
        # An empty sitemap: each sync is its listing alone, with no batch to wait for.
        empty = sitemap_xml([])
        for source_id, sitemap in (("web", SITEMAP), ("warm", "/warm.xml")):
            site.pages[sitemap] = Page(empty, content_type="application/xml", delay_s=0.5)
            request = SourceRequest(kind="link", target=site.url(sitemap), sitemap=True, id=source_id)
            cluster.state().put_source(REGISTRY.configure(request))
        cluster.start_worker(concurrency=2)
        # Two syncs at once, so that both pool processes have built their runtime (which takes longer than
        # the lease on a busy machine) before the timed one.
        assert cluster.sync("web") and cluster.sync("warm")
        state = cluster.state()
        cluster.wait(lambda: None not in (state.last_sync("web"), state.last_sync("warm")), 60, "the warm-up syncs")
        cluster.wait(cluster.idle, 30, "the warm-up syncs ended")
        warm_log = len(_log(cluster))

        site.pages[SITEMAP] = Page(empty, content_type="application/xml", delay_s=LISTING_S)
        site.started.clear()
        assert cluster.sync("web")
        cluster.wait(lambda: bool(site.started.get(SITEMAP)), 10, "the long sync under way")
        listing_began = site.started[SITEMAP][0]
        # Ask again and again while the first sync lists: past its first lease it must still be refused.
        refused = attempts = 0
        while time.monotonic() - listing_began < LISTING_S - 0.5:
            attempts += 1
            refused += not cluster.sync("web")
            time.sleep(0.25)
        # The sync asked for meanwhile lists at once: it starts only after the long one ended, or overlaps it.
        site.pages[SITEMAP] = Page(empty, content_type="application/xml")
        leases = Leases(cluster.client(), prefix=cluster.prefix)

        def both_done() -> bool:
            return len(site.started[SITEMAP]) >= 2 and not leases.held(sync_lease("web")) and cluster.idle()

        cluster.wait(both_done, 4 * LISTING_S, "the long sync and the one asked for during it")

    starts = site.started[SITEMAP]
    concurrent = _overlaps(starts, LISTING_S)
    log = _log(cluster)[warm_log:]
    figures(
        f"concurrent syncs: {concurrent}; listings: {len(starts)}; enqueues refused: {refused}/{attempts} "
        f"(lease {LEASE_S:g} s, listing {LISTING_S:g} s)"
    )
    assert concurrent == 0
    assert attempts >= 8 and refused == attempts
    # The refused asks were remembered as one: the source was listed again once the long sync ended.
    assert len(starts) == 2
    assert b"lapsed before its holder ended" not in log
