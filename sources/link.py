"""The link source (docs/spec/sources-and-documents.md §5): one web page, or every page a sitemap lists on the sitemap's
own host.

A page is a unit whose id is its URL and whose version is what the server says identifies its content: the
ETag, else the Last-Modified date, else a hash of the body. Listing is conditional (`ConditionalSource`):
every page costs one GET carrying `If-None-Match` or `If-Modified-Since` built from the version the host
holds, so an unchanged page costs one 304 and is neither read nor converted again. A page that answers 404
or 410 is left out (the host deletes its items); one that fails for now (5xx, 429, a timeout, a refused
connection) keeps its known version, because a server in trouble is never taken for a deletion. The body a
listing fetched is kept a short while (`_BodyCache`), so reading the page right after costs nothing more.

Every fetch goes through the SSRF guard (`sources.net`), redirects included. Pages are handed over as the
bytes the server sent (transcoded to UTF-8 when the server declared another charset), named so that they
sniff as what the server said they are; the pipeline converts HTML to markdown.
"""

from __future__ import annotations

import codecs
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from engines.contract import (
    Error,
    InvalidRequestError,
    MemoryMeta,
    NotFoundError,
    Segment,
    SegmentKind,
    SourceKind,
    SourceRef,
    UnavailableError,
)
from sources.base import Listing, ReaderOptions, Skipped, Unit, UnitContent
from sources.config import SourceConfigKind, SourceEntry, SourceRequest, configured_entry
from sources.net import (
    MAX_FETCH_BYTES,
    MAX_PAGE_BYTES,
    BadStatusError,
    Fetched,
    GuardedClient,
    check_url,
    shared_client,
)
from sources.registry import KindSpec
from sources.sitemap import MAX_CHILD_SITEMAPS, parse_sitemap

MAX_SITEMAP_PAGES: Final = 1000
# Pages asked about at once while listing: fast enough for a thousand pages, gentle on one host.
_LISTING_THREADS: Final = 4
_GONE: Final = frozenset({404, 410})
# Statuses that say "not now" rather than "no": the page keeps its known version.
_TRANSIENT: Final = frozenset({408, 425, 429})
# What a page's MIME type says its file name should end with, so that sniffing agrees with the server.
_EXTENSIONS: Final = {
    "text/html": "html",
    "application/xhtml+xml": "html",
    "text/markdown": "md",
    "text/x-markdown": "md",
    "text/plain": "txt",
    "text/csv": "csv",
    "application/pdf": "pdf",
}


@dataclass(frozen=True)
class _Page:
    """A page as fetched: its version, the URL it was finally served from, its body and content type."""

    version: str
    url: str
    body: bytes
    content_type: str | None


class _BodyCache:
    """Bodies fetched by a listing, kept `ttl_s` for the read that follows in the same process.

    Keyed by the page's URL and the client's network policy (a body fetched with private networks allowed
    is never handed to a reader without them); bounded in entries and bytes, oldest dropped first.
    """

    def __init__(self, ttl_s: float = 60.0, max_entries: int = 256, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, bool], tuple[float, _Page]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, key: tuple[str, bool], page: _Page) -> None:
        if len(page.body) > self.max_bytes:
            return
        with self._lock:
            self._drop(key)
            self._entries[key] = (time.monotonic() + self.ttl_s, page)
            self._bytes += len(page.body)
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))

    def take(self, key: tuple[str, bool]) -> _Page | None:
        """The page cached under `key` if still fresh, removed from the cache (a read needs it once)."""
        with self._lock:
            found = self._entries.get(key)
            self._drop(key)
        if found is None or found[0] < time.monotonic():
            return None
        return found[1]

    def _drop(self, key: tuple[str, bool]) -> None:
        found = self._entries.pop(key, None)
        if found is not None:
            self._bytes -= len(found[1].body)


_BODIES: Final = _BodyCache()


