"""The network values a configuration names, parsed where they enter: ``--resolve``
entries (``dns.resolve``: ``HOST=IP[,IP]``, ``*.`` for every name under a domain;
``--resolve @FILE`` reads them from a file, one a line: many names to many
addresses),
networks (``dns.allow_nets``, ``fetch.proxy_allow_nets``) and the proxy
(``fetch.proxy``, ``fetch.no_proxy``). ``hive.config`` validates with these parsers
and the fetcher (``fetch.dns``, ``fetch.client``) reads with them, so a value the
config accepts is one a worker can use; a bad value is a ConfigError naming its key.

The proxy's policy (``fetch.proxy``, ``fetch.no_proxy``, ``fetch.proxy_allow_nets``):

* **Only when configured.** ``HTTP_PROXY`` and the like are never read: a crawl
  goes where its config says.
* **Every request is tunnelled with CONNECT**, http and https alike, to the
  address the worker resolved and the address guard judged (``CONNECT
  93.184.215.14:443``), never to a name the proxy would resolve itself. So the
  guard keeps judging the target, and the exchange in the tunnel, and in the
  WARC, is the one the origin served, untouched by the proxy. The proxy must
  allow CONNECT to the ports crawled (squid allows only 443 by default).
* **The proxy's own address** is judged apart: a global address passes; a
  non-global one (the usual LAN or loopback proxy) only if
  ``fetch.proxy_allow_nets`` (or ``dns.allow_private``) allows it. Allowing the
  proxy never allows a target on its network.
* **no_proxy**: a host name listed there, or any name under it, is fetched
  directly; ``*`` sends everything direct.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from pathlib import Path
from urllib.parse import unquote, urlsplit

from hive.errors import ConfigError

IPAddress = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network


def ip_literal(host: str) -> IPAddress | None:
    """The address ``host`` spells (bracketed IPv6 included), or None for a name."""
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if ":" not in text and not text.replace(".", "").isdigit():
        return None  # a name: ipaddress takes only dotted decimal IPv4, and IPv6 has a colon
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def normalize_host(host: str) -> str:
    return host.strip().lower().removesuffix(".")


_OVERRIDE_NAME = re.compile(r"(\*\.)?[a-z0-9_-]+(\.[a-z0-9_-]+)*")


def parse_override(entry: str) -> tuple[str, tuple[str, ...]]:
    """One ``dns.resolve`` entry: the name (``*.domain`` for a wildcard) and its addresses."""
    name, sep, value = entry.partition("=")
    name = normalize_host(name)
    if not sep or not name or not value.strip():
        raise ConfigError(f"dns.resolve: expected HOST=IP, got {entry!r}")
    if not _OVERRIDE_NAME.fullmatch(name) or ip_literal(name) is not None:
        raise ConfigError(f"dns.resolve: bad host name in {entry!r} (use its ASCII form)")
    addresses = []
    for text in value.split(","):
        ip = ip_literal(text.strip())
        if ip is None:
            raise ConfigError(f"dns.resolve: bad address {text.strip()!r} in {entry!r}")
        addresses.append(str(ip))
    return name, tuple(addresses)


def resolve_entries(entries: Iterable[str]) -> list[str]:
    """``--resolve`` entries with each ``@FILE`` replaced by the file's entries (one
    ``HOST=IP[,IP]`` a line; blank lines and ``#`` comments skipped), each checked: a
    bad one is a ConfigError naming its file and line."""
    out: list[str] = []
    for entry in entries:
        if not entry.startswith("@"):
            out.append(entry)
            continue
        path = Path(entry[1:])
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"dns.resolve: cannot read {path}: {exc}") from exc
        for number, line in enumerate(lines, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            try:
                parse_override(text)
            except ConfigError as exc:
                raise ConfigError(f"{path}:{number}: {exc}") from exc
            out.append(text)
    return out


def networks(key: str, specs: list[str]) -> list[Network]:
    """The networks a list names (``10.0.0.0/8``, an address for itself)."""
    nets: list[Network] = []
    for spec in specs:
        try:
            nets.append(ipaddress.ip_network(spec.strip(), strict=False))
        except ValueError as exc:
            raise ConfigError(f"{key}: bad network {spec!r}: {exc}") from exc
    return nets



@dataclass(frozen=True, slots=True)
class Proxy:
    """A configured proxy: where it is, its credentials, and the hosts that bypass it."""

    host: str  # a name or an IP literal, as configured (lowercase)
    port: int
    authorization: str  # a Proxy-Authorization value, "" without credentials
    no_proxy: tuple[str, ...]

    @classmethod
    def parse(cls, proxy: str, no_proxy: list[str]) -> Proxy | None:
        """The proxy fetch.proxy names (None for ""); a bad value is a ConfigError naming
        the key. Takes the two keys' values: hive.config validates with it."""
        if not proxy:
            return None
        try:
            parts = urlsplit(proxy)
            port = parts.port or 8080
        except ValueError as exc:
            raise ConfigError(f"fetch.proxy: not a URL: {proxy!r} ({exc})") from exc
        if parts.scheme != "http" or not parts.hostname or parts.path not in ("", "/"):
            raise ConfigError(f"fetch.proxy: expected http://HOST:PORT, got {proxy!r}")
        authorization = ""
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            authorization = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        bypass = tuple(h.strip().lower().strip(".") for h in no_proxy if h.strip())
        return cls(parts.hostname.lower(), port, authorization, bypass)

    def bypassed(self, host: str) -> bool:
        """Whether a request to ``host`` (a name or IP literal) goes direct."""
        host = host.lower().strip(".")
        for entry in self.no_proxy:
            if entry == "*" or host == entry or host.endswith("." + entry):
                return True
        return False

    def connect_head(self, address: str, port: int) -> bytes:
        """The CONNECT request for a tunnel to address:port."""
        authority = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
        auth = f"Proxy-Authorization: {self.authorization}\r\n" if self.authorization else ""
        return f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{auth}\r\n".encode("ascii")
