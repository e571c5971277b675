"""The SSRF guard (docs/spec/sources-and-documents.md §9): the one HTTP client that fetches anything on someone's
behalf.

A URL is judged in two stages. The static check (`sources.urls`: `check_url`, `is_url_allowed`;
docs/spec/sources-and-documents.md §9.2) needs no DNS: the scheme is http or https, the host is present, has no zone id,
maps through IDNA (UTS 46), and is neither a refused name (`localhost`, `*.local`, `*.internal`, a single label) nor an
IP literal outside the public ranges (`is_public_ip`, docs/spec/sources-and-documents.md §9.3), numeric forms such as
`127.1`, `2130706433`, `0x7f000001` and `0177.0.0.1` included. Then `GuardedClient` resolves the name once, keeps only
the public addresses, and sends the request to one of those IP literals, with the name kept in the `Host` header and as
the TLS server name: nothing resolves the name a second time between the check and the connection, so DNS rebinding
fails. Redirects are followed by the guard, every hop judged again, at most `MAX_REDIRECTS`; bodies are capped and timed
while they stream, so a slow or endless body cannot hold a worker.

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

import atexit
import contextlib
import ipaddress
import os
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Final
from urllib.parse import urljoin

import httpx

from engines.contract import EngineError, InvalidRequestError, UnavailableError
from sources.urls import (
    IPAddress,
    Target,
    check_url,
    is_link_local,
    is_public_ip,
    is_url_allowed,
    printable,
    vet,
)

MAX_FETCH_BYTES: Final = 32 * 1024 * 1024
MAX_PAGE_BYTES: Final = 10 * 1024 * 1024
MAX_FEED_BYTES: Final = 5 * 1024 * 1024
MAX_REDIRECTS: Final = 10

Resolver = Callable[[str, int], list[str]]
"""(host, port) → the host's addresses as strings, in the order to try them."""

_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
# Headers that carry a credential for one origin; a redirect to another origin does not get them.
_ORIGIN_HEADERS: Final = ("authorization", "cookie", "proxy-authorization")
# TLS connections are pooled per server name (`_Transports`); this many names keep their pool at once.
_POOLED_HOSTS: Final = 16

__all__ = [
    "MAX_FEED_BYTES",
    "MAX_FETCH_BYTES",
    "MAX_PAGE_BYTES",
    "MAX_REDIRECTS",
    "BadStatusError",
    "Fetched",
    "GuardedClient",
    "IPAddress",
    "Resolver",
    "check_url",
    "is_public_ip",
    "is_url_allowed",
    "shared_client",
    "system_resolver",
]


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


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses `getaddrinfo` gives for a stream connection to `host`, in its order, without repeats."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


_SHARED: dict[tuple[int, bool, str, float], GuardedClient] = {}
_SHARED_LOCK = threading.Lock()


@atexit.register
def _close_shared() -> None:
    with _SHARED_LOCK:
        mine = [key for key in _SHARED if key[0] == os.getpid()]
        for key in mine:
            _SHARED.pop(key).close()


