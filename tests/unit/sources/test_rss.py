"""`RssReader`: RSS 2.0, RSS 1.0 and Atom entries as units, versions that carry the feed's validator,
conditional listing, roll-off, the feed cache, and refusals; the network is a mock transport behind the guard."""

from __future__ import annotations

import email.utils
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx
import pytest

from engines.contract import EngineError, InvalidRequestError, NotFoundError, SourceKind, UnavailableError
from pipeline.convert import RawDocument, convert_document
from sources import REGISTRY, ConditionalSource, ReaderOptions, SourceEntry, SourceRequest
from sources.net import BadStatusError, GuardedClient
from sources.rss import (
    CREATED_MAX_ITEMS,
    FEED_CACHE_TTL,
    FeedCache,
    RssReader,
    Validator,
    known_validator,
    parse_feed,
    parse_stamp,
)

URL = "https://feeds.example.com/news.xml"


def rss(*items: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0" '
        'xmlns:content="http://purl.org/rss/1.0/modules/content/"><channel><title>News</title>'
        f"{''.join(items)}</channel></rss>"
    ).encode()


def item(title: str, *, guid: str | None = None, link: str | None = None, body: str = "", when: str = "") -> str:
    parts = [f"<title>{title}</title>"]
    parts += [f"<guid>{guid}</guid>"] if guid is not None else []
    parts += [f"<link>{link}</link>"] if link is not None else []
    parts += [f"<pubDate>{when}</pubDate>"] if when else []
    return f"<item>{''.join(parts)}<description>{body}</description></item>"


def atom(*entries: str) -> bytes:
    return f'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>F</title>{"".join(entries)}</feed>'.encode()


RDF = b"""<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"
  xmlns:dc="http://purl.org/dc/elements/1.1/">
  <channel rdf:about="https://x.example/"><title>R</title><link>https://x.example/</link></channel>
  <item rdf:about="https://x.example/r1"><title>R one</title><link>https://x.example/r1</link>
    <description>first of rdf</description><dc:date>2025-01-01T08:00:00Z</dc:date></item>
</rdf:RDF>"""


@dataclass
class FeedServer:
    """The feed's server: one document with an optional ETag and Last-Modified, answering 304 to a request
    that names them, or a fixed status; every request it saw is kept."""

    body: bytes = b""
    etag: str | None = None
    last_modified: str | None = None
    status: int = 200
    seen: list[httpx.Request] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        if self.status != 200:
            return httpx.Response(self.status, content=b"no")
        headers = {"content-type": "application/rss+xml"}
        headers |= {"etag": self.etag} if self.etag else {}
        headers |= {"last-modified": self.last_modified} if self.last_modified else {}
        match = self.etag and request.headers.get("if-none-match") == self.etag
        unmodified = self.last_modified and request.headers.get("if-modified-since") == self.last_modified
        if match or (unmodified and not self.etag):
            return httpx.Response(304, headers=headers)
        return httpx.Response(200, headers=headers, content=self.body)


@pytest.fixture
def server() -> FeedServer:
    return FeedServer()


@pytest.fixture
def clock() -> list[float]:
    return [1000.0]


def reader_for(server: FeedServer, clock: list[float], max_items: int | None = None, url: str = URL) -> RssReader:
    client = GuardedClient(resolver=lambda host, port: ["93.184.216.34"], transport=httpx.MockTransport(server.handle))
    entry = SourceEntry(id="news", kind="rss_feed", label=url, url=url, max_items=max_items)
    return RssReader(entry, client, cache=FeedCache(clock=lambda: clock[0]))


@pytest.fixture
def reader(server: FeedServer, clock: list[float]) -> RssReader:
    return reader_for(server, clock)


def versions(reader: RssReader, known: dict[str, str] | None = None) -> dict[str, str]:
    return {unit.id: unit.version for unit in reader.list_units_since(known or {}).units}


# -- parsing: ids, titles, links, bodies and timestamps by the docs/spec/sources-and-documents.md §6 table -----------


