"""The SSRF guard (spec §9): the one HTTP client that fetches anything on someone's behalf.

A URL is judged in two stages. The static check (`check_url`, `is_url_allowed`; spec §9.2) needs no DNS: the
scheme is http or https, the host is present, has no zone id, maps through IDNA (UTS 46), and is neither a
refused name (`localhost`, `*.local`, `*.internal`, a single label) nor an IP literal outside the public
ranges (`is_public_ip`, spec §9.3), numeric forms such as `127.1`, `2130706433`, `0x7f000001` and
`0177.0.0.1` included. Then `GuardedClient` resolves the name once, keeps only the public addresses, and
sends the request to one of those IP literals, with the name kept in the `Host` header and as the TLS server
name: nothing resolves the name a second time between the check and the connection, so DNS rebinding fails.
Redirects are followed by the guard, every hop judged again, at most `MAX_REDIRECTS`; bodies are capped and
timed while they stream, so a slow or endless body cannot hold a worker.

`allow_private_networks=True` (tests with loopback servers, a deployment that reads its intranet) relaxes the
name rules and lets private, loopback, carrier-NAT and the other non-public addresses through; schemes are
still checked and resolution still pinned. Link-local addresses stay refused even then (`169.254.0.0/16`,
the cloud metadata address `169.254.169.254` among them, `fe80::/10`, and their IPv4-mapped and
IPv4-compatible forms): no deployment means to read its cloud metadata.

Errors are the contract's:

    InvalidRequestError   the URL is refused or malformed; a body over its cap
    UnavailableError      DNS failure, no public address, connect failure, timeout, broken stream
    BadStatusError        a final status other than 2xx or 304, or a redirect that was refused or not followed
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Final
from urllib.parse import urljoin, urlsplit

import httpx
import idna

from engines.contract import EngineError, InvalidRequestError, UnavailableError

MAX_FETCH_BYTES: Final = 32 * 1024 * 1024
MAX_PAGE_BYTES: Final = 10 * 1024 * 1024
MAX_FEED_BYTES: Final = 5 * 1024 * 1024
MAX_REDIRECTS: Final = 10

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]
"""(host, port) → the host's addresses as strings, in the order to try them."""

_SCHEMES: Final = {"http": 80, "https": 443}
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
# Headers that carry a credential for one origin; a redirect to another origin does not get them.
_ORIGIN_HEADERS: Final = ("authorization", "cookie", "proxy-authorization")
# TLS connections are pooled per server name (`_Transports`); this many names keep their pool at once.
_POOLED_HOSTS: Final = 16

# Spec §9.3, one table per family.
_V4_TABLE: Final = (
    "0.0.0.0/8 10.0.0.0/8 100.64.0.0/10 127.0.0.0/8 169.254.0.0/16 172.16.0.0/12 192.0.0.0/16 192.168.0.0/16"
    " 198.18.0.0/15 198.51.100.0/24 203.0.113.0/24 224.0.0.0/4 240.0.0.0/4"
)
_V6_TABLE: Final = "::1/128 ::/128 ff00::/8 fc00::/7 fe80::/10 2001:db8::/32"
_V4_REFUSED: Final = tuple(map(ipaddress.IPv4Network, _V4_TABLE.split()))
_V6_REFUSED: Final = tuple(map(ipaddress.IPv6Network, _V6_TABLE.split()))
_V4_LINK_LOCAL: Final = ipaddress.IPv4Network("169.254.0.0/16")
_V6_LINK_LOCAL: Final = ipaddress.IPv6Network("fe80::/10")
_V4_COMPATIBLE: Final = ipaddress.IPv6Network("::/96")


class BadStatusError(EngineError):
    """A final response that is neither 2xx nor 304, or a redirect the guard refused or did not follow."""

    def __init__(self, message: str, status: int, url: str) -> None:
        super().__init__(message)
        self.status = status
        self.url = url

    def __reduce__(self) -> tuple[type[BadStatusError], tuple[str, int, str]]:  # type: ignore[override]
        # Errors cross process boundaries (Celery, converter pools): keep the status and URL with them.
        return (type(self), (self.message, self.status, self.url))


