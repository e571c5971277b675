"""The SSRF guard: docs/spec/sources-and-documents.md §9.7's hostile URL table row by row, pinning, rebinding,
redirects, caps and timeouts.

DNS is the spec's stub resolver and the network an `httpx.MockTransport` that records where each request was
really sent (the pinned IP literal), except where a real loopback socket is the point.
"""

from __future__ import annotations

import ipaddress
import pickle
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from engines.contract import InvalidRequestError, UnavailableError
from sources.net import (
    MAX_REDIRECTS,
    BadStatusError,
    GuardedClient,
    check_url,
    is_public_ip,
    is_url_allowed,
    shared_client,
)
from tests.fixtures.web_site import Page, WebSite

STUB_DNS = {
    "example.com": ["93.184.216.34"],
    "rebind.example.net": ["127.0.0.1"],
    "mixed.example.net": ["10.0.0.7", "93.184.216.34"],
    "meta.example.net": ["169.254.169.254"],
    "foo.localhost": ["127.0.0.1"],
    "v6.example.net": ["2606:2800:220:1::1"],
    "mapped.example.net": ["::ffff:10.1.2.3"],
}


@dataclass
class StubDNS:
    """The spec's stub resolver, counting lookups; an unknown name fails as DNS does."""

    answers: dict[str, list[str]] = field(default_factory=lambda: dict(STUB_DNS))
    lookups: list[str] = field(default_factory=list)

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.answers[host]


@dataclass
class Network:
    """A mock network: every request is recorded (URL as sent, Host header, TLS name) and answered by `answer`."""

    answer: Callable[[httpx.Request], httpx.Response] = lambda request: httpx.Response(200, content=b"ok")
    sent: list[httpx.Request] = field(default_factory=list)

    def transport(self) -> httpx.MockTransport:
        def handle(request: httpx.Request) -> httpx.Response:
            self.sent.append(request)
            return self.answer(request)

        return httpx.MockTransport(handle)

    @property
    def ips(self) -> list[str]:
        return [request.url.host for request in self.sent]


@pytest.fixture
def dns() -> StubDNS:
    return StubDNS()


@pytest.fixture
def network() -> Network:
    return Network()


@pytest.fixture
def client(dns: StubDNS, network: Network) -> Iterator[GuardedClient]:
    with GuardedClient(resolver=dns, transport=network.transport()) as guarded:
        yield guarded


# -- docs/spec/sources-and-documents.md §9.7, row by row -------------------------------------------------------------

# (row, url, connected to, name looked up) for the allowed rows 1-10; IP literals never reach the resolver.
ALLOWED = [
    (1, "https://example.com/", "93.184.216.34", "example.com"),
    (2, "HTTPS://EXAMPLE.COM/", "93.184.216.34", "example.com"),
    (3, "http://example.com:8080/x", "93.184.216.34", "example.com"),
    (4, "http://8.8.8.8/", "8.8.8.8", None),
    (5, "http://172.32.0.1/", "172.32.0.1", None),
    (6, "http://100.128.0.1/", "100.128.0.1", None),
    (7, "http://198.20.0.1/", "198.20.0.1", None),
    (8, "http://[2606:4700:4700::1111]/", "2606:4700:4700::1111", None),
    (9, "http://mixed.example.net/", "93.184.216.34", "mixed.example.net"),
    (10, "http://v6.example.net/", "2606:2800:220:1::1", "v6.example.net"),
]

