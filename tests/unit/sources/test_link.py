"""The link source against a real loopback web site: configuration, conditional listing, reading, sitemaps."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engines.contract import InvalidRequestError, NotFoundError, SourceKind, UnavailableError
from pipeline.sniff import DocumentFormat, sniff
from sources import REGISTRY, ConditionalSource, ReaderOptions, SourceReader, SourceRequest
from sources.link import LinkReader, _BodyCache, _Page, link_id_for
from sources.net import GuardedClient
from tests.fixtures.web_site import Page, WebSite, html, sitemap_xml
from tinymemory_ingest.cli import app


@pytest.fixture
def site() -> Iterator[WebSite]:
    with WebSite() as served:
        yield served


@pytest.fixture
def client() -> Iterator[GuardedClient]:
    with GuardedClient(allow_private_networks=True, timeout_s=2) as guarded:
        yield guarded


def _entry(url: str, *, sitemap: bool = False):  # type: ignore[no-untyped-def]
    return REGISTRY.configure(SourceRequest(kind="link", target=url, sitemap=sitemap, namespace="team:web"))


def _reader(site: WebSite, client: GuardedClient, path: str = "/", *, sitemap: bool = False) -> LinkReader:
    url = site.url(path)
    return LinkReader(url, client, sitemap=sitemap, entry=_entry(url, sitemap=sitemap))


# -- configuration -----------------------------------------------------------------------------------------


def test_configure_makes_a_web_page_entry() -> None:
    entry = _entry("https://docs.example.com/guide/")
    assert (entry.kind, entry.url, entry.label, entry.sitemap) == (
        "web_page",
        "https://docs.example.com/guide/",
        "https://docs.example.com/guide/",
        False,
    )
    assert entry.id == link_id_for("https://docs.example.com/guide/") and entry.id.startswith("docs-example-com-guide")
    assert entry.id != link_id_for("https://docs.example.com/guide/?v=2")
    assert _entry("https://example.com/sitemap.xml", sitemap=True).sitemap is True


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("ftp://example.com/f", "scheme 'ftp' is not http or https"),
        ("file:///etc/passwd", "scheme 'file' is not http or https"),
        ("   ", "a link source needs the URL of a page"),
        ("http:///nowhere", "names no host"),
        ("http://169.254.169.254/latest/meta-data/", "is a link-local address"),
        ("http://1.2.3.999/", "not a valid IPv4 address"),
    ],
)
def test_configure_refuses_what_can_never_be_fetched(target: str, message: str) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        REGISTRY.configure(SourceRequest(kind="link", target=target))
    assert message in refused.value.message


def test_configure_refuses_options_of_other_kinds() -> None:
    with pytest.raises(InvalidRequestError, match="branch does not apply to link sources"):
        REGISTRY.configure(SourceRequest(kind="link", target="https://example.com/", branch="main"))


def test_the_built_reader_follows_the_options(site: WebSite) -> None:
    site.pages["/"] = Page(html("Home", "welcome"))
    entry = _entry(site.url("/"))
    strict = REGISTRY.reader_for(entry, ReaderOptions())
    relaxed = REGISTRY.reader_for(entry, ReaderOptions(allow_private_networks=True, fetch_timeout_s=3))
    assert isinstance(strict, LinkReader) and isinstance(strict, ConditionalSource) and isinstance(strict, SourceReader)
    assert isinstance(relaxed, LinkReader) and relaxed.client.timeout_s == 3
    with pytest.raises(InvalidRequestError, match="is not a public address"):
        strict.list_units()
    assert site.requests["/"] == 0
    assert [u.id for u in relaxed.list_units().units] == [site.url("/")]


def test_sources_add_link_through_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYMEMORY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("TINYMEMORY_CONFIG", raising=False)
    runner = CliRunner()
    added = runner.invoke(app, ["sources", "add", "link", "https://example.com/sitemap.xml", "--sitemap", "--id", "ex"])
    assert (added.exit_code, added.stdout.strip()) == (0, "ex")
    shown = runner.invoke(app, ["sources", "list", "--json"])
    (entry,) = json.loads(shown.stdout)
    assert (entry["kind"], entry["url"], entry["sitemap"]) == ("web_page", "https://example.com/sitemap.xml", True)
    refused = runner.invoke(app, ["sources", "add", "link", "ftp://example.com/f"])
    assert refused.exit_code != 0 and "not http or https" in refused.output


# -- conditional listing -------------------------------------------------------------------------------------


def test_a_page_is_versioned_by_etag_then_last_modified_then_content(site: WebSite, client: GuardedClient) -> None:
    site.pages["/e"] = Page("e", etag='W/"v1"', last_modified="Mon, 01 Jan 2024 00:00:00 GMT")
    site.pages["/m"] = Page("m", last_modified="Mon, 01 Jan 2024 00:00:00 GMT")
    site.pages["/h"] = Page("h")
    versions = {path: _reader(site, client, path).list_units().units[0].version for path in ("/e", "/m", "/h")}
    assert versions["/e"] == 'etag:W/"v1"'
    assert versions["/m"] == "modified:Mon, 01 Jan 2024 00:00:00 GMT"
    assert versions["/h"].startswith("sha256:") and len(versions["/h"]) == 7 + 64


def test_an_unchanged_page_costs_one_304(site: WebSite, client: GuardedClient) -> None:
    site.pages["/"] = Page(html("Home", "welcome"), etag='"v1"')
    reader = _reader(site, client)
    (unit,) = reader.list_units().units
    site.reset_counts()
    again = reader.list_units_since({unit.id: unit.version})
    assert again.units == (unit,)
    assert (site.requests["/"], site.conditional["/"], site.not_modified["/"]) == (1, 1, 1)


def test_an_unchanged_page_by_date_costs_one_304(site: WebSite, client: GuardedClient) -> None:
    site.pages["/"] = Page("text", last_modified="Tue, 02 Jan 2024 10:00:00 GMT")
    reader = _reader(site, client)
    (unit,) = reader.list_units().units
    assert reader.list_units_since({unit.id: unit.version}).units == (unit,)
    assert site.not_modified["/"] == 1


def test_a_changed_page_gets_its_new_version(site: WebSite, client: GuardedClient) -> None:
    site.pages["/"] = Page("one", etag='"v1"')
    reader = _reader(site, client)
    known = {u.id: u.version for u in reader.list_units().units}
    site.pages["/"] = Page("two", etag='"v2"')
    (unit,) = reader.list_units_since(known).units
    assert unit.version == 'etag:"v2"'
    assert reader.read(unit.id).data == b"two"


def test_a_page_without_validators_keeps_its_version_while_its_content_does(
    site: WebSite, client: GuardedClient
) -> None:
    site.pages["/"] = Page("same")
    reader = _reader(site, client)
    first = reader.list_units().units
    assert reader.list_units_since({u.id: u.version for u in first}).units == first
    site.pages["/"] = Page("other")
    assert reader.list_units_since({u.id: u.version for u in first}).units != first


@pytest.mark.parametrize("status", [404, 410])
def test_a_gone_page_is_left_out_once_known_and_skipped_before(
    status: int, site: WebSite, client: GuardedClient
) -> None:
    site.pages["/"] = Page("gone", status=status)
    reader = _reader(site, client)
    assert reader.list_units_since({site.url("/"): 'etag:"v1"'}).units == ()
    assert reader.list_units_since({site.url("/"): 'etag:"v1"'}).skipped == ()
    never = reader.list_units()
    assert never.units == () and f"answered {status}" in never.skipped[0].reason
    with pytest.raises(NotFoundError, match=f"is gone .*answered {status}"):
        reader.read(site.url("/"))


@pytest.mark.parametrize("page", [Page("down", status=503), Page("slow", delay_s=0.5), Page("busy", status=429)])
def test_a_failing_server_is_never_taken_for_a_deletion(page: Page, site: WebSite) -> None:
    site.pages["/"] = page
    with GuardedClient(allow_private_networks=True, timeout_s=0.15) as client:
        reader = _reader(site, client)
        known = {site.url("/"): 'etag:"v1"'}
        assert [(u.id, u.version) for u in reader.list_units_since(known).units] == [(site.url("/"), 'etag:"v1"')]
        with pytest.raises(UnavailableError):
            reader.list_units()  # never synced, and the one page: nothing to list
        with pytest.raises(UnavailableError):
            reader.read(site.url("/"))


def test_an_unreachable_server_keeps_known_versions(client: GuardedClient) -> None:
    with WebSite() as gone:
        url = gone.url("/")
    reader = LinkReader(url, client, entry=_entry(url))
    assert reader.list_units_since({url: "sha256:abc"}).units[0].version == "sha256:abc"
    with pytest.raises(UnavailableError, match="cannot connect"):
        reader.list_units()


def test_a_redirect_to_cloud_metadata_is_skipped_with_the_reason(site: WebSite, client: GuardedClient) -> None:
    site.redirect("/", "http://169.254.169.254/latest/meta-data/")
    listing = _reader(site, client).list_units()
    assert listing.units == ()
    (skipped,) = listing.skipped
    assert "redirect not followed" in skipped.reason and "169.254.169.254 is a link-local address" in skipped.reason


def test_a_page_over_the_cap_is_skipped(site: WebSite, client: GuardedClient) -> None:
    site.pages["/"] = Page(b"x" * (10 * 1024 * 1024 + 1), content_type="text/plain")
    (skipped,) = _reader(site, client).list_units().skipped
    assert "exceeds 10485760-byte limit" in skipped.reason


# -- reading -------------------------------------------------------------------------------------------------


def test_reading_right_after_listing_fetches_nothing_more(site: WebSite, client: GuardedClient) -> None:
    site.pages["/"] = Page(html("Home", "welcome"), etag='"v1"')
    reader = _reader(site, client)
    (unit,) = reader.list_units().units
    content = reader.read(unit.id)
    assert site.requests["/"] == 1 and content.version == unit.version
    reader.read(unit.id)  # the cached body serves one read; another fetches
    assert site.requests["/"] == 2


def test_read_gives_the_page_as_the_pipeline_sniffs_it(site: WebSite, client: GuardedClient) -> None:
    site.pages["/final/"] = Page(html("Guide", "read me"), etag='"g"')
    site.redirect("/", "/final/")
    reader = _reader(site, client)
    content = reader.read(site.url("/"))
    assert (content.unit_id, content.version, content.name) == (site.url("/"), 'etag:"g"', "index.html")
    assert content.mime == "text/html; charset=utf-8" and content.data is not None and b"read me" in content.data
    assert sniff(content.data, content.name, content.mime) is DocumentFormat.HTML
    assert content.origin.url == site.url("/final/")  # where it was finally served from
    assert content.origin.source is not None and content.origin.source.kind is SourceKind.LINK
    assert str(content.origin.namespace) == "team:web"


@pytest.mark.parametrize(
    ("path", "content_type", "name"),
    [
        ("/notes.md", "text/markdown", "notes.md"),
        ("/doc", "application/pdf", "doc.pdf"),
        ("/readme.txt", "text/plain; charset=utf-8", "readme.txt"),
        ("/page.php", "text/html", "page.html"),
        ("/file.bin", "application/octet-stream", "file.bin"),
    ],
)
def test_the_name_agrees_with_the_content_type(
    path: str, content_type: str, name: str, site: WebSite, client: GuardedClient
) -> None:
    site.pages[path] = Page("body", content_type=content_type)
    assert _reader(site, client, path).read(site.url(path)).name == name


def test_a_page_in_another_charset_is_handed_over_in_utf8(site: WebSite, client: GuardedClient) -> None:
    site.pages["/"] = Page("<p>café</p>".encode("latin-1"), content_type="text/html; charset=ISO-8859-1")
    content = _reader(site, client).read(site.url("/"))
    assert (content.data, content.mime) == ("<p>café</p>".encode(), "text/html; charset=utf-8")


def test_read_refuses_a_url_the_source_does_not_hold(site: WebSite, client: GuardedClient) -> None:
    with pytest.raises(InvalidRequestError, match="holds only"):
        _reader(site, client).read(site.url("/other"))
    sitemap = _reader(site, client, "/sitemap.xml", sitemap=True)
    with pytest.raises(InvalidRequestError, match="not the sitemap's host"):
        sitemap.read(f"http://localhost:{site.port}/a")


# -- sitemaps ------------------------------------------------------------------------------------------------


def test_a_sitemap_lists_its_own_hosts_pages_and_skips_the_rest(site: WebSite, client: GuardedClient) -> None:
    for name in ("a", "b"):
        site.pages[f"/{name}"] = Page(html(name, f"page {name}"), etag=f'"{name}1"')
    elsewhere = f"http://localhost:{site.port}/a"
    site.pages["/sitemap.xml"] = Page(
        sitemap_xml([site.url("/a"), site.url("/b"), site.url("/a"), elsewhere, "ftp://x.example/f"]),
        content_type="application/xml",
    )
    reader = _reader(site, client, "/sitemap.xml", sitemap=True)
    listing = reader.list_units()
    assert [(u.id, u.version) for u in listing.units] == [(site.url("/a"), 'etag:"a1"'), (site.url("/b"), 'etag:"b1"')]
    reasons = {s.unit_id: s.reason for s in listing.skipped}
    assert reasons[elsewhere] == "on host localhost, not the sitemap's host 127.0.0.1"
    assert "scheme 'ftp'" in reasons["ftp://x.example/f"]
    site.reset_counts()
    reader.list_units_since({u.id: u.version for u in listing.units})
    assert (site.requests["/a"], site.not_modified["/a"], site.requests["/sitemap.xml"]) == (1, 1, 1)


def test_a_sitemap_is_capped(site: WebSite, client: GuardedClient) -> None:
    site.pages["/sitemap.xml"] = Page(sitemap_xml([site.url(f"/p{n}") for n in range(5)]))
    for n in range(5):
        site.pages[f"/p{n}"] = Page(f"page {n}")
    reader = LinkReader(site.url("/sitemap.xml"), client, sitemap=True, max_pages=3)
    listing = reader.list_units()
    assert [u.id for u in listing.units] == [site.url(f"/p{n}") for n in range(3)]
    (over,) = listing.skipped
    assert over.unit_id == site.url("/sitemap.xml") and "lists 5 pages here; only the first 3 are read" in over.reason
    assert site.requests["/p4"] == 0


def test_a_sitemap_page_failing_for_now_is_skipped_not_raised(site: WebSite, client: GuardedClient) -> None:
    site.pages["/sitemap.xml"] = Page(sitemap_xml([site.url("/ok"), site.url("/down")]))
    site.pages["/ok"] = Page("fine")
    site.pages["/down"] = Page("down", status=502)
    listing = _reader(site, client, "/sitemap.xml", sitemap=True).list_units()
    assert [u.id for u in listing.units] == [site.url("/ok")]
    assert listing.skipped[0].reason.startswith("unavailable for now: ")


def test_a_sitemap_index_and_a_gzipped_sitemap(site: WebSite, client: GuardedClient) -> None:
    index = (
        '<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<sitemap><loc>{site.url('/one.xml')}</loc></sitemap><sitemap><loc>/two.xml.gz</loc></sitemap>"
        "</sitemapindex>"
    )
    site.pages["/index.xml"] = Page(index, content_type="application/xml")
    site.pages["/one.xml"] = Page(sitemap_xml([site.url("/a")]))
    site.pages["/two.xml.gz"] = Page(
        gzip.compress(sitemap_xml([site.url("/b")]).encode()), content_type="application/gzip"
    )
    site.pages["/a"] = Page("a")
    site.pages["/b"] = Page("b")
    listing = _reader(site, client, "/index.xml", sitemap=True).list_units()
    assert [u.id for u in listing.units] == [site.url("/a"), site.url("/b")]


@pytest.mark.parametrize(
    ("page", "error", "message"),
    [
        (Page("no", status=404), NotFoundError, "sitemap .* is gone"),
        (Page("no", status=503), UnavailableError, "answered 503"),
        (Page("<html></html>"), InvalidRequestError, r"is not a sitemap \(its root element is <html>\)"),
        (Page("<urlset"), InvalidRequestError, "not well-formed XML"),
        (
            Page('<!DOCTYPE x [<!ENTITY a "aaaa">]><urlset><url><loc>&a;</loc></url></urlset>'),
            InvalidRequestError,
            "declares a DTD or entities",
        ),
    ],
)
def test_a_sitemap_that_cannot_be_read_fails_the_listing(
    page: Page, error: type[Exception], message: str, site: WebSite, client: GuardedClient
) -> None:
    site.pages["/sitemap.xml"] = page
    with pytest.raises(error, match=message):
        _reader(site, client, "/sitemap.xml", sitemap=True).list_units_since({site.url("/a"): "sha256:x"})


# -- the body cache ------------------------------------------------------------------------------------------


def test_the_body_cache_is_short_lived_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = _BodyCache(ttl_s=60, max_entries=2, max_bytes=10)
    page = _Page("v", "http://example.com/", b"12345", "text/plain")
    for n in range(3):
        cache.put((f"u{n}", False), page)
    assert cache.take(("u0", False)) is None  # the oldest went first
    assert cache.take(("u2", True)) is None  # a body fetched under another policy is not handed over
    assert cache.take(("u2", False)) == page and cache.take(("u2", False)) is None
    cache.put(("big", False), _Page("v", "u", b"x" * 11, None))
    assert cache.take(("big", False)) is None
    expired = _BodyCache(ttl_s=-1)
    expired.put(("u", False), page)
    assert expired.take(("u", False)) is None