@dataclass(frozen=True)
class Fetched:
    """A response the guard accepted: the final URL (after redirects), a 2xx or 304 status, its headers,
    and its whole body (`b""` for a 304), never more than the cap the caller asked for."""

    url: str
    status: int
    headers: httpx.Headers
    body: bytes


def is_public_ip(ip: IPAddress) -> bool:
    """True unless `ip` is in one of the non-public ranges of spec §9.3; an IPv4-mapped or IPv4-compatible
    IPv6 address is judged by the IPv4 address it embeds."""
    if isinstance(ip, ipaddress.IPv4Address):
        return not any(ip in net for net in _V4_REFUSED)
    if any(ip in net for net in _V6_REFUSED):
        return False
    embedded = _embedded_v4(ip)
    return embedded is None or is_public_ip(embedded)


def is_url_allowed(url: str) -> bool:
    """Whether `url` passes the static checks of spec §9.2 (no DNS): what `check_url` accepts."""
    try:
        check_url(url)
    except InvalidRequestError:
        return False
    return True


def check_url(url: str, *, allow_private_networks: bool = False) -> str:
    """The host to resolve for `url` (its IDNA form, or the canonical IP literal), after the static checks
    of spec §9.2; `InvalidRequestError` naming the URL and the reason when it is refused.

    `allow_private_networks` relaxes the name rules and the non-public ranges except link-local, as the
    client does with that option (a source's configuration uses it, before it knows the options).
    """
    return _vet(url, allow_private_networks).host


@dataclass(frozen=True)
class _Target:
    """A URL that passed the static checks: where to send it, and how to name it."""

    url: str
    scheme: str
    host: str  # the IDNA (ASCII) name, or the canonical IP literal
    literal: IPAddress | None
    port: int
    path: str
    query: str

    @property
    def host_header(self) -> str:
        shown = f"[{self.host}]" if isinstance(self.literal, ipaddress.IPv6Address) else self.host
        return shown if self.port == _SCHEMES[self.scheme] else f"{shown}:{self.port}"

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)

    def request_url(self, ip: IPAddress) -> httpx.URL:
        """The URL naming `ip` instead of the host: where the request really goes."""
        netloc = f"[{ip}]" if isinstance(ip, ipaddress.IPv6Address) else str(ip)
        query = f"?{self.query}" if self.query else ""
        try:
            return httpx.URL(f"{self.scheme}://{netloc}:{self.port}{self.path or '/'}{query}")
        except httpx.InvalidURL as err:
            raise InvalidRequestError(f"url {_shown(self.url)} is malformed ({err})") from None


def _vet(url: str, relaxed: bool) -> _Target:
    shown = _shown(url)
    try:
        parts = urlsplit(url.strip())
        port = parts.port
        raw_host = parts.hostname
    except ValueError as err:
        raise InvalidRequestError(f"url {shown} is malformed ({err})") from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise InvalidRequestError(f"url {shown} is refused: scheme {scheme or '(none)'!r} is not http or https")
    host = (raw_host or "").strip().rstrip(".")
    if not host:
        raise InvalidRequestError(f"url {shown} is refused: it names no host")
    if "%" in host:
        raise InvalidRequestError(f"url {shown} is refused: a zone id in the host is not allowed")
    literal, name = _host_forms(host, shown)
    if literal is not None:
        _judge_literal(literal, relaxed, shown)
        name = literal.compressed
    elif not relaxed:
        _judge_name(name, shown)
    port = port if port is not None else _SCHEMES[scheme]
    return _Target(url.strip(), scheme, name, literal, port, parts.path, parts.query)


