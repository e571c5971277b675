"""A pretend network for the SSRF guard on real sockets: one "public" web site, a private victim that counts
every connection it accepts, and DNS and `socket.create_connection` patched to route between them.

`PUBLIC_IP` is a public address no test can reach; a connection to it is routed to the public site (a
`WebSite` on loopback). A connection to the victim's loopback port reaches the victim, which counts it. Any
other connection (another loopback port such as Redis's, a private or link-local address) is counted and
refused, so nothing leaves the machine. Names resolve through `answers`; an unknown name resolves to
loopback, the worst a hostile DNS could say. A name listed in `rebinding` answers `PUBLIC_IP` once, then
loopback.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

from tests.fixtures.web_site import WebSite
from tests.reliability.looping import Looping

PUBLIC_IP = "93.184.216.34"
PUBLIC_NAME = "public.example"


class Victim(Looping):
    """A loopback listener that accepts and counts connections, then drops them."""

    def __init__(self) -> None:
        super().__init__("victim")
        self.accepted = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.05)

    @property
    def port(self) -> int:
        return int(self._server.getsockname()[1])

    def step(self) -> None:
        try:
            connection, _ = self._server.accept()
        except TimeoutError:
            return
        self.accepted += 1
        connection.close()

    def finish(self) -> None:
        self._server.close()


class Routes:
    """The patched `getaddrinfo` and `create_connection`, and what they saw."""

    def __init__(self, site: WebSite, victim: Victim, real_connect: Callable[..., socket.socket]) -> None:
        self.site = site
        self.victim = victim
        self.answers: dict[str, str] = {PUBLIC_NAME: PUBLIC_IP}
        self.rebinding: set[str] = set()
        self.lookups: list[str] = []
        self.public = 0
        self.elsewhere: list[tuple[str, int]] = []
        self._real_connect = real_connect

    def rebind(self, name: str) -> None:
        """Make `name` answer `PUBLIC_IP` at its next lookup, then loopback."""
        self.answers[name] = PUBLIC_IP
        self.rebinding.add(name)

    def getaddrinfo(self, host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        self.lookups.append(host)
        address = self.answers.get(host, "127.0.0.1")
        if host in self.rebinding:
            self.answers[host] = "127.0.0.1"
        family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]

    def create_connection(self, address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        host, port = address[0], int(address[1])
        if host == PUBLIC_IP:
            self.public += 1
            return self._real_connect(("127.0.0.1", self.site.port), *args, **kwargs)
        if host == "127.0.0.1" and port == self.victim.port:
            return self._real_connect(address, *args, **kwargs)
        self.elsewhere.append((host, port))
        raise ConnectionRefusedError(f"the test network refuses {host}:{port}")

    @property
    def fetched(self) -> int:
        """Connections that reached anything but the public site."""
        return self.victim.accepted + len(self.elsewhere)
