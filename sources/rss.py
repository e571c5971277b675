"""The RSS and Atom source (docs/spec/sources-and-documents.md §6): every entry of one feed is a unit, read as a small
HTML document.

The guard (`sources.net`) fetches the feed and feedparser only parses the bytes: it is never given a URL or
anything it could take for a file name, since it would fetch or open that itself, outside the guard.

A unit's version is `<feed validator>|<entry hash>`: the feed's ETag and Last-Modified, then a short hash of
the entry's timestamp text, title, link and body, so an entry edited without a new timestamp changes too. The
validator rides in the versions because they are all a host keeps between syncs and processes; a listing
recovers it from the versions it is given and asks conditionally, so an unchanged feed costs one request (a
304) and nothing is read again. A feed is a window, not a mirror: an entry that rolls off it is listed with
the version the host holds, so its item is kept. A parsed feed is cached per process for `FEED_CACHE_TTL`
seconds, so reading the entries right after listing them fetches nothing more.
"""

from __future__ import annotations

import hashlib
import html
import io
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Final
from urllib.parse import urlsplit

import feedparser  # type: ignore[import-untyped]

from engines.contract import EngineError, InvalidRequestError, NotFoundError, UnavailableError
from sources.base import Listing, ReaderOptions, Unit, UnitContent
from sources.config import SourceConfigKind, SourceEntry, SourceRequest, configured_entry
from sources.net import MAX_FEED_BYTES, BadStatusError, Fetched, GuardedClient, check_url, shared_client
from sources.registry import KindSpec

FEED_CACHE_TTL: Final = 60.0
DEFAULT_MAX_ITEMS: Final = 50
"""Entries read when a source sets no `max_items` (docs/spec/sources-and-documents.md §1.2 reader default)."""
CREATED_MAX_ITEMS: Final = 20
"""`max_items` filled in when a source is configured without one (docs/spec/sources-and-documents.md §1.2 creation
default)."""
ENTRY_FILE_NAME: Final = "entry.html"

_MAX_UNIT_ID: Final = 512
_MAX_VALIDATOR: Final = 256
_CACHED_FEEDS: Final = 32
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]+")
_ROOT: Final = re.compile(rb"<([A-Za-z_][\w:.-]*)")


@dataclass(frozen=True, slots=True)
class Validator:
    """The feed's own change validators, as its server last sent them."""

    etag: str | None = None
    last_modified: str | None = None

    def headers(self) -> dict[str, str]:
        """The conditional request headers that ask whether the feed changed since."""
        sent = {"If-None-Match": self.etag, "If-Modified-Since": self.last_modified}
        return {name: value for name, value in sent.items() if value}


@dataclass(frozen=True, slots=True)
class FeedEntry:
    """One entry as parsed: its unit id, what the item shows, and the hash that says whether it changed."""

    unit_id: str
    title: str
    link: str | None
    body: str
    stamp: str
    observed_at: datetime | None
    digest: str


@dataclass(frozen=True, slots=True)
class Feed:
    """A parsed feed: the validator its response carried and its entries, in document order."""

    validator: Validator | None
    entries: tuple[FeedEntry, ...]

    def versioned(self, entry: FeedEntry) -> str:
        """`entry`'s unit version in this feed."""
        if self.validator is None:
            return entry.digest
        return f"{self.validator.etag or ''}|{self.validator.last_modified or ''}|{entry.digest}"


def known_validator(versions: Iterable[str]) -> Validator | None:
    """The validator to ask with, recovered from the versions a host holds; None: ask unconditionally.

    Entries that rolled off keep the validator of the last feed they were in, so the versions may carry
    several; the one most of them carry is the last feed's, since it holds every entry still in the window.
    """
    counted = Counter(_validator_of(version) for version in versions)
    counted.pop(None, None)
    return counted.most_common(1)[0][0] if counted else None


def _validator_of(version: str) -> Validator | None:
    parts = version.split("|")
    if len(parts) != 3 or not (parts[0] or parts[1]):
        return None
    return Validator(parts[0] or None, parts[1] or None)