def _host_forms(host: str, shown: str) -> tuple[IPAddress | None, str]:
    """The host as an IP address when it is a literal (IPv6, IPv4 in any loose numeric form), else its name."""
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host), host
        except ValueError:
            raise InvalidRequestError(f"url {shown} is malformed: {host!r} is not an IPv6 address") from None
    try:
        name = idna.encode(host, uts46=True).decode("ascii").lower()
    except (idna.IDNAError, UnicodeError):
        raise InvalidRequestError(f"url {shown} is refused: host {host!r} is not a valid domain name") from None
    last = name.rpartition(".")[2]
    if not (last.isdigit() or (last[:2] == "0x" and _is_hex(last[2:]))):
        return None, name
    address = _loose_ipv4(name)
    if address is None:
        raise InvalidRequestError(f"url {shown} is malformed: {host!r} is not a valid IPv4 address")
    return address, name


def _is_hex(text: str) -> bool:
    return bool(text) and all(c in "0123456789abcdef" for c in text)


def _loose_ipv4(text: str) -> ipaddress.IPv4Address | None:
    """`text` read as `inet_aton` reads it (1 to 4 parts; decimal, octal with a leading 0, hex with 0x);
    None when it is not an address. Written out because the C function accepts trailing garbage."""
    parts = text.split(".")
    if len(parts) > 4:
        return None
    values: list[int] = []
    for part in parts:
        value = _loose_number(part)
        if value is None:
            return None
        values.append(value)
    *head, last = values
    if any(value > 255 for value in head) or last >= 256 ** (5 - len(values)):
        return None
    number = last
    for index, value in enumerate(head):
        number |= value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


def _loose_number(part: str) -> int | None:
    if part[:2] in ("0x", "0X"):
        return int(part[2:], 16) if _is_hex(part[2:].lower()) else None
    if not part.isascii() or not part.isdigit():
        return None
    if len(part) > 1 and part.startswith("0"):
        return int(part, 8) if all(c in "01234567" for c in part) else None
    return int(part)


def _judge_literal(ip: IPAddress, relaxed: bool, shown: str) -> None:
    if relaxed:
        if _is_link_local(ip):
            raise InvalidRequestError(f"url {shown} is refused: {ip.compressed} is a link-local address")
    elif not is_public_ip(ip):
        raise InvalidRequestError(f"url {shown} is refused: {ip.compressed} is not a public address")


def _judge_name(name: str, shown: str) -> None:
    if name == "localhost":
        reason = "localhost is not reachable on anyone's behalf"
    elif name.endswith((".local", ".internal")):
        reason = f"{name} is a local network name"
    elif "." not in name:
        reason = f"{name} is a single-label name"
    else:
        return
    raise InvalidRequestError(f"url {shown} is refused: {reason}")


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _V4_COMPATIBLE and int(ip) > 1:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _is_link_local(ip: IPAddress) -> bool:
    if isinstance(ip, ipaddress.IPv4Address):
        return ip in _V4_LINK_LOCAL
    embedded = _embedded_v4(ip)
    return ip in _V6_LINK_LOCAL or (embedded is not None and embedded in _V4_LINK_LOCAL)


def _shown(url: str) -> str:
    """`url` fit for a message: without userinfo (it may hold a password), and bounded in length."""
    text = url.strip()
    scheme, sep, rest = text.partition("://")
    if sep:
        authority, slash, tail = rest.partition("/")
        text = f"{scheme}{sep}{authority.rpartition('@')[2]}{slash}{tail}"
    return repr(text if len(text) <= 200 else text[:200] + "…")


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses `getaddrinfo` gives for a stream connection to `host`, in its order, without repeats."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


_SHARED: dict[tuple[bool, str, float], GuardedClient] = {}
_SHARED_LOCK = threading.Lock()


def shared_client(
    *, allow_private_networks: bool = False, user_agent: str = "tm-reader", timeout_s: float = 20.0
) -> GuardedClient:
    """The process's one client for these options, for readers built per sync: its connection pools live as
    long as the process and are reused from sync to sync, instead of being left open by every reader."""
    key = (allow_private_networks, user_agent, timeout_s)
    with _SHARED_LOCK:
        client = _SHARED.get(key)
        if client is None:
            client = _SHARED[key] = GuardedClient(
                allow_private_networks=allow_private_networks, user_agent=user_agent, timeout_s=timeout_s
            )
        return client