def test_rss_ids_are_the_guid_else_the_link_else_the_index() -> None:
    entries = parse_feed(
        rss(
            item("one", guid="g-1", link="https://x.example/1"),
            item("two", link="https://x.example/2"),
            item("three"),
        ),
        URL,
    )
    assert [(e.unit_id, e.title, e.link) for e in entries] == [
        ("g-1", "one", "https://x.example/1"),
        ("https://x.example/2", "two", "https://x.example/2"),
        ("rss-2", "three", None),
    ]


def test_rss_body_is_the_description_else_content_encoded() -> None:
    encoded = "<content:encoded>&lt;b&gt;rich&lt;/b&gt;</content:encoded>"
    both = f"<item><guid>a</guid><description>short</description>{encoded}</item>"
    only = f"<item><guid>b</guid><description></description>{encoded}</item>"
    assert [e.body for e in parse_feed(rss(both, only), URL)] == ["short", "<b>rich</b>"]


def test_atom_entries_by_id_alternate_link_content_then_summary_updated_then_published() -> None:
    first = (
        "<entry><id>urn:e1</id><title>E1</title><link rel='self' href='https://x.example/self'/>"
        "<link rel='alternate' href='https://x.example/e1'/><updated>2025-01-02T03:04:05Z</updated>"
        "<published>2024-01-01T00:00:00Z</published><summary>sum</summary>"
        "<content type='html'>&lt;p&gt;full text&lt;/p&gt;</content></entry>"
    )
    second = (
        "<entry><title>E2</title><link href='https://x.example/e2'/>"
        "<published>2024-05-01T00:00:00+02:00</published><summary>only a summary</summary></entry>"
    )
    one, two = parse_feed(atom(first, second), URL)
    assert (one.unit_id, one.link, one.body, one.stamp) == (
        "urn:e1",
        "https://x.example/e1",
        "<p>full text</p>",
        "2025-01-02T03:04:05Z",
    )
    assert (two.unit_id, two.link, two.body) == ("atom-1", "https://x.example/e2", "only a summary")
    assert two.observed_at == datetime(2024, 4, 30, 22, tzinfo=UTC)


def test_rss_1_0_rdf_items() -> None:
    (entry,) = parse_feed(RDF, URL)
    assert (entry.unit_id, entry.title, entry.body) == ("https://x.example/r1", "R one", "first of rdf")
    assert entry.observed_at == datetime(2025, 1, 1, 8, tzinfo=UTC)


def test_cdata_is_unwrapped_without_decoding_and_entities_outside_are_decoded() -> None:
    cdata = "<description><![CDATA[<p>A &amp; B</p>]]></description>"
    raw = f"<item><guid>c</guid><title>Fish &amp; chips</title>{cdata}</item>"
    (entry,) = parse_feed(rss(raw), URL)
    assert (entry.title, entry.body) == ("Fish & chips", "<p>A &amp; B</p>")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mon, 06 Jan 2025 10:00:00 GMT", datetime(2025, 1, 6, 10, tzinfo=UTC)),
        ("Mon, 06 Jan 2025 10:00:00 +0200", datetime(2025, 1, 6, 8, tzinfo=UTC)),
        ("Mon, 06 Jan 2025 10:00:00 -0000", datetime(2025, 1, 6, 10, tzinfo=UTC)),
        ("2025-01-02T03:04:05Z", datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2025-01-02T03:04:05.250+01:00", datetime(2025, 1, 2, 2, 4, 5, 250000, tzinfo=UTC)),
        ("yesterday, around noon", None),
        ("", None),
        ("0001-01-01T00:00:00+01:00", None),  # no UTC form within years 1 to 9999
    ],
)
def test_timestamps_rfc_2822_then_rfc_3339(text: str, expected: datetime | None) -> None:
    assert parse_stamp(text) == expected