class LinkReader:
    """Lists and reads one page at `url`, or, with `sitemap`, the pages the sitemap at `url` lists on its
    own host (at most `max_pages`; pages elsewhere are skipped with the reason). Also a `ConditionalSource`.

    Items read carry `entry`'s source reference and namespace (none without an entry) and the page's URL.
    """

    kind = SourceConfigKind.WEB_PAGE

    def __init__(
        self,
        url: str,
        client: GuardedClient,
        *,
        sitemap: bool = False,
        entry: SourceEntry | None = None,
        max_pages: int = MAX_SITEMAP_PAGES,
    ) -> None:
        self.url = url
        self.client = client
        self.sitemap = sitemap
        self.max_pages = max_pages
        self._entry = entry
        # The host pages must share; the client's policy judges the URL itself when it is fetched.
        self._host = check_url(url, allow_private_networks=True)

    def list_units(self) -> Listing:
        """Every page now, each fetched unconditionally."""
        return self.list_units_since({})

    def list_units_since(self, known: Mapping[str, str]) -> Listing:
        """Every page now, each asked about conditionally when `known` holds its version (module docstring).

        Raises when there is nothing to list: the sitemap cannot be read, or the one page is refused by the
        guard, or was never synced and cannot be reached now.
        """
        if not self.sitemap:
            self._host_of(self.url)  # the one page refused by the policy: nothing to list
        pages, skipped = self._sitemap_pages() if self.sitemap else ([self.url], [])
        workers = min(_LISTING_THREADS, len(pages))
        if workers > 1:
            with ThreadPoolExecutor(workers, thread_name_prefix="link-listing") as pool:
                outcomes = list(pool.map(lambda url: self._look(url, known.get(url)), pages))
        else:
            outcomes = [self._look(url, known.get(url)) for url in pages]
        units = [o for o in outcomes if isinstance(o, Unit)]
        skipped += [o for o in outcomes if isinstance(o, Skipped)]
        return Listing(
            units=tuple(sorted(units, key=lambda u: u.id)), skipped=tuple(sorted(skipped, key=lambda s: s.unit_id))
        )

    def read(self, unit_id: str) -> UnitContent:
        """The page now (or as the listing just fetched it): 404 and 410 are `NotFoundError`, a server failing
        for now `UnavailableError`, any other refusal the guard's own error."""
        self._check_unit(unit_id)
        page = _BODIES.take((unit_id, self.client.allow_private_networks))
        if page is None:
            page = _page(self._fetch(unit_id, MAX_PAGE_BYTES, "page"))
        return self._content(unit_id, page)

    def _look(self, url: str, version: str | None) -> Unit | Skipped | None:
        """One page's listing entry: a unit, a refusal, or None when the page is gone."""
        try:
            fetched = self.client.get(url, max_bytes=MAX_PAGE_BYTES, headers=_conditions(version))
        except BadStatusError as err:
            if err.status in _GONE:
                return None if version is not None else Skipped(url, err.message)
            if _is_transient(err.status):
                return self._not_now(url, version, UnavailableError(err.message))
            return Skipped(url, err.message)
        except UnavailableError as err:
            return self._not_now(url, version, err)
        except Error as err:
            return Skipped(url, err.message)
        if fetched.status == 304:
            if version is None:
                return Skipped(url, f"answered 304 to a request that was not conditional ({fetched.url})")
            return Unit(url, version)
        page = _page(fetched)
        _BODIES.put((url, self.client.allow_private_networks), page)
        return Unit(url, page.version)

    def _not_now(self, url: str, version: str | None, err: UnavailableError) -> Unit | Skipped:
        if version is not None:
            return Unit(url, version)
        if not self.sitemap:
            raise err
        return Skipped(url, f"unavailable for now: {err.message}")

    def _fetch(self, url: str, max_bytes: int, what: str) -> Fetched:
        """GET `url` to read it: gone is `NotFoundError`, a server failing for now `UnavailableError`."""
        try:
            return self.client.get(url, max_bytes=max_bytes)
        except BadStatusError as err:
            if err.status in _GONE:
                raise NotFoundError(f"{what} {url} is gone ({err.message})") from err
            if _is_transient(err.status):
                raise UnavailableError(err.message) from err
            raise

    def _sitemap_pages(self) -> tuple[list[str], list[Skipped]]:
        """The sitemap's pages on its host, at most `max_pages`, and the entries it refused (as many)."""
        locations, children = parse_sitemap(self._fetch(self.url, MAX_FETCH_BYTES, "sitemap").body, self.url)
        skipped: list[Skipped] = []
        for child in _unique(children)[:MAX_CHILD_SITEMAPS]:
            reason = self._refusal(child)
            if reason is not None:
                skipped.append(Skipped(child, f"sitemap not read: {reason}"))
                continue
            # A child that cannot be read fails the listing: its pages must not look deleted.
            locations += parse_sitemap(self._fetch(child, MAX_FETCH_BYTES, "sitemap").body, child)[0]
        pages: list[str] = []
        overflow = 0
        for page in _unique(locations):
            reason = self._refusal(page)
            if reason is not None:
                skipped.append(Skipped(page, reason))
            elif len(pages) < self.max_pages:
                pages.append(page)
            else:
                overflow += 1
        # Each refusal becomes a dead letter: a sitemap of other hosts' pages must not flood them.
        skipped = skipped[: self.max_pages]
        if overflow:
            reason = f"the sitemap lists {len(pages) + overflow} pages here; only the first {self.max_pages} are read"
            skipped.append(Skipped(self.url, reason))
        return pages, skipped

    def _refusal(self, url: str) -> str | None:
        """Why a page the sitemap lists is not read, or None."""
        try:
            host = self._host_of(url)
        except InvalidRequestError as err:
            return err.message
        return None if host == self._host else f"on host {host}, not the sitemap's host {self._host}"

    def _host_of(self, url: str) -> str:
        return check_url(url, allow_private_networks=self.client.allow_private_networks)

    def _check_unit(self, unit_id: str) -> None:
        if not self.sitemap:
            if unit_id != self.url:
                raise InvalidRequestError(f"cannot read {unit_id!r}: this link source holds only {self.url}")
            return
        reason = self._refusal(unit_id)
        if reason is not None:
            raise InvalidRequestError(f"cannot read {unit_id!r}: {reason}")

    def _content(self, unit_id: str, page: _Page) -> UnitContent:
        data, mime = _as_utf8(page.body, page.content_type)
        if self._entry is None:
            origin = MemoryMeta.model_validate({"source": SourceRef(kind=SourceKind.LINK), "url": page.url})
        else:
            origin = self._entry.origin(SourceKind.LINK, url=page.url)
        return UnitContent(unit_id, page.version, origin, data=data, name=_file_name(page.url, mime), mime=mime)