def response_validator(fetched: Fetched) -> Validator | None:
    """The response's ETag and Last-Modified; one that could not travel inside a version is left out."""
    etag, modified = (_carried(fetched.headers.get(name)) for name in ("etag", "last-modified"))
    return Validator(etag, modified) if etag or modified else None


def _carried(value: str | None) -> str | None:
    value = (value or "").strip()
    if not value or len(value) > _MAX_VALIDATOR or "|" in value or _CONTROL.search(value):
        return None
    return value


def parse_feed(data: bytes, url: str, content_type: str | None = None) -> tuple[FeedEntry, ...]:
    """The entries of an RSS (0.9x, 1.0, 2.0) or Atom document, in document order, one per unit id (the
    first wins); anything else is `InvalidRequestError` naming `url` and the reason."""
    headers = {"content-type": content_type} if content_type else {}
    try:
        # A stream, never bytes or str: feedparser takes bytes or text for a file name or URL to open.
        parsed = feedparser.parse(io.BytesIO(data), response_headers=headers)
    except Exception as err:
        # The parser's own failure on a hostile document is that document's fault; it must not crash a worker.
        raise InvalidRequestError(
            f"{url} is not an RSS or Atom feed: the parser failed ({type(err).__name__})"
        ) from err
    version = str(dict.get(parsed, "version") or "")
    if not version.startswith(("rss", "atom")):
        raise InvalidRequestError(f"{url} is not an RSS or Atom feed: {_refusal(parsed, data)}")
    atom = version.startswith("atom")
    entries: dict[str, FeedEntry] = {}
    for index, raw in enumerate(parsed.entries):
        entry = _entry(dict(raw), index, atom)
        entries.setdefault(entry.unit_id, entry)
    return tuple(entries.values())


def _refusal(parsed: Any, data: bytes) -> str:
    error = dict.get(parsed, "bozo_exception")
    if error is not None:
        message = error.getMessage() if hasattr(error, "getMessage") else str(error)
        return f"it is not well-formed XML ({message})"
    root = _ROOT.search(data[:4096])
    found = f"<{root.group(1).decode('ascii', 'replace')}>" if root else "no root element"
    return f"its root is {found}, not <rss>, <rdf:RDF> or <feed>"


def _entry(raw: dict[str, Any], index: int, atom: bool) -> FeedEntry:
    """One entry by the docs/spec/sources-and-documents.md §6 table (feedparser names RSS `guid` and Atom `id` both
    `id`)."""
    link = _text(raw.get("link")) or None
    fallback = f"atom-{index}" if atom else f"rss-{index}"
    raw_id = _text(raw.get("id")) or (None if atom else link)
    summary, content = _text(raw.get("summary")), _content(raw.get("content"))
    body = (content or summary) if atom else (summary or content)
    stamps = ("updated", "published") if atom else ("published", "updated")
    stamp = next((text for text in (_text(raw.get(name)) for name in stamps) if text), "")
    title = _text(raw.get("title"))
    digest = hashlib.sha256(json.dumps([stamp, title, link, body]).encode()).hexdigest()[:16]
    return FeedEntry(_unit_id(raw_id, fallback), title, link, body, stamp, parse_stamp(stamp), digest)


def _text(value: object) -> str:
    # Lone surrogates cannot be stored or hashed as UTF-8; a hostile feed's text is made valid here.
    return value.encode("utf-8", "replace").decode("utf-8").strip() if isinstance(value, str) else ""


def _content(value: object) -> str:
    if not isinstance(value, list):
        return ""
    return next(
        (text for text in (_text(dict.get(part, "value")) for part in value if isinstance(part, dict)) if text), ""
    )


def _unit_id(raw: str | None, fallback: str) -> str:
    """The entry id made safe as a unit id: control characters and runs of whitespace become one space, and
    an id too long to be a key is cut, with a hash of the whole so distinct ids stay distinct."""
    cleaned = " ".join(_CONTROL.sub(" ", raw or "").split())
    if not cleaned:
        return fallback
    if len(cleaned) <= _MAX_UNIT_ID:
        return cleaned
    digest = hashlib.sha256(cleaned.encode()).hexdigest()[:16]
    return f"{cleaned[: _MAX_UNIT_ID - 17]}~{digest}"


