"""Feed files wherever they are found: sniffed by their root element, converted to their entries as markdown.

RSS 2.0 (HTML in CDATA and entity-encoded), Atom (text, html and xhtml constructs) and RSS 1.0 (RDF) all come
out in markitdown's feed shape; a text that only mentions `<rss` stays text; hostile XML is refused without
a byte leaving the process.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import pytest

from engines.contract import InvalidRequestError
from pipeline.convert import OfficeConverter, RawDocument, convert_document
from pipeline.sniff import DocumentFormat, sniff

F = DocumentFormat

RSS2 = b"""<?xml version="1.0" encoding="UTF-8"?>
<!-- written by hand for this test -->
<rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/">
  <channel>
    <title>The Heron Gazette</title>
    <link>https://news.example/</link>
    <description>News from the marsh</description>
    <item>
      <title>Herons return early</title>
      <link>https://news.example/herons</link>
      <pubDate>Tue, 05 Mar 2024 10:00:00 GMT</pubDate>
      <description><![CDATA[<p>The <b>grey herons</b> came back in <a href="/march">March</a>.</p>]]></description>
    </item>
    <item>
      <title>Reed beds &amp; water levels</title>
      <description>&lt;p&gt;Water is &lt;em&gt;rising&lt;/em&gt; in the reeds.&lt;/p&gt;</description>
      <content:encoded><![CDATA[<h3>Details</h3><ul><li>north bank flooded</li></ul>]]></content:encoded>
    </item>
  </channel>
</rss>
"""

ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <title>Otter Notes</title>
  <subtitle>Field notes</subtitle>
  <updated>2024-03-05T10:00:00Z</updated>
  <entry>
    <title>Otters seen at dawn</title>
    <id>urn:uuid:1</id>
    <updated>2024-03-05T09:00:00Z</updated>
    <summary>Three otters by the weir.</summary>
    <content type="html">&lt;p&gt;They were &lt;strong&gt;fishing&lt;/strong&gt;.&lt;/p&gt;</content>
  </entry>
  <entry>
    <title type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">Tracks <em>in mud</em></div></title>
    <id>urn:uuid:2</id>
    <updated>2024-03-06T09:00:00Z</updated>
    <content type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml"><p>Paw prints by the <b>alders</b>.</p></div>
    </content>
  </entry>
</feed>
"""

RDF = b"""<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"
  xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:content="http://purl.org/rss/1.0/modules/content/">
  <channel rdf:about="https://birds.example/rss">
    <title>Kingfisher Weekly</title>
    <link>https://birds.example/</link>
    <description>Blue flashes on the river</description>
    <items><rdf:Seq><rdf:li rdf:resource="https://birds.example/1"/></rdf:Seq></items>
  </channel>
  <item rdf:about="https://birds.example/1">
    <title>A kingfisher nest</title>
    <link>https://birds.example/1</link>
    <description>Found in the &lt;b&gt;sand bank&lt;/b&gt;.</description>
    <dc:date>2024-03-05</dc:date>
  </item>
  <item rdf:about="https://birds.example/2">
    <title>Second sighting</title>
    <content:encoded><![CDATA[<p>Perched on a <i>willow</i>.</p>]]></content:encoded>
  </item>
</rdf:RDF>
"""

# What no converted feed may still hold: its markup.
MARKUP = ("<rss", "<feed", "<rdf", "<item", "<entry", "CDATA", "<p>", "&lt;", "<channel")


@dataclass(frozen=True)
class FeedVector:
    id: str
    data: bytes
    format: DocumentFormat
    title: str
    must_contain: tuple[str, ...]


