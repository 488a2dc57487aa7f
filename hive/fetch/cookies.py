"""Cookies, when ``fetch.cookies`` is on: one jar per host, bounded in bytes, kept by the
worker that owns the host.

The standard library's :class:`http.cookiejar.CookieJar` does the parsing and
the matching (domain, path, secure, expiry). Each host has a jar of its own, so
a cookie set by one host is never sent to another, even one of its domain: a
host's worker is the only one that sees it (one owner per host), and two hosts
of one domain may live in different workers, which could not share a jar.

**What is held is what can be sent.** The bounds (:class:`CookieLimits`, from
``fetch.*cookie*``; RFC 6265 section 6.1 is the guide):

- *a cookie*: a ``Set-Cookie`` value (name, value and attributes) longer than
  ``max_cookie_bytes`` is refused before it is parsed (``cookies/refused/too_large``);
- *a host*: its held cookies, sent together, make a Cookie header of at most
  ``max_cookie_header_bytes``, so every request can carry every cookie that
  matches it. When a cookie set does not fit, the largest held cookies are
  dropped first, the least recently used of equal size first
  (``cookies/dropped/header_bytes``): a big cookie never pushes out the small
  ones (a session's), and never stops them from being sent. At most
  ``max_cookies_per_host`` cookies, the least recently used dropped
  (``cookies/dropped/host_count``);
- *a worker*: the bytes all jars account for (their strings plus what Python
  spends on a cookie and on a jar, measured: ``COOKIE_COST``, ``HOST_COST``)
  stay within ``cookie_jar_mb``; the least recently used host's jar is dropped
  whole (``cookies/dropped/jar_bytes``, per cookie).

A cookie is *used* when it is set or sent; a host, when one of its cookies is.
A ``Set-Cookie`` that makes no cookie is counted: ``cookies/deleted`` when it
carries an expiry (a deletion), else ``cookies/refused/unreadable``; one the
cookie policy refuses (another domain, an RFC 2965 version) is
``cookies/refused/policy``; one whose name or value holds a control character
(a tab included), ``cookies/refused/control_character``: the fetcher sends no
Cookie header holding one, so it would silence the host's other cookies. Jars
live in memory: a restarted worker starts without cookies.
"""

from __future__ import annotations

import re
import threading
import urllib.request
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from http.cookiejar import Cookie, CookieJar, DefaultCookiePolicy
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hive.config import FetchConfig

# What Python spends on a held cookie beyond its strings (the Cookie object and its
# attribute dict, its entries in the jar's dicts and in this module's LRU: ~800 bytes on
# 3.11), and on a host's jar with its dicts (~2.2 KiB); tests/io/test_cookies.py holds them
# to what tracemalloc sees.
COOKIE_COST = 1024
HOST_COST = 2560
REFUSED = "cookies/refused/"
DROPPED = "cookies/dropped/"

# RFC 6265's cookie-octets exclude them; the fetcher sends no Cookie header holding one.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
Key = tuple[str, str, str]  # (domain, path, name): what makes two cookies one


@dataclass(frozen=True, slots=True)
class CookieLimits:
    """The bounds of the module docstring, in bytes and counts."""

    cookie_bytes: int
    header_bytes: int
    per_host: int
    jar_bytes: int

    @classmethod
    def from_config(cls, cfg: FetchConfig) -> CookieLimits:
        return cls(cfg.max_cookie_bytes, cfg.max_cookie_header_bytes, cfg.max_cookies_per_host,
                   int(cfg.cookie_jar_mb * (1 << 20)))


def sent_bytes(cookie: Cookie) -> int:
    """What the cookie adds to a Cookie header (``name=value``), separator not included."""
    return len(cookie.name) + (0 if cookie.value is None else 1 + len(cookie.value))


def held_bytes(cookie: Cookie) -> int:
    """What holding the cookie costs: its strings and COOKIE_COST."""
    strings = (cookie.name, cookie.value, cookie.domain, cookie.path, cookie.port,
               cookie.comment, cookie.comment_url)
    nonstandard: dict[str, str | None] = getattr(cookie, "_rest", {})  # HttpOnly, SameSite…
    rest = sum(len(k) + len(v or "") for k, v in nonstandard.items())
    return COOKIE_COST + rest + sum(len(s) for s in strings if s)


class _Message:
    """What CookieJar.make_cookies reads of a response: its header fields by name."""

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


class _HostJar:
    """One host's cookies: the library's jar and the same cookies by when they were used."""

    __slots__ = ("jar", "used", "held", "header", "shrunk")

    def __init__(self, policy: DefaultCookiePolicy) -> None:
        self.jar = CookieJar(policy)
        self.used: OrderedDict[Key, Cookie] = OrderedDict()  # least recently used first
        self.held = HOST_COST  # bytes accounted
        self.header = 0  # length of the Cookie header carrying every held cookie
        self.shrunk = False  # cookies went: the dicts keep the room they grew to

    def tally(self) -> None:
        """Follow the jar (it deletes expired cookies itself) and count the bytes again."""
        present = {(c.domain, c.path, c.name): c for c in self.jar}
        for key in [k for k, c in self.used.items() if present.get(k) is not c]:
            del self.used[key]
            self.shrunk = True
        cookies = self.used.values()
        self.held = HOST_COST + sum(held_bytes(c) for c in cookies)
        self.header = sum(sent_bytes(c) for c in cookies) + 2 * max(len(cookies) - 1, 0)

    def drop(self, key: Key) -> None:
        del self.used[key]
        self.jar.clear(*key)
        self.shrunk = True

    def compact(self, policy: DefaultCookiePolicy) -> None:
        """Hold the cookies in dicts of their size: a dict never gives back the room it
        grew to, which a host setting 49 cookies and keeping 2 would hold unaccounted."""
        jar = CookieJar(policy)
        for cookie in self.used.values():
            jar.set_cookie(cookie)
        self.jar, self.used, self.shrunk = jar, OrderedDict(self.used), False


