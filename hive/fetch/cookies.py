"""Cookies, when ``fetch.cookies`` is on: one jar per host, kept by the worker that owns it.

The standard library's :class:`http.cookiejar.CookieJar` does the parsing and
the matching (domain, path, secure, expiry). Each host has a jar of its own, so
a cookie set by one host is never sent to another, even one of its domain: a
host's worker is the only one that sees it (one owner per host), and two hosts
of one domain may live in different workers, which could not share a jar.

Bounds: at most ``MAX_HOSTS`` jars (the least recently used host's dropped),
``MAX_COOKIES`` cookies in a jar (a jar that grows past it is emptied: a host
setting that many is not one whose session we need), and a Cookie header of at
most ``MAX_HEADER`` bytes (none sent when longer). Jars live in memory: a
restarted worker starts without cookies.
"""

from __future__ import annotations

import threading
import urllib.request
from collections import OrderedDict
from collections.abc import Sequence
from http.cookiejar import CookieJar

MAX_HOSTS = 10_000
MAX_COOKIES = 50
MAX_HEADER = 8192


class _Message:
    """What CookieJar.extract_cookies reads of a response: its header fields by name."""

    def __init__(self, headers: Sequence[tuple[str, str]]) -> None:
        self._headers = headers

    def get_all(self, name: str, default: list[str]) -> list[str]:
        name = name.lower()
        found = [value for field, value in self._headers if field.lower() == name]
        return found or default


class _Response:
    def __init__(self, headers: Sequence[tuple[str, str]]) -> None:
        self._message = _Message(headers)

    def info(self) -> _Message:
        return self._message


class CookieJars:
    """Per-host cookie jars, bounded; safe to share between fetch threads."""

    def __init__(self) -> None:
        self._jars: OrderedDict[str, CookieJar] = OrderedDict()
        self._lock = threading.Lock()

    def _jar(self, host: str, create: bool) -> CookieJar | None:
        with self._lock:
            jar = self._jars.get(host)
            if jar is None and create:
                jar = self._jars[host] = CookieJar()
                while len(self._jars) > MAX_HOSTS:
                    self._jars.popitem(last=False)
            if jar is not None:
                self._jars.move_to_end(host)
            return jar

    def header(self, host: str, url: str) -> str | None:
        """The Cookie header value for a request of url to host, or None."""
        jar = self._jar(host, create=False)
        if jar is None:
            return None
        request = urllib.request.Request(url)
        jar.add_cookie_header(request)
        value = request.get_header("Cookie")
        return value if value and len(value) <= MAX_HEADER else None

    def keep(self, host: str, url: str, headers: Sequence[tuple[str, str]]) -> None:
        """Keep the cookies a response from host to a request of url set."""
        if not any(name.lower() in ("set-cookie", "set-cookie2") for name, _ in headers):
            return
        jar = self._jar(host, create=True)
        assert jar is not None
        try:
            jar.extract_cookies(_Response(headers), urllib.request.Request(url))  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - a cookie the library cannot read is not kept
            return
        if len(jar) > MAX_COOKIES:
            jar.clear()
