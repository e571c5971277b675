"""The static half of the SSRF guard (docs/spec/sources-and-documents.md §9.2, §9.3): whether a URL may be fetched at
all, before any DNS.

The scheme is http or https, the host is present, has no zone id, maps through IDNA (UTS 46), and is neither a
refused name (`localhost`, `*.local`, `*.internal`, a single label) nor an IP literal outside the public
ranges (`is_public_ip`), numeric forms such as `127.1`, `2130706433`, `0x7f000001` and `0177.0.0.1`
included. `vet` gives the `Target` the client (`sources.net`) then resolves and pins. Relaxed (private
networks allowed), the name rules and the non-public ranges are lifted except link-local (`is_link_local`).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

import httpx
import idna

from engines.contract import InvalidRequestError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_SCHEMES: Final = {"http": 80, "https": 443}

# docs/spec/sources-and-documents.md §9.3, one table per family.
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


def is_public_ip(ip: IPAddress) -> bool:
    """True unless `ip` is in one of the non-public ranges of docs/spec/sources-and-documents.md §9.3; an IPv4-mapped or
    IPv4-compatible IPv6 address is judged by the IPv4 address it embeds."""
    if isinstance(ip, ipaddress.IPv4Address):
        return not any(ip in net for net in _V4_REFUSED)
    if any(ip in net for net in _V6_REFUSED):
        return False
    embedded = _embedded_v4(ip)
    return embedded is None or is_public_ip(embedded)


def is_url_allowed(url: str) -> bool:
    """Whether `url` passes the static checks of docs/spec/sources-and-documents.md §9.2 (no DNS): what `check_url`
    accepts."""
    try:
        check_url(url)
    except InvalidRequestError:
        return False
    return True


def check_url(url: str, *, allow_private_networks: bool = False) -> str:
    """The host to resolve for `url` (its IDNA form, or the canonical IP literal), after the static checks
    of docs/spec/sources-and-documents.md §9.2; `InvalidRequestError` naming the URL and the reason when it is refused.

    `allow_private_networks` relaxes the name rules and the non-public ranges except link-local, as the
    client does with that option (a source's configuration uses it, before it knows the options).
    """
    return vet(url, allow_private_networks).host


@dataclass(frozen=True)
class Target:
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
            raise InvalidRequestError(f"url {printable(self.url)} is malformed ({err})") from None


def vet(url: str, relaxed: bool) -> Target:
    shown = printable(url)
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
    return Target(url.strip(), scheme, name, literal, port, parts.path, parts.query)


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
        if is_link_local(ip):
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


def is_link_local(ip: IPAddress) -> bool:
    if isinstance(ip, ipaddress.IPv4Address):
        return ip in _V4_LINK_LOCAL
    embedded = _embedded_v4(ip)
    return ip in _V6_LINK_LOCAL or (embedded is not None and embedded in _V4_LINK_LOCAL)


def printable(url: str) -> str:
    """`url` fit for a message: without userinfo (it may hold a password), and bounded in length."""
    text = url.strip()
    scheme, sep, rest = text.partition("://")
    if sep:
        authority, slash, tail = rest.partition("/")
        text = f"{scheme}{sep}{authority.rpartition('@')[2]}{slash}{tail}"
    return repr(text if len(text) <= 200 else text[:200] + "…")
