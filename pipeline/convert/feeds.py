"""Feed files (RSS 2.0, RSS 1.0, Atom) made ready for markitdown's `RssConverter`, and checked before it runs.

markitdown reads RSS 2.0 and Atom but not RSS 1.0, whose items stand beside the channel under an `rdf:RDF`
root instead of inside it. Such a feed is rewritten here as the RSS 2.0 document it amounts to (channel
title and description; each item's title, description, `content:encoded` and `dc:date` as its date), so
every feed is converted by the same code into the same shape: `# channel`, then `## entry`, its date, and
its body as markdown.

Parsing goes through defusedxml, as markitdown's own does: entity declarations and external references are
refused, so neither an entity expansion bomb nor a reference to a URL or a local file is ever followed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from engines.contract import InvalidRequestError
from pipeline.convert.documents import RawDocument
from pipeline.sniff import DocumentFormat

if TYPE_CHECKING:
    from xml.dom.minidom import Document, Element

ATOM_NAMESPACE = "http://www.w3.org/2005/Atom"
RDF_NAMESPACE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RSS1_NAMESPACE = "http://purl.org/rss/1.0/"
CONTENT_NAMESPACE = "http://purl.org/rss/1.0/modules/content/"
DC_NAMESPACE = "http://purl.org/dc/elements/1.1/"

# What each RSS 1.0 field becomes in RSS 2.0: (namespace, local name) -> qualified RSS 2.0 name.
_CHANNEL_FIELDS = {(RSS1_NAMESPACE, "title"): "title", (RSS1_NAMESPACE, "description"): "description"}
_ITEM_FIELDS = {
    (RSS1_NAMESPACE, "title"): "title",
    (RSS1_NAMESPACE, "link"): "link",
    (RSS1_NAMESPACE, "description"): "description",
    (CONTENT_NAMESPACE, "encoded"): "content:encoded",
    (DC_NAMESPACE, "date"): "pubDate",
}


def feed_for_markitdown(raw: RawDocument, fmt: DocumentFormat) -> bytes:
    """The bytes to hand markitdown's `RssConverter` for the feed in `raw`: as they are for RSS 2.0 and Atom,
    rewritten as RSS 2.0 for RSS 1.0.

    Raises `InvalidRequestError` for a feed with nothing markitdown could read (an RSS root without a channel,
    an Atom feed without entries), and lets the XML parser's and defusedxml's exceptions through for the
    caller to translate (damaged or hostile XML is the document's fault).
    """
    root = _parse(raw.data).documentElement
    if root is None:
        raise InvalidRequestError(f"{raw.label}: the {fmt} feed has no root element")
    if root.namespaceURI == RDF_NAMESPACE and root.localName == "RDF":
        return _rss2_from_rdf(root)
    if fmt is DocumentFormat.ATOM and not _children(root, ATOM_NAMESPACE, "entry"):
        raise InvalidRequestError(f"{raw.label}: the Atom feed has no entries")
    if fmt is DocumentFormat.RSS and not _children(root, None, "channel"):
        raise InvalidRequestError(f"{raw.label}: the RSS feed has no <channel>")
    return raw.data


def _parse(data: bytes) -> Document:
    # defusedxml has no type hints; its minidom module has the standard library's signatures.
    defused: Any = importlib.import_module("defusedxml.minidom")
    document: Document = defused.parseString(data)
    return document


def _rss2_from_rdf(root: Element) -> bytes:
    """The RSS 2.0 document an RSS 1.0 `rdf:RDF` root amounts to, serialised as UTF-8."""
    from xml.dom import minidom  # only a process converting a feed needs it

    document = minidom.getDOMImplementation().createDocument(None, "rss", None)
    rss = document.documentElement
    assert rss is not None  # createDocument with a qualified name always makes the root
    rss.setAttribute("version", "2.0")
    rss.setAttribute("xmlns:content", CONTENT_NAMESPACE)
    channel = rss.appendChild(document.createElement("channel"))
    for source in _children(root, RSS1_NAMESPACE, "channel")[:1]:
        _copy_fields(document, source, channel, _CHANNEL_FIELDS)
    for source in _children(root, RSS1_NAMESPACE, "item"):
        item = channel.appendChild(document.createElement("item"))
        _copy_fields(document, source, item, _ITEM_FIELDS)
    return document.toxml(encoding="utf-8")


def _copy_fields(document: Document, source: Element, target: Element, fields: dict[tuple[str, str], str]) -> None:
    """Copy `source`'s child elements named in `fields` to `target` under their RSS 2.0 names, content intact."""
    for child in source.childNodes:
        if child.nodeType != child.ELEMENT_NODE:
            continue
        name = fields.get((child.namespaceURI or "", child.localName or ""))
        if name is None:
            continue
        copy = target.appendChild(
            document.createElementNS(CONTENT_NAMESPACE, name) if ":" in name else document.createElement(name)
        )
        for node in child.childNodes:
            copy.appendChild(document.importNode(node, True))


def _children(element: Element, namespace: str | None, name: str) -> list[Element]:
    return [
        child
        for child in element.childNodes
        if child.nodeType == child.ELEMENT_NODE and child.namespaceURI == namespace and child.localName == name
    ]