def test_unit_ids_are_made_safe_and_duplicates_keep_the_first() -> None:
    long_id = "tag:x.example," + "z" * 600
    entries = parse_feed(
        rss(
            item("bell", guid="id\x07with\tcontrols\n  inside"),
            item("long", guid=long_id),
            item("again", guid="id with controls inside"),
            item("blank", guid="   "),
        ),
        URL,
    )
    ids = [e.unit_id for e in entries]
    assert ids[0] == "id with controls inside" and [e.title for e in entries] == ["bell", "long", "blank"]
    assert len(ids[1]) == 512 and ids[1].startswith("tag:x.example,zzz") and ids[1] != long_id[:512]
    assert ids[2] == "rss-3"


def test_max_items_cuts_the_listing_in_document_order(server: FeedServer, clock: list[float]) -> None:
    server.body = rss(*(item(f"n{n}", guid=f"g{n:02}") for n in range(30)))
    assert sorted(versions(reader_for(server, clock, max_items=5))) == ["g00", "g01", "g02", "g03", "g04"]
    assert len(versions(reader_for(server, clock))) == 30  # the reader's default is 50


def test_a_document_that_is_not_xml_is_refused_naming_the_url_and_reason(reader: RssReader, server: FeedServer) -> None:
    server.body = b"this is not a feed, just words"
    with pytest.raises(InvalidRequestError) as caught:
        reader.list_units()
    assert caught.value.message == f"{URL} is not an RSS or Atom feed: it is not well-formed XML (syntax error)"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"<!DOCTYPE html><html><body><p>a page</p></body></html>", "its root is <html>, not <rss>"),
        (b"<?xml version='1.0'?><catalog><book/></catalog>", "its root is <catalog>, not <rss>"),
        (b"", "no root element"),
        (b"/etc/hostname", "not well-formed XML"),  # never opened as a file name
    ],
)
def test_a_document_that_is_no_feed_is_refused(body: bytes, reason: str) -> None:
    with pytest.raises(InvalidRequestError, match=reason):
        parse_feed(body, URL)


def test_hostile_xml_expands_no_external_entity_and_no_bomb() -> None:
    xxe = b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    (entry,) = parse_feed(xxe + rss(item("&x;", guid="x")).split(b"?>", 1)[1], URL)
    assert "root:" not in entry.title
    bomb = '<!ENTITY a "aaaaaaaaaa">' + "".join(
        f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8)
    )
    doc = f'<?xml version="1.0"?><!DOCTYPE r [{bomb}]>'.encode() + rss(item("&i;", guid="b")).split(b"?>", 1)[1]
    assert all(len(e.title) < 1000 for e in parse_feed(doc, URL))


# -- versions ----------------------------------------------------------------------------------------------


def test_versions_stay_for_the_same_feed_and_move_for_an_updated_entry(reader: RssReader, server: FeedServer) -> None:
    when = "Mon, 06 Jan 2025 10:00:00 GMT"
    server.body = rss(item("one", guid="a", body="first", when=when), item("two", guid="b", body="second"))
    before = versions(reader)
    assert versions(reader) == before
    server.body = rss(item("one", guid="a", body="first", when=when), item("two", guid="b", body="second, edited"))
    edited = versions(reader)
    assert edited["a"] == before["a"] and edited["b"] != before["b"]  # edited without a new timestamp
    server.body = rss(item("one", guid="a", body="first", when="Tue, 07 Jan 2025 10:00:00 GMT"), item("two", guid="b"))
    assert versions(reader)["a"] != before["a"]


def test_known_validator_is_the_one_most_versions_carry() -> None:
    known = {"a": '"v2"||h1', "b": '"v2"||h2', "c": '"v1"||h3', "d": "|Mon, 06 Jan 2025|h4", "e": "h5"}
    assert known_validator(known.values()) == Validator(etag='"v2"')
    assert known_validator(["h1", "h2"]) is None and known_validator([]) is None


# -- conditional listing, roll-off, statuses -------------------------------------------------------------