# (row, url, what the refusal must say) for the rows 11-55 the static check refuses.
REFUSED_STATICALLY = [
    (11, "ftp://example.com/f", "scheme 'ftp' is not http or https"),
    (12, "file:///etc/passwd", "scheme 'file' is not http or https"),
    (13, "gopher://example.com/", "scheme 'gopher' is not http or https"),
    (14, "javascript:alert(1)", "scheme 'javascript' is not http or https"),
    (15, "http:///path", "names no host"),
    (16, "http://localhost/", "localhost is not reachable"),
    (17, "http://LOCALHOST./", "localhost is not reachable"),
    (18, "http://printer.local/", "printer.local is a local network name"),
    (19, "http://metadata.google.internal/", "metadata.google.internal is a local network name"),
    (20, "http://redis:6379/", "redis is a single-label name"),
    (21, "http://ｌｏｃａｌｈｏｓｔ/", "localhost is not reachable"),
    (22, "http://127.0.0.1/", "127.0.0.1 is not a public address"),
    (23, "http://127.1/", "127.0.0.1 is not a public address"),
    (24, "http://2130706433/", "127.0.0.1 is not a public address"),
    (25, "http://0x7f000001/", "127.0.0.1 is not a public address"),
    (26, "http://0177.0.0.1/", "127.0.0.1 is not a public address"),
    (27, "http://1.2.3.999/", "'1.2.3.999' is not a valid IPv4 address"),
    (28, "http://0.0.0.0/", "0.0.0.0 is not a public address"),
    (29, "http://0.1.2.3/", "0.1.2.3 is not a public address"),
    (30, "http://10.1.2.3/", "10.1.2.3 is not a public address"),
    (31, "http://172.16.0.1/", "172.16.0.1 is not a public address"),
    (32, "http://172.31.255.255/", "172.31.255.255 is not a public address"),
    (33, "http://192.168.1.1/", "192.168.1.1 is not a public address"),
    (34, "http://169.254.169.254/latest/meta-data/", "169.254.169.254 is not a public address"),
    (35, "http://100.64.0.1/", "100.64.0.1 is not a public address"),
    (36, "http://192.0.2.1/", "192.0.2.1 is not a public address"),
    (37, "http://192.0.200.1/", "192.0.200.1 is not a public address"),
    (38, "http://198.18.0.1/", "198.18.0.1 is not a public address"),
    (39, "http://198.51.100.7/", "198.51.100.7 is not a public address"),
    (40, "http://203.0.113.9/", "203.0.113.9 is not a public address"),
    (41, "http://224.0.0.1/", "224.0.0.1 is not a public address"),
    (42, "http://240.0.0.1/", "240.0.0.1 is not a public address"),
    (43, "http://255.255.255.255/", "255.255.255.255 is not a public address"),
    (44, "http://[::1]/", "::1 is not a public address"),
    (45, "http://[::]/", ":: is not a public address"),
    (46, "http://[::ffff:127.0.0.1]/", "::ffff:7f00:1 is not a public address"),
    (47, "http://[::ffff:7f00:1]/", "::ffff:7f00:1 is not a public address"),
    (48, "http://[::127.0.0.1]/", "::7f00:1 is not a public address"),
    (49, "http://[fd12:3456::1]/", "fd12:3456::1 is not a public address"),
    (50, "http://[fe80::1]/", "fe80::1 is not a public address"),
    (51, "http://[fe80::1%25eth0]/", "a zone id in the host"),
    (52, "http://[ff02::1]/", "ff02::1 is not a public address"),
    (53, "http://[2001:db8::1]/", "2001:db8::1 is not a public address"),
    (54, "http://user:pass@127.0.0.1/", "127.0.0.1 is not a public address"),
    (55, "http://example.com@127.0.0.1/", "127.0.0.1 is not a public address"),
]

# Rows 56-59: names that pass the static check and resolve to nothing public.
REFUSED_BY_DNS = [
    (56, "http://rebind.example.net/", "rebind.example.net"),
    (57, "http://meta.example.net/", "meta.example.net"),
    (58, "http://foo.localhost/", "foo.localhost"),
    (59, "http://mapped.example.net/", "mapped.example.net"),
]


def test_the_table_has_every_row() -> None:
    rows = [row for table in (ALLOWED, REFUSED_STATICALLY, REFUSED_BY_DNS) for row, *_ in table]
    assert sorted([*rows, 60, 61]) == list(range(1, 62))


@pytest.mark.parametrize(("row", "url", "ip", "lookup"), ALLOWED, ids=[f"row{r[0]}" for r in ALLOWED])
def test_allowed_rows_connect_only_to_the_vetted_address(
    row: int, url: str, ip: str, lookup: str | None, client: GuardedClient, network: Network, dns: StubDNS
) -> None:
    assert is_url_allowed(url)
    fetched = client.get(url)
    assert (fetched.status, fetched.body) == (200, b"ok")
    assert network.ips == [ip]
    assert dns.lookups == ([lookup] if lookup else [])