VECTORS = (
    FeedVector(
        "rss2",
        RSS2,
        F.RSS,
        "The Heron Gazette",
        (
            "# The Heron Gazette\nNews from the marsh",
            "## Herons return early\nPublished on: Tue, 05 Mar 2024 10:00:00 GMT",
            "The **grey herons** came back in [March](/march).",
            "## Reed beds & water levels",
            "Water is *rising* in the reeds.",
            "### Details",
            "* north bank flooded",
        ),
    ),
    FeedVector(
        "atom",
        ATOM,
        F.ATOM,
        "Otter Notes",
        (
            "# Otter Notes\nField notes",
            "## Otters seen at dawn\nUpdated on: 2024-03-05T09:00:00Z",
            "Three otters by the weir.",
            "They were **fishing**.",
            "## Tracks in mud",
            "Paw prints by the **alders**.",
        ),
    ),
    FeedVector(
        "rss1-rdf",
        RDF,
        F.RSS,
        "Kingfisher Weekly",
        (
            "# Kingfisher Weekly\nBlue flashes on the river",
            "## A kingfisher nest\nPublished on: 2024-03-05",
            "Found in the **sand bank**.",
            "## Second sighting",
            "Perched on a *willow*.",
        ),
    ),
)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything opens a connection: a feed must never make the converter fetch."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the conversion tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.mark.usefixtures("no_network")
@pytest.mark.parametrize("vector", VECTORS, ids=[v.id for v in VECTORS])
def test_a_feed_is_stored_as_its_entries_in_markdown(vector: FeedVector) -> None:
    document = convert_document(RawDocument(vector.data, filename="feeds/news.xml"))
    assert document.format is vector.format
    assert document.title == vector.title
    assert document.metadata == {"converter": "office"}
    for text in vector.must_contain:
        assert text in document.markdown, text
    for markup in MARKUP:
        assert markup not in document.markdown, markup


@pytest.mark.parametrize("vector", VECTORS, ids=[v.id for v in VECTORS])
@pytest.mark.parametrize(
    ("filename", "mime"),
    [
        ("feeds/news.xml", None),  # found in a folder: `.xml` alone would make it code
        ("news.rss", None),
        (None, "text/xml"),
        (None, None),
        ("notes.txt", "text/plain; charset=utf-8"),  # the bytes decide, whatever the hints say
        ("feed.html", "text/html"),
    ],
)
def test_a_feed_is_known_by_its_root_wherever_it_comes_from(
    vector: FeedVector, filename: str | None, mime: str | None
) -> None:
    assert sniff(vector.data, filename, mime) is vector.format


@pytest.mark.parametrize(
    "data",
    [
        b"\xef\xbb\xbf<rss version='2.0'><channel/></rss>",
        b'<?xml version="1.0"?>\n<?xml-stylesheet href="s.xsl"?>\n<rss><channel/></rss>\n\n',
        b'<!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN" "rss.dtd">\n<rss><channel/></rss>',
        b"<!-- a > b --><rss\n  version='2.0'\n><channel/></rss >",
        b"<atom:feed xmlns:atom='http://www.w3.org/2005/Atom'><atom:entry/></atom:feed>",
        b"<RDF xmlns='http://www.w3.org/1999/02/22-rdf-syntax-ns#' xmlns:r='http://purl.org/rss/1.0/'></RDF>",
    ],
)
def test_prologues_and_prefixes(data: bytes) -> None:
    assert sniff(data, "feed.xml") in {F.RSS, F.ATOM}


@pytest.mark.parametrize(
    ("data", "filename", "expected"),
    [
        (b"# Feeds\n\nOur `<rss>` element lists items.\n", "notes.md", F.MARKDOWN),
        (b"<rss> is how a feed starts, and this note goes on as prose.\n", "notes.md", F.MARKDOWN),
        (b"<rss> is how a feed starts, and this note goes on as prose.\n", None, F.PLAIN_TEXT),
        (b"Some text\n<rss version='2.0'><channel/></rss>\n", None, F.PLAIN_TEXT),
        (b"<rss version='2.0'/>", "empty.xml", F.CODE),
        (b"<rss-list><rss/></rss-list>", "list.xml", F.CODE),
        (b"<x:rss xmlns:x='urn:x'><channel/></x:rss>", "prefixed.xml", F.CODE),
        (b"<feed><entry/></feed>", "plain.xml", F.CODE),  # no Atom namespace: some other application's feed
        (b"<feed xmlns='http://purl.org/atom/ns#'><entry/></feed>", "atom03.xml", F.CODE),
        (b"<rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'></rdf:RDF>", "data.rdf", F.PLAIN_TEXT),
        (b"<rss><channel/></rss><!-- trailing -->", "t.xml", F.CODE),
        (b'<!DOCTYPE rss [<!ENTITY a "b">]><rss><channel>&a;</channel></rss>', "entities.xml", F.CODE),
        (b"<?xml version='1.0'?><!-- never closed <rss><channel/></rss>", "open.xml", F.CODE),
        (b"<html><body><rss><channel/></rss></body></html>", None, F.HTML),
    ],
)
def test_what_is_not_a_feed(data: bytes, filename: str | None, expected: DocumentFormat) -> None:
    assert sniff(data, filename) is expected