class GuardedClient:
    """Fetches URLs under the guard's policy (module docstring); synchronous, for readers in worker threads.

    One client may be shared by threads. `requests` counts the requests sent (each hop of a redirect is one).
    `resolver` and `transport` stand in for DNS and the network in tests; an injected transport receives the
    requests addressed to the pinned IP literals, exactly as the network would.
    """

    def __init__(
        self,
        *,
        allow_private_networks: bool = False,
        user_agent: str = "tm-reader",
        timeout_s: float = 20.0,
        resolver: Resolver | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.allow_private_networks = allow_private_networks
        self.user_agent = user_agent
        self.timeout_s = timeout_s
        self.requests = 0
        self._resolver = resolver or system_resolver
        self._transports = _Transports(transport)
        self._lock = threading.Lock()

    def __enter__(self) -> GuardedClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close every pooled connection; the client must not be used afterwards."""
        self._transports.close()

    def get(self, url: str, *, max_bytes: int = MAX_FETCH_BYTES, headers: Mapping[str, str] | None = None) -> Fetched:
        """GET `url`, following at most `MAX_REDIRECTS` redirects, each hop judged and pinned anew, and read
        at most `max_bytes` of the final body. `headers` go with every hop to the same origin (credentials are
        dropped when a redirect leaves it). Raises as the module docstring says."""
        target = _vet(url, self.allow_private_networks)
        first = target.origin
        hops = 0
        while True:
            sent = dict(headers or {})
            if target.origin != first:
                sent = {k: v for k, v in sent.items() if k.lower() not in _ORIGIN_HEADERS}
            response, deadline = self._send(target, sent)
            with contextlib.closing(response):
                status = response.status_code
                if status not in _REDIRECTS:
                    return self._finish(target, response, max_bytes, deadline)
                if hops == MAX_REDIRECTS:
                    message = f"GET {_shown(url)} redirected more than {MAX_REDIRECTS} times"
                    raise BadStatusError(message, status, target.url)
                target = self._next_hop(target, response)
                hops += 1

    def _finish(self, target: _Target, response: httpx.Response, max_bytes: int, deadline: float) -> Fetched:
        status = response.status_code
        if status == 304:
            return Fetched(target.url, status, response.headers, b"")
        if not 200 <= status < 300:
            raise BadStatusError(f"GET {_shown(target.url)} answered {status}", status, target.url)
        body = _read_capped(response, max_bytes, deadline, target)
        return Fetched(target.url, status, response.headers, body)

    def _next_hop(self, target: _Target, response: httpx.Response) -> _Target:
        location = response.headers.get("location")
        status = response.status_code
        if not location:
            raise BadStatusError(f"GET {_shown(target.url)} answered {status} without a location", status, target.url)
        following = urljoin(target.url, location.strip())
        try:
            return _vet(following, self.allow_private_networks)
        except InvalidRequestError as refused:
            message = f"GET {_shown(target.url)} answered {status}, redirect not followed: {refused.message}"
            raise BadStatusError(message, status, target.url) from None

    def _send(self, target: _Target, headers: Mapping[str, str]) -> tuple[httpx.Response, float]:
        """Send one request to the first of the target's vetted addresses that accepts a connection; the
        response (its body not read yet) and the moment its body must have arrived by."""
        addresses = [target.literal] if target.literal is not None else self._addresses(target)
        failure = "no address to try"
        for ip in addresses:
            deadline = time.monotonic() + self.timeout_s
            request = self._request(target, ip, headers)
            try:
                response = self._transports.for_host(target).handle_request(request)
            except httpx.ConnectError as err:
                failure = f"{ip.compressed}: {err or 'connection refused'}"
                continue  # the next vetted address, and never another
            except httpx.TimeoutException as err:
                self._count()
                raise UnavailableError(f"GET {_shown(target.url)} timed out after {self.timeout_s:g} s") from err
            except httpx.HTTPError as err:
                self._count()
                raise UnavailableError(f"GET {_shown(target.url)} failed ({type(err).__name__})") from err
            self._count()
            return response, deadline
        raise UnavailableError(f"cannot connect to host {target.host} ({failure})")

    def _count(self) -> None:
        with self._lock:
            self.requests += 1

    def _request(self, target: _Target, ip: IPAddress, headers: Mapping[str, str]) -> httpx.Request:
        timeout = httpx.Timeout(self.timeout_s)
        extensions: dict[str, object] = {"timeout": timeout.as_dict()}
        if target.scheme == "https":
            extensions["sni_hostname"] = target.host
        all_headers = {"User-Agent": self.user_agent, **headers, "Host": target.host_header}
        return httpx.Request("GET", target.request_url(ip), headers=all_headers, extensions=extensions)

    def _addresses(self, target: _Target) -> list[IPAddress]:
        """The host's addresses this client may connect to, from exactly one lookup."""
        try:
            answers = self._resolver(target.host, target.port)
        except (OSError, UnicodeError) as err:
            raise UnavailableError(f"cannot resolve host {target.host} ({type(err).__name__})") from err
        kept: list[IPAddress] = []
        for answer in answers:
            try:
                ip = ipaddress.ip_address(answer)
            except ValueError:
                continue  # a scoped or garbled answer: never a place to connect to
            allowed = not _is_link_local(ip) if self.allow_private_networks else is_public_ip(ip)
            if allowed and ip not in kept:
                kept.append(ip)
        if not kept:
            raise UnavailableError(f"host {target.host} resolved to no public addresses")
        return kept


def _read_capped(response: httpx.Response, max_bytes: int, deadline: float, target: _Target) -> bytes:
    """The decoded body, failing as soon as it exceeds `max_bytes` or arrives later than `deadline`."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise InvalidRequestError(
            f"GET {_shown(target.url)}: response body exceeds {max_bytes}-byte limit (Content-Length={declared})"
        )
    chunks: list[bytes] = []
    total = 0
    for chunk in _stream(response, target):
        total += len(chunk)
        if total > max_bytes:
            raise InvalidRequestError(
                f"GET {_shown(target.url)}: response body exceeds {max_bytes}-byte limit (read {total} bytes)"
            )
        if time.monotonic() > deadline:
            raise UnavailableError(f"GET {_shown(target.url)}: the body did not arrive in time")
        chunks.append(chunk)
    return b"".join(chunks)


def _stream(response: httpx.Response, target: _Target) -> Iterator[bytes]:
    try:
        yield from response.iter_bytes()
    except httpx.TimeoutException as err:
        raise UnavailableError(f"GET {_shown(target.url)}: the body did not arrive in time") from err
    except httpx.HTTPError as err:
        raise UnavailableError(f"GET {_shown(target.url)}: failed to read response body") from err


class _Transports:
    """The connection pools: one per TLS server name, so that a connection verified for one name is never
    reused for another name served from the same address; plain HTTP shares one pool."""

    def __init__(self, injected: httpx.BaseTransport | None) -> None:
        self._injected = injected
        self._pools: OrderedDict[str, httpx.BaseTransport] = OrderedDict()
        self._lock = threading.Lock()

    def for_host(self, target: _Target) -> httpx.BaseTransport:
        if self._injected is not None:
            return self._injected
        key = target.host if target.scheme == "https" else ""
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                pool = self._pools[key] = httpx.HTTPTransport(retries=0)
                if len(self._pools) > _POOLED_HOSTS:
                    _, evicted = self._pools.popitem(last=False)
                    evicted.close()
            self._pools.move_to_end(key)
            return pool

    def close(self) -> None:
        with self._lock:
            pools = [*self._pools.values(), *([self._injected] if self._injected else [])]
            self._pools.clear()
        for pool in pools:
            pool.close()