@pytest.mark.parametrize(("row", "url", "reason"), REFUSED_STATICALLY, ids=[f"row{r[0]}" for r in REFUSED_STATICALLY])
def test_statically_refused_rows_never_reach_dns_or_the_network(
    row: int, url: str, reason: str, client: GuardedClient, network: Network, dns: StubDNS
) -> None:
    assert not is_url_allowed(url)
    with pytest.raises(InvalidRequestError) as refused:
        check_url(url)
    assert re.match(r"url '[^']*' is (refused|malformed)", refused.value.message)
    assert reason in refused.value.message
    with pytest.raises(InvalidRequestError) as fetched:
        client.get(url)
    assert fetched.value == refused.value
    assert (dns.lookups, network.sent, client.requests) == ([], [], 0)


def test_userinfo_never_reaches_a_message() -> None:
    with pytest.raises(InvalidRequestError) as refused:
        check_url("http://user:hunter2@127.0.0.1/")
    assert "hunter2" not in str(refused.value) and "http://127.0.0.1/" in refused.value.message


@pytest.mark.parametrize(("row", "url", "host"), REFUSED_BY_DNS, ids=[f"row{r[0]}" for r in REFUSED_BY_DNS])
def test_names_resolving_to_no_public_address_are_unreachable(
    row: int, url: str, host: str, client: GuardedClient, network: Network, dns: StubDNS
) -> None:
    assert is_url_allowed(url)  # only resolution can tell
    with pytest.raises(UnavailableError) as refused:
        client.get(url)
    assert refused.value.message == f"host {host} resolved to no public addresses"
    assert (dns.lookups, network.sent) == ([host], [])


def _redirecting(location: str) -> Callable[[httpx.Request], httpx.Response]:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/r":
            return httpx.Response(302, headers={"Location": location})
        return httpx.Response(200, content=b"final")

    return answer


def test_row60_a_redirect_to_loopback_is_returned_and_fails_as_bad_status(dns: StubDNS, network: Network) -> None:
    network.answer = _redirecting("http://127.0.0.1/")
    with GuardedClient(resolver=dns, transport=network.transport()) as client, pytest.raises(BadStatusError) as bad:
        client.get("https://example.com/r")
    assert (bad.value.status, bad.value.url) == (302, "https://example.com/r")
    assert "redirect not followed" in bad.value.message and "127.0.0.1 is not a public address" in bad.value.message
    assert network.ips == ["93.184.216.34"]  # the hop to loopback was never sent


def test_row61_a_redirect_that_passes_is_followed_and_pinned_again(dns: StubDNS, network: Network) -> None:
    network.answer = _redirecting("https://example.com/final")
    with GuardedClient(resolver=dns, transport=network.transport()) as client:
        fetched = client.get("https://example.com/r")
    assert (fetched.url, fetched.status, fetched.body) == ("https://example.com/final", 200, b"final")
    assert [str(r.url) for r in network.sent] == ["https://93.184.216.34/r", "https://93.184.216.34/final"]
    assert dns.lookups == ["example.com", "example.com"]  # each hop resolved once, by the guard
    assert client.requests == 2


# -- pinning -------------------------------------------------------------------------------------------------


def test_the_name_travels_in_the_host_header_and_as_the_tls_server_name(
    client: GuardedClient, network: Network
) -> None:
    client.get("https://example.com/a%20b?q=1")
    client.get("http://example.com:8080/x")
    tls, plain = network.sent
    assert (str(tls.url), tls.headers["host"], tls.extensions["sni_hostname"]) == (
        "https://93.184.216.34/a%20b?q=1",
        "example.com",
        "example.com",
    )
    assert (plain.headers["host"], "sni_hostname" in plain.extensions) == ("example.com:8080", False)
    assert tls.headers["user-agent"] == "tm-reader"


def test_dns_rebinding_fails_because_each_request_resolves_exactly_once(network: Network) -> None:
    answers = iter([["93.184.216.34"], ["127.0.0.1"]])
    lookups: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        lookups.append(host)
        return next(answers)

    with GuardedClient(resolver=rebinding, transport=network.transport()) as client:
        client.get("http://rebinding.example.org/")
        assert lookups == ["rebinding.example.org"] and network.ips == ["93.184.216.34"]
        with pytest.raises(UnavailableError, match="resolved to no public addresses"):
            client.get("http://rebinding.example.org/")
    assert lookups == ["rebinding.example.org"] * 2 and network.ips == ["93.184.216.34"]


