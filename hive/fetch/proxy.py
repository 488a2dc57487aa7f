"""The HTTP proxy a crawl may go through: which requests use it, and the tunnel to it.

Policy (``fetch.proxy``, ``fetch.no_proxy``, ``fetch.proxy_allow_nets``):

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
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from hive.errors import ConfigError


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