def test_a_feed_root_past_the_sniffing_window_is_not_seen() -> None:
    padded = b"<?xml version='1.0'?>" + b"<!--" + b" " * 5000 + b"-->" + RSS2.split(b"?>", 1)[1]
    assert sniff(padded, "late.xml") is F.CODE


def test_hostile_prologues_are_scanned_in_linear_time() -> None:
    # Many short constructs and one that never ends: a backtracking expression would take ages on these.
    for data in (b"<?a?>" * 2000 + b"x", b"<!--" * 2000, b"<rss" + b' a="1"' * 1000, b"\n" * 4096 + b"<rss"):
        assert sniff(data, "hostile.xml") is F.CODE


@pytest.mark.usefixtures("no_network")
def test_relative_links_take_the_feed_url_as_their_base() -> None:
    document = convert_document(RawDocument(RSS2, origin="https://news.example/feed.xml"))
    assert "[March](https://news.example/march)" in document.markdown


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b"<feed xmlns='http://www.w3.org/2005/Atom'><title>Empty</title></feed>",
            "empty.xml: the Atom feed has no entries",
        ),
        (b"<rss version='2.0'><title>No channel</title></rss>", "empty.xml: the RSS feed has no <channel>"),
        (b"<rss><channel><title>x</title></channel><broken></rss>", "empty.xml: unreadable rss (ExpatError: "),
    ],
)
def test_a_feed_with_nothing_to_read_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        convert_document(RawDocument(data, filename="empty.xml"))
    assert caught.value.message.startswith(message)


BILLION_LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY a "aaaaaaaaaa">'
    + b"".join(b'<!ENTITY %c "%s">' % (ord("b") + i, (b"&%c;" % (ord("a") + i)) * 10) for i in range(9))
    + b"]><rss><channel><title>&j;</title></channel></rss>"
)
EXTERNAL_ENTITY = (
    b'<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY secret SYSTEM "http://127.0.0.1:9/steal">]>'
    b"<rss><channel><title>&secret;</title></channel></rss>"
)
EXTERNAL_DTD = (
    b'<?xml version="1.0"?><!DOCTYPE rss SYSTEM "http://127.0.0.1:9/rss.dtd">'
    b"<rss><channel><title>Still read</title><item><title>One entry</title></item></channel></rss>"
)


@pytest.mark.usefixtures("no_network")
@pytest.mark.parametrize("data", [BILLION_LAUGHS, EXTERNAL_ENTITY], ids=["entity-expansion", "external-entity"])
def test_entities_are_refused_even_when_handed_over_as_a_feed(data: bytes) -> None:
    # Sniffing never calls these feeds (an internal subset is not skipped); a caller that insists still
    # gets a refusal, not an expansion or a fetch.
    with pytest.raises(InvalidRequestError) as caught:
        OfficeConverter().convert(RawDocument(data, filename="hostile.xml"), DocumentFormat.RSS)
    assert caught.value.message.startswith("hostile.xml: unreadable rss (EntitiesForbidden: ")


@pytest.mark.usefixtures("no_network")
def test_an_external_dtd_is_never_fetched() -> None:
    document = convert_document(RawDocument(EXTERNAL_DTD, filename="dtd.xml"))
    assert document.format is F.RSS
    assert "# Still read" in document.markdown and "## One entry" in document.markdown