def parse_stamp(text: str) -> datetime | None:
    """A feed timestamp in UTC: RFC 2822 (RSS), else RFC 3339 (Atom); None when it is neither."""
    if not text:
        return None
    moment: datetime | None
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        moment = None
    if moment is None:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return None
    try:
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except OverflowError:
        return None  # a moment that has no UTC form within years 1 to 9999


def entry_document(entry: FeedEntry) -> bytes:
    """The entry as the HTML the pipeline converts: its title as `<title>` (the item's title), then its body;
    a body without `<` is plain text, escaped into paragraphs."""
    title = html.escape(entry.title)
    body = entry.body
    if "<" not in body:
        body = "\n".join(f"<p>{html.escape(part.strip())}</p>" for part in body.split("\n\n") if part.strip())
    if not body:
        body = f"<p>{title}</p>"  # a title-only entry (a link feed) still has its title to store
    head = f"<title>{title}</title>" if title else ""
    page = f'<!DOCTYPE html>\n<html><head><meta charset="utf-8">{head}</head>\n<body>{body}\n</body></html>\n'
    return page.encode("utf-8")


class FeedCache:
    """Parsed feeds by key, each for `ttl` seconds; one process-wide instance serves every reader.

    `fetching(key)` is a lock per key, so that threads reading entries of one feed at once fetch it once.
    """

    def __init__(self, ttl: float = FEED_CACHE_TTL, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._feeds: dict[object, tuple[float, Feed]] = {}
        self._locks: dict[object, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, key: object) -> Feed | None:
        with self._lock:
            held = self._feeds.get(key)
            return held[1] if held is not None and self._clock() - held[0] < self.ttl else None

    def put(self, key: object, feed: Feed) -> None:
        with self._lock:
            now = self._clock()
            self._feeds.pop(key, None)
            for stale in [k for k, (at, _) in self._feeds.items() if now - at >= self.ttl]:
                del self._feeds[stale]
            while len(self._feeds) >= _CACHED_FEEDS:
                del self._feeds[next(iter(self._feeds))]
            self._feeds[key] = (now, feed)

    def touch(self, key: object, validator: Validator) -> None:
        """Start `key`'s time again when its server says the feed is still the one cached (a 304)."""
        with self._lock:
            held = self._feeds.get(key)
            if held is not None and held[1].validator == validator:
                self._feeds[key] = (self._clock(), held[1])

    def fetching(self, key: object) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())


FEED_CACHE: Final = FeedCache()