def test_a_refused_connection_moves_to_the_next_vetted_address_only(dns: StubDNS) -> None:
    dns.answers["two.example.org"] = ["93.184.216.1", "10.0.0.1", "93.184.216.2"]
    tried: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        tried.append(request.url.host)
        if request.url.host == "93.184.216.1":
            raise httpx.ConnectError("connection refused")
        return httpx.Response(200, content=b"second")

    with GuardedClient(resolver=dns, transport=httpx.MockTransport(handle)) as client:
        assert client.get("http://two.example.org/").body == b"second"
        assert client.requests == 1
    assert tried == ["93.184.216.1", "93.184.216.2"]


def test_dns_failure_and_no_connection_are_unavailable(dns: StubDNS) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    with GuardedClient(resolver=dns, transport=httpx.MockTransport(refuse)) as client:
        with pytest.raises(UnavailableError, match=re.escape("cannot resolve host nowhere.example.org")):
            client.get("http://nowhere.example.org/")
        with pytest.raises(UnavailableError, match=re.escape("cannot connect to host example.com")):
            client.get("http://example.com/")


# -- redirects -------------------------------------------------------------------------------------------------


def _chain(hops: int) -> Callable[[httpx.Request], httpx.Response]:
    """/0 redirects to /1 on the next host, and so on up to /`hops`, which answers."""

    def answer(request: httpx.Request) -> httpx.Response:
        n = int(request.url.path.strip("/"))
        if n < hops:
            return httpx.Response(301, headers={"Location": f"http://h{n + 1}.example.org/{n + 1}"})
        return httpx.Response(200, content=f"after {n}".encode())

    return answer


def _chain_dns(hops: int) -> StubDNS:
    return StubDNS({f"h{n}.example.org": [f"93.184.216.{n + 1}"] for n in range(hops + 2)})


def test_ten_redirects_are_followed_each_hop_resolved_and_pinned(network: Network) -> None:
    network.answer = _chain(MAX_REDIRECTS)
    dns = _chain_dns(MAX_REDIRECTS)
    with GuardedClient(resolver=dns, transport=network.transport()) as client:
        fetched = client.get("http://h0.example.org/0")
    assert (fetched.body, fetched.url) == (b"after 10", "http://h10.example.org/10")
    assert dns.lookups == [f"h{n}.example.org" for n in range(11)]
    assert network.ips == [f"93.184.216.{n + 1}" for n in range(11)]


def test_the_eleventh_redirect_is_refused(network: Network) -> None:
    network.answer = _chain(MAX_REDIRECTS + 1)
    with (
        GuardedClient(resolver=_chain_dns(MAX_REDIRECTS + 1), transport=network.transport()) as client,
        pytest.raises(BadStatusError, match="redirected more than 10 times") as bad,
    ):
        client.get("http://h0.example.org/0")
    assert bad.value.status == 301 and len(network.sent) == 11


def test_every_hop_is_judged_again(dns: StubDNS, network: Network) -> None:
    network.answer = _redirecting("http://meta.example.net/latest/meta-data/")
    with pytest.raises(UnavailableError, match=re.escape("meta.example.net resolved to no public addresses")):
        GuardedClient(resolver=dns, transport=network.transport()).get("http://example.com/r")
    network.answer = _redirecting("/relative")
    with GuardedClient(resolver=dns, transport=network.transport()) as client:
        assert client.get("http://example.com/r").url == "http://example.com/relative"


def test_credentials_stay_with_their_origin(dns: StubDNS, network: Network) -> None:
    dns.answers["other.example.org"] = ["93.184.216.99"]
    network.answer = _redirecting("http://other.example.org/x")
    with GuardedClient(resolver=dns, transport=network.transport()) as client:
        client.get("http://example.com/r", headers={"Authorization": "Bearer secret", "If-None-Match": '"v1"'})
    first, second = network.sent
    assert first.headers["authorization"] == "Bearer secret"
    assert "authorization" not in second.headers and second.headers["if-none-match"] == '"v1"'