class CookieJars:
    """Per-host cookie jars, bounded in bytes (the module docstring); shared by fetch threads."""

    def __init__(self, limits: CookieLimits) -> None:
        self.limits = limits
        self._policy = DefaultCookiePolicy()
        self._hosts: OrderedDict[str, _HostJar] = OrderedDict()  # least recently used first
        self._held = 0
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    @property
    def held_bytes(self) -> int:
        """The bytes all jars account for: never above ``limits.jar_bytes``."""
        return self._held

    def header(self, host: str, url: str) -> str | None:
        """The Cookie header value for a request of url to host, or None."""
        with self._lock:
            entry = self._hosts.get(host)
            if entry is None:
                return None
            request = urllib.request.Request(url)
            entry.jar.add_cookie_header(request)
            value = request.get_header("Cookie")
            if len(entry.jar) != len(entry.used):  # expired cookies were cleared
                self._retally(entry)
            if not value:
                return None
            self._hosts.move_to_end(host)
            names = {pair.partition("=")[0] for pair in value.split("; ")}
            for key in [k for k in entry.used if k[2] in names]:
                entry.used.move_to_end(key)
            self.counts["cookies/sent"] += 1
            return value

    def keep(self, host: str, url: str, headers: Sequence[tuple[str, str]]) -> None:
        """Keep the cookies a response from host to a request of url set, within the bounds."""
        lines = [value for name, value in headers if name.lower() == "set-cookie"]
        if not lines:
            return
        request = urllib.request.Request(url)
        with self._lock:
            entry = self._hosts.get(host)
            if entry is None:
                entry = self._hosts[host] = _HostJar(self._policy)
                self._held += entry.held
            self._hosts.move_to_end(host)
            for line in lines:
                self._set(entry, line, request)
            self._retally(entry)
            self._fit_host(entry)
            self._fit_worker(host, entry)
            if not entry.used:
                self._forget(host)
            elif entry.shrunk:
                entry.compact(self._policy)

    def _set(self, entry: _HostJar, line: str, request: urllib.request.Request) -> None:
        if len(line) > self.limits.cookie_bytes:
            self.counts[REFUSED + "too_large"] += 1
            return
        made = entry.jar.make_cookies(_Response([("Set-Cookie", line)]), request)  # type: ignore[arg-type]
        if not made:
            lowered = line.lower()
            deletion = "expires=" in lowered or "max-age=" in lowered
            self.counts["cookies/deleted" if deletion else REFUSED + "unreadable"] += 1
        for cookie in made:
            if _CONTROL.search(cookie.name) or _CONTROL.search(cookie.value or ""):
                self.counts[REFUSED + "control_character"] += 1
                continue
            if not self._policy.set_ok(cookie, request):
                self.counts[REFUSED + "policy"] += 1
                continue
            entry.jar.set_cookie(cookie)
            key = (cookie.domain, cookie.path, cookie.name)
            entry.used[key] = cookie
            entry.used.move_to_end(key)
            self.counts["cookies/kept"] += 1

    def _retally(self, entry: _HostJar) -> None:
        self._held -= entry.held
        entry.tally()
        self._held += entry.held

    def _fit_host(self, entry: _HostJar) -> None:
        """Drop cookies until the host's fit its count and its Cookie header."""
        while len(entry.used) > self.limits.per_host:
            entry.drop(next(iter(entry.used)))
            self.counts[DROPPED + "host_count"] += 1
        self._retally(entry)
        if entry.header > self.limits.header_bytes:
            # Largest first; of equal sizes, the least recently used (the sort is stable).
            ranked = sorted(entry.used.items(), key=lambda item: -sent_bytes(item[1]))
            header = entry.header
            for key, cookie in ranked:
                if header <= self.limits.header_bytes:
                    break
                header -= sent_bytes(cookie) + 2
                entry.drop(key)
                self.counts[DROPPED + "header_bytes"] += 1
            self._retally(entry)

    def _fit_worker(self, host: str, entry: _HostJar) -> None:
        """Drop the least recently used hosts' jars, then this host's least recently used
        cookies, until every jar together fits the worker's bound."""
        while self._held > self.limits.jar_bytes and len(self._hosts) > 1:
            oldest = next(iter(self._hosts))
            self.counts[DROPPED + "jar_bytes"] += len(self._hosts[oldest].used)
            self._forget(oldest)
        while self._held > self.limits.jar_bytes and entry.used:
            entry.drop(next(iter(entry.used)))
            self.counts[DROPPED + "jar_bytes"] += 1
            self._retally(entry)
        if self._held > self.limits.jar_bytes:  # not even an empty jar fits
            self._forget(host)

    def _forget(self, host: str) -> None:
        entry = self._hosts.pop(host, None)
        if entry is not None:
            self._held -= entry.held

    def stats(self) -> dict[str, int]:
        """Counters (``cookies/refused/<reason>``, ``cookies/dropped/<bound>``,
        ``cookies/kept``, ``cookies/sent``, ``cookies/deleted``) and the gauges
        ``cookies/bytes``, ``cookies/held`` and ``cookies/hosts``."""
        with self._lock:
            out = dict(self.counts)
            out["cookies/bytes"] = self._held
            out["cookies/held"] = sum(len(e.used) for e in self._hosts.values())
            out["cookies/hosts"] = len(self._hosts)
        return out