def test_an_unchanged_feed_costs_one_conditional_request_and_lists_the_known_versions(
    reader: RssReader, server: FeedServer
) -> None:
    server.body, server.etag = rss(item("one", guid="a"), item("two", guid="b")), '"v1"'
    first = versions(reader)
    assert all(version.startswith('"v1"||') for version in first.values())
    again = versions(reader, first)
    assert again == first and len(server.seen) == 2
    assert server.seen[1].headers["if-none-match"] == '"v1"'
    assert reader.read("a").unit_id == "a" and len(server.seen) == 2  # read from the cached feed


def test_last_modified_alone_is_sent_as_if_modified_since(reader: RssReader, server: FeedServer) -> None:
    stamp = email.utils.format_datetime(datetime(2025, 1, 6, tzinfo=UTC), usegmt=True)
    server.body, server.last_modified = rss(item("one", guid="a")), stamp
    first = versions(reader)
    assert versions(reader, first) == first
    assert server.seen[1].headers["if-modified-since"] == stamp and "if-none-match" not in server.seen[1].headers


def test_a_changed_feed_relists_with_its_new_validator(reader: RssReader, server: FeedServer) -> None:
    server.body, server.etag = rss(item("one", guid="a")), '"v1"'
    first = versions(reader)
    server.body, server.etag = rss(item("one", guid="a"), item("new", guid="n")), '"v2"'
    second = versions(reader, first)
    assert sorted(second) == ["a", "n"] and all(v.startswith('"v2"||') for v in second.values())


def test_entries_that_roll_off_keep_their_known_versions(reader: RssReader, server: FeedServer) -> None:
    server.body, server.etag = rss(item("one", guid="a"), item("two", guid="b")), '"v1"'
    first = versions(reader)
    server.body, server.etag = rss(item("two", guid="b"), item("three", guid="c")), '"v2"'
    second = versions(reader, first)
    assert sorted(second) == ["a", "b", "c"] and second["a"] == first["a"]
    with pytest.raises(NotFoundError, match="entry 'a' is not in the feed"):
        reader.read("a")


@pytest.mark.parametrize("status", [404, 410])
def test_a_feed_that_is_gone_is_not_found(reader: RssReader, server: FeedServer, status: int) -> None:
    server.status = status
    with pytest.raises(NotFoundError, match=f"feed {URL} is gone \\(HTTP {status}\\)"):
        reader.list_units_since({"a": '"v1"||h'})


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_failing_server_is_unavailable(reader: RssReader, server: FeedServer, status: int) -> None:
    server.status = status
    with pytest.raises(UnavailableError, match=f"HTTP {status}"):
        reader.list_units()


def test_another_status_stays_a_bad_status(reader: RssReader, server: FeedServer) -> None:
    server.status = 403
    with pytest.raises(BadStatusError) as caught:
        reader.list_units()
    assert isinstance(caught.value, EngineError) and caught.value.status == 403


def test_a_refused_url_is_refused_by_the_guard(server: FeedServer, clock: list[float]) -> None:
    with pytest.raises(InvalidRequestError, match="not a public address"):
        reader_for(server, clock, url="http://127.0.0.1/feed").list_units()
    assert server.seen == []


# -- reading ----------------------------------------------------------------------------------------------


def test_read_gives_an_html_document_with_the_entry_origin(reader: RssReader, server: FeedServer) -> None:
    when = "Mon, 06 Jan 2025 10:00:00 GMT"
    server.body = rss(
        item("Launch &lt;day&gt;", guid="a", link="https://x.example/a", body="fish &amp; chips\n\nsecond", when=when)
    )
    reader.list_units()
    content = reader.read("a")
    assert (content.name, content.mime, content.turns) == ("entry.html", "text/html", None)
    assert content.version == versions(reader)["a"]
    html = (content.data or b"").decode()
    assert "<title>Launch &lt;day&gt;</title>" in html and "<p>fish &amp; chips</p>\n<p>second</p>" in html
    meta = content.origin
    assert (meta.url, meta.observed_at) == ("https://x.example/a", datetime(2025, 1, 6, 10, tzinfo=UTC))
    assert (meta.source.kind, meta.source.id) == (SourceKind.RSS, "news")
    converted = convert_document(RawDocument(content.data or b"", content.name, content.mime))
    assert converted.title == "Launch <day>" and "fish & chips" in converted.markdown and "second" in converted.markdown


