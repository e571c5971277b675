"""Hostile URLs against the SSRF guard on real sockets: the guard's table (aimed at a private listener),
redirects from a public site to every row of it, DNS rebinding, and the link source reading a sitemap of
them. A listener on loopback counts every connection it accepts, and every other connection attempt is
counted too: the total must be 0."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

from engines.contract import Error
from sources import REGISTRY, ReaderOptions, SourceReaders, SourceRequest
from sources.net import GuardedClient
from tests.fixtures.web_site import Page, WebSite, sitemap_xml
from tests.reliability.conftest import Figures
from tests.reliability.network import PUBLIC_NAME, Routes, Victim
from tests.unit.sources.test_net import REFUSED_BY_DNS, REFUSED_STATICALLY

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REDIRECTS = (301, 302, 303, 307, 308)
_URL_SAFE = ":/?#[]@!$&'()*+,;=%"


def _aimed(url: str, port: int) -> str:
    """`url` with the victim's port where it names a host and no port of its own."""
    parts = urlsplit(url)
    try:
        has_port = parts.port is not None
    except ValueError:
        return url
    if parts.scheme not in ("http", "https") or not parts.hostname or has_port:
        return url
    return urlunsplit(parts._replace(netloc=f"{parts.netloc}:{port}"))


@pytest.fixture
def routes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Routes]:
    with WebSite() as site, Victim() as victim:
        patched = Routes(site, victim, socket.create_connection)
        monkeypatch.setattr(socket, "getaddrinfo", patched.getaddrinfo)
        monkeypatch.setattr(socket, "create_connection", patched.create_connection)
        yield patched


def _hostile(victim_port: int) -> list[str]:
    table = [url for _, url, _ in REFUSED_STATICALLY] + [url for _, url, _ in REFUSED_BY_DNS]
    aimed = [_aimed(url, victim_port) for url in table]
    extra = [f"//127.0.0.1:{victim_port}/", f"http://rebind.example.net:{victim_port}/admin"]
    return sorted({*table, *aimed, *extra})


def _public(routes: Routes, path: str) -> str:
    return f"http://{PUBLIC_NAME}:{routes.site.port}{path}"


def _plant_redirects(routes: Routes, targets: list[str]) -> list[str]:
    """A public page redirecting to each target (the statuses in turn), and a three-hop chain to each."""
    pages = []
    for n, target in enumerate(targets):
        status = REDIRECTS[n % len(REDIRECTS)]
        # A header is latin-1: a name in other scripts goes percent-encoded, as a server would send it.
        routes.site.redirect(f"/r{n}", quote(target, safe=_URL_SAFE), status=status)
        routes.site.redirect(f"/c{n}", _public(routes, f"/c{n}b"), status=status)
        routes.site.redirect(f"/c{n}b", _public(routes, f"/r{n}"), status=status)
        pages += [_public(routes, f"/r{n}"), _public(routes, f"/c{n}")]
    return pages


def _refused(client: GuardedClient, urls: list[str]) -> list[str]:
    """The URLs the guard let through (each should have raised a contract error)."""
    passed = []
    for url in urls:
        try:
            client.get(url)
        except Error:
            continue
        passed.append(url)
    return passed


def test_no_hostile_url_reaches_a_private_address(routes: Routes, figures: Figures) -> None:
    hostile = _hostile(routes.victim.port)
    redirecting = _plant_redirects(routes, [u for u in hostile if not u.startswith("//")] + hostile[:1])
    routes.site.pages["/fine"] = Page("a public page")
    routes.rebind("rebinding.example.org")
    rebinding = f"http://rebinding.example.org:{routes.site.port}/fine"

    with GuardedClient(timeout_s=2) as client:
        passed = _refused(client, hostile) + _refused(client, redirecting)
        # Rebinding: the first lookup is public and the request is pinned to it; the name then says loopback.
        first = client.get(rebinding)
        passed += _refused(client, [rebinding])
    public_before_reader = routes.public

    # The link source over a sitemap on the public host listing the same redirecting pages, and the table.
    routes.site.pages["/sitemap.xml"] = Page(
        sitemap_xml([*redirecting, *(u for u in hostile if u.startswith("http"))]), content_type="application/xml"
    )
    entry = REGISTRY.configure(SourceRequest(kind="link", target=_public(routes, "/sitemap.xml"), sitemap=True))
    listing = SourceReaders(ReaderOptions()).reader_for(entry).list_units()

    tried = len(hostile) + len(redirecting) + 2
    figures(
        f"URLs fetched: {routes.fetched} (listener accepted {routes.victim.accepted}, other attempts "
        f"{len(routes.elsewhere)}); hostile URLs tried {tried} directly and {len(listing.skipped)} through the "
        f"link source; public hops {routes.public}; lookups {len(routes.lookups)}"
    )
    assert routes.fetched == 0, routes.elsewhere
    assert passed == []
    assert first.body == b"a public page"
    assert routes.lookups.count("rebinding.example.org") == 2  # once per request, never again to connect
    assert listing.units == () and len(listing.skipped) == len(redirecting) + len(
        [u for u in hostile if u.startswith("http")]
    )
    # Every redirecting page was asked once per visit (direct and chained), and from the reader once more.
    assert public_before_reader >= len(redirecting) and routes.public > public_before_reader
