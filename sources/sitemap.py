"""Sitemaps (sitemaps.org 0.9): the page and child-sitemap URLs one lists, gzipped or not, parsed with no DTD."""

from __future__ import annotations

import re
import zlib
from typing import Final
from urllib.parse import urljoin
from xml.etree import ElementTree

from engines.contract import InvalidRequestError
from sources.net import MAX_FETCH_BYTES

# A sitemap index may name this many sitemaps; the protocol does not nest indexes, so neither do we.
MAX_CHILD_SITEMAPS: Final = 50
_DTD: Final = re.compile(rb"<!(DOCTYPE|ENTITY)", re.IGNORECASE)


def parse_sitemap(data: bytes, url: str) -> tuple[list[str], list[str]]:
    """The page URLs and the child sitemap URLs a sitemap (sitemaps.org 0.9, gzipped or not) lists."""
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, url)
    if _DTD.search(data):
        # No sitemap needs a DTD; refusing one rules out entity expansion of any kind.
        raise InvalidRequestError(f"sitemap {url} declares a DTD or entities, which a sitemap never needs")
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as err:
        raise InvalidRequestError(f"sitemap {url} is not well-formed XML ({err})") from None
    wanted = {"urlset": "url", "sitemapindex": "sitemap"}.get(_local_name(root.tag))
    if wanted is None:
        raise InvalidRequestError(f"{url} is not a sitemap (its root element is <{_local_name(root.tag)}>)")
    found = [
        urljoin(url, (loc.text or "").strip())
        for item in root
        if _local_name(item.tag) == wanted
        for loc in item
        if _local_name(loc.tag) == "loc" and (loc.text or "").strip()
    ]
    return (found, []) if wanted == "url" else ([], found)


def _gunzip(data: bytes, url: str) -> bytes:
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, MAX_FETCH_BYTES + 1)
    except zlib.error as err:
        raise InvalidRequestError(f"sitemap {url} is not valid gzip ({err})") from None
    if len(out) > MAX_FETCH_BYTES:
        raise InvalidRequestError(f"sitemap {url} inflates past the {MAX_FETCH_BYTES}-byte limit")
    return out


def _local_name(tag: str) -> str:
    return tag.rpartition("}")[2]