def test_html_bodies_are_kept_as_html(reader: RssReader, server: FeedServer) -> None:
    server.body = rss(item("t", guid="a", body="&lt;p&gt;&lt;b&gt;bold&lt;/b&gt; words&lt;/p&gt;"))
    assert "<p><b>bold</b> words</p>" in (reader.read("a").data or b"").decode()


def test_reading_right_after_listing_fetches_nothing_until_the_cache_expires(
    reader: RssReader, server: FeedServer, clock: list[float]
) -> None:
    server.body = rss(item("one", guid="a"), item("two", guid="b"))
    reader.list_units()
    reader.read("a"), reader.read("b")
    assert len(server.seen) == 1
    clock[0] += FEED_CACHE_TTL + 1
    reader.read("a")
    assert len(server.seen) == 2 and "if-none-match" not in server.seen[1].headers


def test_an_entry_newer_than_the_cached_feed_is_fetched(reader: RssReader, server: FeedServer) -> None:
    server.body = rss(item("one", guid="a"))
    reader.list_units()
    server.body = rss(item("one", guid="a"), item("new", guid="n"))
    assert reader.read("n").unit_id == "n" and len(server.seen) == 2
    with pytest.raises(NotFoundError, match=f"entry 'gone' is not in the feed {URL} now"):
        reader.read("gone")


def test_a_read_without_a_listing_fetches_the_feed(reader: RssReader, server: FeedServer) -> None:
    server.body = atom("<entry><id>urn:1</id><title>only</title><summary>plain words</summary></entry>")
    content = reader.read("urn:1")
    assert b"<p>plain words</p>" in (content.data or b"") and content.origin.observed_at is None


# -- configuration ----------------------------------------------------------------------------------------


def test_configure_fills_the_id_label_url_and_max_items() -> None:
    entry = REGISTRY.configure(SourceRequest(kind="rss", target=URL))
    assert (entry.kind, entry.label, entry.url, entry.max_items) == ("rss_feed", URL, URL, CREATED_MAX_ITEMS)
    assert (
        entry.id.startswith("feeds-example-com-news-xml-") and len(entry.id) == len("feeds-example-com-news-xml-") + 8
    )
    assert REGISTRY.configure(SourceRequest(kind="rss", target=URL, max_items=5)).max_items == 5


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("ftp://feeds.example.com/x.xml", "is not a feed URL: give an http or https URL"),
        ("feeds.example.com/x.xml", "is not a feed URL"),
        ("https://user:secret@feeds.example.com/x.xml", "credentials in a feed URL are not supported"),
        ("http://169.254.169.254/latest", "link-local"),
    ],
)
def test_configure_refuses_what_is_not_a_feed_url(target: str, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message) as caught:
        REGISTRY.configure(SourceRequest(kind="rss", target=target))
    assert "secret" not in caught.value.message


def test_configure_refuses_options_of_other_kinds() -> None:
    with pytest.raises(InvalidRequestError, match="branch does not apply to rss sources"):
        REGISTRY.configure(SourceRequest(kind="rss", target=URL, branch="main"))


def test_the_built_reader_is_a_conditional_source_under_the_options() -> None:
    entry = REGISTRY.configure(SourceRequest(kind="rss", target=URL))
    built = REGISTRY.reader_for(entry, ReaderOptions(allow_private_networks=True))
    assert isinstance(built, RssReader) and isinstance(built, ConditionalSource)
    assert built.max_items == CREATED_MAX_ITEMS