class RssReader:
    """Lists and reads the entries of the feed at `entry.url`, at most `entry.max_items` (default 50).

    A `ConditionalSource`: `list_units_since` asks the server whether the feed changed since the versions the
    host holds. The feed gone (404, 410) is `NotFoundError` and a failing server (5xx, 429, timeout)
    `UnavailableError`, so a listing failure keeps what is stored; a document that is not a feed is
    `InvalidRequestError`.
    """

    kind = SourceConfigKind.RSS_FEED

    def __init__(self, entry: SourceEntry, client: GuardedClient, *, cache: FeedCache = FEED_CACHE) -> None:
        if not entry.url:
            raise InvalidRequestError(f"source {entry.id}: url is required for an rss source")
        self.entry = entry
        self.url = entry.url
        self.max_items = entry.max_items or DEFAULT_MAX_ITEMS
        self._client = client
        self._cache = cache
        # A feed fetched with private networks allowed must not serve a reader that may not reach them.
        self._key = (self.url, client.allow_private_networks)

    def list_units(self) -> Listing:
        """Every entry of the feed now (one unconditional request)."""
        return self.list_units_since({})

    def list_units_since(self, known: Mapping[str, str]) -> Listing:
        """The feed's entries with their versions now, asking with the validator `known` carries; entries the
        host holds that the feed no longer shows are listed with their known versions (they are kept)."""
        validator = known_validator(known.values())
        fetched = self._fetch(validator.headers() if validator else {})
        if fetched.status == 304:
            if validator is not None:
                self._cache.touch(self._key, validator)
            units = {unit_id: Unit(unit_id, version) for unit_id, version in known.items()}
        else:
            feed = self._parsed(fetched)
            units = {e.unit_id: Unit(e.unit_id, feed.versioned(e)) for e in feed.entries[: self.max_items]}
            for unit_id, version in known.items():
                units.setdefault(unit_id, Unit(unit_id, version))
        return Listing(units=tuple(sorted(units.values(), key=lambda unit: unit.id)))

    def read(self, unit_id: str) -> UnitContent:
        """One entry as an HTML document, from the cached feed when it is fresh and holds the entry, else
        from the feed fetched again; `NotFoundError` when the feed does not hold it."""
        feed = self._cache.get(self._key)
        found = None if feed is None else self._find(feed, unit_id)
        if feed is None or found is None:
            feed = self._fresh(feed)
            found = self._find(feed, unit_id)
        if found is None:
            raise NotFoundError(f"entry {unit_id!r} is not in the feed {self.url} now")
        origin = self.entry.origin(self.kind.item_source, url=found.link, observed_at=found.observed_at)
        data = entry_document(found)
        return UnitContent(unit_id, feed.versioned(found), origin, data=data, name=ENTRY_FILE_NAME, mime="text/html")

    def _fresh(self, seen: Feed | None) -> Feed:
        """The feed fetched now, unless another thread fetched it since `seen` (an entry may be newer than
        the copy cached, so a cached feed without it is not the last word)."""
        with self._cache.fetching(self._key):
            cached = self._cache.get(self._key)
            return cached if cached is not None and cached is not seen else self._parsed(self._fetch({}))

    def _find(self, feed: Feed, unit_id: str) -> FeedEntry | None:
        return next((e for e in feed.entries[: self.max_items] if e.unit_id == unit_id), None)

    def _parsed(self, fetched: Fetched) -> Feed:
        if fetched.status == 304:
            raise EngineError(f"feed {self.url} answered 304 (not modified) to a request that was not conditional")
        feed = Feed(
            response_validator(fetched), parse_feed(fetched.body, self.url, fetched.headers.get("content-type"))
        )
        self._cache.put(self._key, feed)
        return feed

    def _fetch(self, headers: Mapping[str, str]) -> Fetched:
        try:
            return self._client.get(self.url, max_bytes=MAX_FEED_BYTES, headers=headers)
        except BadStatusError as err:
            if err.status in (404, 410):
                raise NotFoundError(f"feed {self.url} is gone (HTTP {err.status}); its items are kept") from err
            if err.status >= 500 or err.status == 429:
                raise UnavailableError(f"feed {self.url} is unavailable for now (HTTP {err.status})") from err
            raise


def _configure(request: SourceRequest) -> SourceEntry:
    request.refuse_options(SourceConfigKind.RSS_FEED.alias, "max_items")
    url = request.target.strip()
    scheme, _, rest = url.partition("://")
    if scheme.lower() not in ("http", "https") or not rest:
        raise InvalidRequestError(f"{request.target!r} is not a feed URL: give an http or https URL")
    # The static checks only: whether private addresses may be reached is the reader options' to say.
    check_url(url, allow_private_networks=True)
    if "@" in urlsplit(url).netloc:
        raise InvalidRequestError(f"{urlsplit(url).hostname}: credentials in a feed URL are not supported")
    max_items = request.max_items or CREATED_MAX_ITEMS
    return configured_entry(request, feed_source_id(url), url, url=url, max_items=max_items)


def feed_source_id(url: str) -> str:
    """A stable id for a feed URL: its host and path made id-safe, and a short hash of the whole URL."""
    parts = urlsplit(url)
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", f"{parts.hostname or ''}{parts.path}").strip("-") or "feed"
    return f"{name[:48].rstrip('-')}-{hashlib.sha256(url.encode()).hexdigest()[:8]}"


def _build(entry: SourceEntry, options: ReaderOptions) -> RssReader:
    client = shared_client(
        allow_private_networks=options.allow_private_networks,
        user_agent=options.user_agent,
        timeout_s=options.fetch_timeout_s,
    )
    return RssReader(entry, client)


SPEC = KindSpec(
    kind=SourceConfigKind.RSS_FEED,
    target="url",
    summary="the entries of an RSS or Atom feed",
    configure=_configure,
    build=_build,
)