def shared_client(
    *, allow_private_networks: bool = False, user_agent: str = "tm-reader", timeout_s: float = 20.0
) -> GuardedClient:
    """The process's one client for these options, for readers built per sync: its connection pools live as
    long as the process and are reused from sync to sync, instead of being left open by every reader. A forked
    child (a Celery pool process) gets clients of its own: its parent's pooled sockets are not its to use."""
    key = (os.getpid(), allow_private_networks, user_agent, timeout_s)
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
        target = vet(url, self.allow_private_networks)
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
                    message = f"GET {printable(url)} redirected more than {MAX_REDIRECTS} times"
                    raise BadStatusError(message, status, target.url)
                target = self._next_hop(target, response)
                hops += 1

    def _finish(self, target: Target, response: httpx.Response, max_bytes: int, deadline: float) -> Fetched:
        status = response.status_code
        if status == 304:
            return Fetched(target.url, status, response.headers, b"")
        if not 200 <= status < 300:
            raise BadStatusError(f"GET {printable(target.url)} answered {status}", status, target.url)
        body = _read_capped(response, max_bytes, deadline, target)
        return Fetched(target.url, status, response.headers, body)

    def _next_hop(self, target: Target, response: httpx.Response) -> Target:
        location = response.headers.get("location")
        status = response.status_code
        if not location:
            raise BadStatusError(
                f"GET {printable(target.url)} answered {status} without a location", status, target.url
            )
        following = urljoin(target.url, location.strip())
        try:
            return vet(following, self.allow_private_networks)
        except InvalidRequestError as refused:
            message = f"GET {printable(target.url)} answered {status}, redirect not followed: {refused.message}"
            raise BadStatusError(message, status, target.url) from None

    def _send(self, target: Target, headers: Mapping[str, str]) -> tuple[httpx.Response, float]:
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
                raise UnavailableError(f"GET {printable(target.url)} timed out after {self.timeout_s:g} s") from err
            except httpx.HTTPError as err:
                self._count()
                raise UnavailableError(f"GET {printable(target.url)} failed ({type(err).__name__})") from err
            self._count()
            return response, deadline
        raise UnavailableError(f"cannot connect to host {target.host} ({failure})")

    def _count(self) -> None:
        with self._lock:
            self.requests += 1

    def _request(self, target: Target, ip: IPAddress, headers: Mapping[str, str]) -> httpx.Request:
        timeout = httpx.Timeout(self.timeout_s)
        extensions: dict[str, object] = {"timeout": timeout.as_dict()}
        if target.scheme == "https":
            extensions["sni_hostname"] = target.host
        all_headers = {"User-Agent": self.user_agent, **headers, "Host": target.host_header}
        return httpx.Request("GET", target.request_url(ip), headers=all_headers, extensions=extensions)

    def _addresses(self, target: Target) -> list[IPAddress]:
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
            allowed = not is_link_local(ip) if self.allow_private_networks else is_public_ip(ip)
            if allowed and ip not in kept:
                kept.append(ip)
        if not kept:
            raise UnavailableError(f"host {target.host} resolved to no public addresses")
        return kept


def _read_capped(response: httpx.Response, max_bytes: int, deadline: float, target: Target) -> bytes:
    """The decoded body, failing as soon as it exceeds `max_bytes` or arrives later than `deadline`."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise InvalidRequestError(
            f"GET {printable(target.url)}: response body exceeds {max_bytes}-byte limit (Content-Length={declared})"
        )
    chunks: list[bytes] = []
    total = 0
    for chunk in _stream(response, target):
        total += len(chunk)
        if total > max_bytes:
            raise InvalidRequestError(
                f"GET {printable(target.url)}: response body exceeds {max_bytes}-byte limit (read {total} bytes)"
            )
        if time.monotonic() > deadline:
            raise UnavailableError(f"GET {printable(target.url)}: the body did not arrive in time")
        chunks.append(chunk)
    return b"".join(chunks)


def _stream(response: httpx.Response, target: Target) -> Iterator[bytes]:
    try:
        yield from response.iter_bytes()
    except httpx.TimeoutException as err:
        raise UnavailableError(f"GET {printable(target.url)}: the body did not arrive in time") from err
    except httpx.HTTPError as err:
        raise UnavailableError(f"GET {printable(target.url)}: failed to read response body") from err


class _Transports:
    """The connection pools: one per TLS server name, so that a connection verified for one name is never
    reused for another name served from the same address; plain HTTP shares one pool."""

    def __init__(self, injected: httpx.BaseTransport | None) -> None:
        self._injected = injected
        self._pools: OrderedDict[str, httpx.BaseTransport] = OrderedDict()
        self._lock = threading.Lock()

    def for_host(self, target: Target) -> httpx.BaseTransport:
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