def _is_transient(status: int) -> bool:
    return status >= 500 or status in _TRANSIENT


def _page(fetched: Fetched) -> _Page:
    return _Page(_version(fetched), fetched.url, fetched.body, fetched.headers.get("content-type"))


def _version(fetched: Fetched) -> str:
    """What identifies the page's content: its ETag, else its Last-Modified date, else a hash of the body."""
    etag = fetched.headers.get("etag")
    if etag:
        return f"etag:{etag}"
    modified = fetched.headers.get("last-modified")
    if modified:
        return f"modified:{modified}"
    return f"sha256:{hashlib.sha256(fetched.body).hexdigest()}"


def _conditions(version: str | None) -> dict[str, str]:
    """The conditional headers asking whether the page still has `version`; none for a content hash."""
    kind, _, value = (version or "").partition(":")
    if not value or "\r" in value or "\n" in value:
        return {}
    if kind == "etag":
        return {"If-None-Match": value}
    if kind == "modified":
        return {"If-Modified-Since": value}
    return {}


def _unique(urls: list[str]) -> list[str]:
    return list(dict.fromkeys(urls))


def _as_utf8(body: bytes, content_type: str | None) -> tuple[bytes, str | None]:
    """The body in UTF-8 when the server declared a text type in another charset (the pipeline reads text
    as UTF-8), with the content type saying so; anything else as it came."""
    if content_type is None:
        return body, None
    essence, *params = (part.strip() for part in content_type.split(";"))
    charset = next((p.partition("=")[2].strip("\"' ") for p in params if p.lower().startswith("charset=")), "")
    textual = essence.lower().startswith("text/") or essence.lower() == "application/xhtml+xml"
    if not textual or not charset:
        return body, content_type
    try:
        codec = codecs.lookup(charset)
    except LookupError:
        return body, content_type
    if codec.name == "utf-8":
        return body, content_type
    return body.decode(codec.name, errors="replace").encode("utf-8"), f"{essence}; charset=utf-8"


def _file_name(url: str, mime: str | None) -> str:
    """A file name for the page that sniffs as its MIME type says (`index.html` for an HTML page at `/`)."""
    segment = urlsplit(url).path.rpartition("/")[2]
    stem = segment.rpartition(".")[0] if "." in segment else segment
    extension = _EXTENSIONS.get((mime or "").split(";")[0].strip().lower())
    if extension is None:
        return segment or "index"
    return f"{stem or 'index'}.{extension}"


def link_id_for(url: str) -> str:
    """A stable id for a page's URL: its host and path made id-safe, and a short hash of the whole URL."""
    parts = urlsplit(url)
    name = f"{parts.hostname or 'link'}{parts.path.rstrip('/')}"
    digest = hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{Segment.sanitized(SegmentKind.SOURCE, name).id[:48]}-{digest}"


def _configure(request: SourceRequest) -> SourceEntry:
    request.refuse_options(SourceConfigKind.WEB_PAGE.alias, "sitemap")
    url = request.target.strip()
    if not url:
        raise InvalidRequestError("a link source needs the URL of a page (or of a sitemap, with --sitemap)")
    # The options that relax the address rules are the runtime's, not the request's: judge what does not
    # depend on them now (scheme, host syntax, link-local literals) and the rest at every fetch.
    check_url(url, allow_private_networks=True)
    return configured_entry(request, link_id_for(url), url, url=url, sitemap=request.sitemap)


def _build(entry: SourceEntry, options: ReaderOptions) -> LinkReader:
    if not entry.url:
        raise InvalidRequestError(f"source {entry.id}: url is required for a {entry.kind} source")
    client = shared_client(
        allow_private_networks=options.allow_private_networks,
        user_agent=options.user_agent,
        timeout_s=options.fetch_timeout_s,
    )
    return LinkReader(entry.url, client, sitemap=entry.sitemap, entry=entry)


SPEC = KindSpec(
    kind=SourceConfigKind.WEB_PAGE,
    target="url",
    summary="one web page, or the pages of a sitemap (--sitemap)",
    configure=_configure,
    build=_build,
)