def test_statuses(dns: StubDNS, network: Network) -> None:
    network.answer = lambda request: httpx.Response(int(request.url.path.strip("/")), content=b"x")
    with GuardedClient(resolver=dns, transport=network.transport()) as client:
        assert client.get("http://example.com/304").body == b""
        assert client.get("http://example.com/204").status == 204
        for status in (300, 404, 410, 503):
            with pytest.raises(BadStatusError, match=f"answered {status}") as bad:
                client.get(f"http://example.com/{status}")
            assert bad.value.status == status
        with pytest.raises(BadStatusError, match="answered 302 without a location"):
            client.get("http://example.com/302")


def test_bad_status_keeps_its_status_across_processes() -> None:
    err = BadStatusError("GET 'http://example.com/' answered 503", 503, "http://example.com/")
    back = pickle.loads(pickle.dumps(err))
    assert (back, back.status, back.url) == (err, 503, "http://example.com/")


# -- bodies and timeouts ---------------------------------------------------------------------------------------


class Body(httpx.SyncByteStream):
    """A response body of `chunks` chunks of `size` bytes, recording how many were pulled."""

    def __init__(self, chunks: int, size: int = 1024, pause_s: float = 0.0) -> None:
        self.chunks, self.size, self.pause_s = chunks, size, pause_s
        self.pulled = 0

    def __iter__(self) -> Iterator[bytes]:
        for _ in range(self.chunks):
            self.pulled += 1
            time.sleep(self.pause_s)
            yield b"x" * self.size


def _serving(body: Body, headers: dict[str, str] | None = None) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(200, headers=headers, stream=body)


def test_a_declared_length_over_the_cap_is_refused_before_reading(dns: StubDNS, network: Network) -> None:
    body = Body(100)
    network.answer = _serving(body, {"Content-Length": "102400"})
    with (
        GuardedClient(resolver=dns, transport=network.transport()) as client,
        pytest.raises(InvalidRequestError, match=r"exceeds 1000-byte limit \(Content-Length=102400\)"),
    ):
        client.get("http://example.com/", max_bytes=1000)
    assert body.pulled == 0


def test_a_streamed_body_over_the_cap_is_refused_while_streaming(dns: StubDNS, network: Network) -> None:
    body = Body(10_000)  # 10 MB on offer, no length declared
    network.answer = _serving(body)
    with (
        GuardedClient(resolver=dns, transport=network.transport()) as client,
        pytest.raises(InvalidRequestError, match=r"exceeds 4096-byte limit \(read 5120 bytes\)"),
    ):
        client.get("http://example.com/", max_bytes=4096)
    assert body.pulled == 5


def test_a_body_at_the_cap_is_read_whole(dns: StubDNS, network: Network) -> None:
    network.answer = _serving(Body(4))
    with GuardedClient(resolver=dns, transport=network.transport()) as client:
        assert len(client.get("http://example.com/", max_bytes=4096).body) == 4096


def test_a_trickling_body_is_cut_off_at_the_timeout(dns: StubDNS, network: Network) -> None:
    body = Body(1000, size=1, pause_s=0.02)  # each chunk well within any read timeout, the whole far beyond
    network.answer = _serving(body)
    started = time.monotonic()
    with (
        GuardedClient(resolver=dns, transport=network.transport(), timeout_s=0.2) as client,
        pytest.raises(UnavailableError, match="did not arrive in time"),
    ):
        client.get("http://example.com/")
    assert time.monotonic() - started < 1.0 and body.pulled < 50


def test_transport_timeouts_and_broken_streams_are_unavailable(dns: StubDNS) -> None:
    def stall(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    class Broken(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield b"half"
            raise httpx.RemoteProtocolError("peer closed connection")

    with (
        GuardedClient(resolver=dns, transport=httpx.MockTransport(stall), timeout_s=3) as client,
        pytest.raises(UnavailableError, match="timed out after 3 s"),
    ):
        client.get("http://example.com/")
    broken = httpx.MockTransport(lambda request: httpx.Response(200, stream=Broken()))
    with (
        GuardedClient(resolver=dns, transport=broken) as client,
        pytest.raises(UnavailableError, match="failed to read response body"),
    ):
        client.get("http://example.com/")


def test_a_server_that_never_answers_times_out_for_real() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])  # and never answer
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        with GuardedClient(allow_private_networks=True, timeout_s=0.3) as client:
            started = time.monotonic()
            with pytest.raises(UnavailableError, match=re.escape("timed out after 0.3 s")):
                client.get(url)
            assert time.monotonic() - started < 2
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


# -- private networks ------------------------------------------------------------------------------------------


def test_private_networks_are_off_by_default_and_loopback_needs_the_setting() -> None:
    assert GuardedClient().allow_private_networks is False
    assert shared_client().allow_private_networks is False
    with WebSite({"/": Page("hello", content_type="text/plain")}) as site:
        with GuardedClient() as strict, pytest.raises(InvalidRequestError, match="not a public address"):
            strict.get(site.url("/"))
        assert site.requests["/"] == 0
        with GuardedClient(allow_private_networks=True) as relaxed:
            assert relaxed.get(site.url("/")).body == b"hello"
            assert relaxed.get(f"http://localhost:{site.port}/").body == b"hello"  # names relaxed too
        assert site.requests["/"] == 2


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://[::169.254.169.254]/",
        "http://[fe80::1]/",
        "http://0xa9fea9fe/",
    ],
)
def test_link_local_stays_refused_with_private_networks_allowed(url: str, dns: StubDNS, network: Network) -> None:
    with (
        GuardedClient(allow_private_networks=True, resolver=dns, transport=network.transport()) as client,
        pytest.raises(InvalidRequestError, match="is a link-local address"),
    ):
        client.get(url)
    assert network.sent == []


def test_link_local_answers_and_hops_stay_refused_with_private_networks_allowed(dns: StubDNS, network: Network) -> None:
    with GuardedClient(allow_private_networks=True, resolver=dns, transport=network.transport()) as client:
        with pytest.raises(UnavailableError, match=re.escape("meta.example.net resolved to no public addresses")):
            client.get("http://meta.example.net/")
        assert client.get("http://rebind.example.net/").status == 200  # loopback is what the setting allows
        network.answer = _redirecting("http://169.254.169.254/latest/meta-data/")
        with pytest.raises(BadStatusError, match=re.escape("169.254.169.254 is a link-local address")):
            client.get("http://example.com/r")
    assert network.ips == ["127.0.0.1", "93.184.216.34"]


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("172.15.255.255", True),
        ("223.255.255.255", True),
        ("192.1.0.1", True),
        ("2606:4700::1", True),
        ("::ffff:8.8.8.8", True),
        ("::8.8.8.8", True),
        ("100.127.255.255", False),
        ("198.19.255.255", False),
        ("fc00::1", False),
        ("ff00::1", False),
        ("::ffff:192.168.0.1", False),
        ("::10.0.0.1", False),
    ],
)
def test_is_public_ip_at_the_edges_of_the_ranges(address: str, public: bool) -> None:
    assert is_public_ip(ipaddress.ip_address(address)) is public


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://Bücher.Example/", "xn--bcher-kva.example"),
        ("http://example.com./", "example.com"),
        ("https://8.8.8.8:443/", "8.8.8.8"),
        ("http://0x08.0x08.0x08.0x08/", "8.8.8.8"),
        ("http://134744072/", "8.8.8.8"),
    ],
)
def test_check_url_gives_the_host_to_resolve(url: str, host: str) -> None:
    assert check_url(url) == host


@pytest.mark.parametrize(
    "url",
    ["", "http://exa mple.com/", "http://-bad-.com/", "http://example.com:99999/", "http://[::1/", "http://1.2.3.4.5/"],
)
def test_malformed_urls_are_refused(url: str) -> None:
    assert not is_url_allowed(url)


def test_paths_and_queries_reach_the_server_encoded(client: GuardedClient, network: Network) -> None:
    client.get("http://example.com/café/a b?q=é&r=%20#fragment")
    assert network.sent[0].url.raw_path == b"/caf%C3%A9/a%20b?q=%C3%A9&r=%20"
    with pytest.raises(InvalidRequestError, match="is malformed"):
        client.get("http://example.com/a\x7fb")
    assert len(network.sent) == 1
