"""The robots.txt cache: one worker's rules by origin, in memory and in its store.

Persistence: the ``robots`` store keeps, per host key, one entry per scheme:
the kind, expiry, stale limit, the sitemaps its ``Sitemap:`` lines name
(hive.fetch.sitemaps; for the sitemaps the crawl reads and for
cross-submission, which the origin vouches for by naming another host's
sitemap) and our group's compiled rules (not the body, so a load costs no
parse). Entries of an older format (before sitemaps were kept, version 2, or
before robots.txt was kept per origin, version 1) are never misread: their
origins fetch robots.txt again. ``RobotsCache`` keeps the rules in memory in an LRU
bounded by their estimated size in bytes, over ``load``/``store`` callables
that the worker backs with LMDB. A slot's layout (``encode_slot``): a head of
scheme, kind, expiry and stale limit (``>BBddI``, with the length of what
follows), then the agent token, the Crawl-delay and the sitemaps on a line each,
then the compiled rules (``AgentRules.encode``).

The cache is read and written on the worker's frontier thread (the owner of its
store); it is thread-safe all the same.
"""

from __future__ import annotations

import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable

from hive.errors import StoreError
from hive.fetch.robots_rules import KINDS, AgentRules, RobotsRules

SCHEMES = ("http", "https")
_FORMAT_VERSION = 3
_ENTRY = struct.Struct(">BBddI")


def origin(url: str) -> tuple[str, str]:
    """(scheme, host key) of a canonical URL: ``http://a.test:81/x`` -> (http, a.test:81)."""
    scheme, _, rest = url.partition("://")
    return scheme, rest.partition("/")[0]


def _encode_rules(rules: RobotsRules) -> bytes:
    """What follows a slot's head: the agent, Crawl-delay, sitemaps, compiled rules."""
    delay = "" if rules.delay is None else repr(rules.delay)
    # Canonical URLs hold no space or newline (hive.core.urls percent-encodes them).
    head = f"{rules.agent}\n{delay}\n{' '.join(rules.sitemaps)}\n".encode()
    return head + (b"" if rules.compiled is None else rules.compiled.encode())


def _decode_rules(kind: int, expires: float, stale_until: float, data: bytes) -> RobotsRules:
    """Rules from ``_encode_rules`` output; StoreError if corrupt."""
    if kind >= len(KINDS):
        raise StoreError(f"robots entry of unknown kind {kind}")
    try:
        agent, delay_text, named, rest = data.split(b"\n", 3) if data.count(b"\n") >= 3 else (
            data, b"", b"", b"")
        delay = float(delay_text) if delay_text else None
        name = KINDS[kind]
        compiled = AgentRules.decode(rest) if name == "parsed" else None
        sitemaps = tuple(named.decode().split(" ")) if named else ()
        return RobotsRules(name, agent.decode(), expires, stale_until, compiled, delay, sitemaps)
    except (UnicodeDecodeError, ValueError) as exc:
        raise StoreError(f"robots entry is corrupt: {exc}") from exc


def encode_slot(scheme: str, rules: RobotsRules) -> bytes:
    """One scheme's slot of a host key's store value."""
    data = _encode_rules(rules)
    head = _ENTRY.pack(SCHEMES.index(scheme), KINDS.index(rules.kind), rules.expires,
                       rules.stale_until, len(data))
    return head + data


def split_slots(data: bytes) -> dict[str, bytes]:
    """A host key's store value as its slots, undecoded; StoreError if corrupt.

    A value of an older format (1: one entry per host, before robots.txt was kept
    per origin; 2: before the Sitemap: lines were kept) holds no slots: its
    origins fetch robots.txt again.
    """
    if not data:
        raise StoreError("robots entry is empty")
    if data[0] != _FORMAT_VERSION:
        if data[0] in (1, 2):
            return {}
        raise StoreError(f"robots entry of unknown version {data[0]}")
    slots: dict[str, bytes] = {}
    pos = 1
    while pos < len(data):
        if len(data) - pos < _ENTRY.size:
            raise StoreError("robots entry is cut short")
        scheme, _, _, _, size = _ENTRY.unpack_from(data, pos)
        end = pos + _ENTRY.size + size
        if scheme >= len(SCHEMES) or end > len(data):
            raise StoreError("robots entry is corrupt")
        slots[SCHEMES[scheme]] = data[pos:end]
        pos = end
    return slots


def decode_slot(slot: bytes) -> RobotsRules:
    _, kind, expires, stale_until, _ = _ENTRY.unpack_from(slot)
    return _decode_rules(kind, expires, stale_until, slot[_ENTRY.size :])


def join_slots(slots: Iterable[bytes]) -> bytes:
    return bytes([_FORMAT_VERSION]) + b"".join(slots)


def encode_entries(entries: dict[str, RobotsRules]) -> bytes:
    """One host key's store value: a version byte, then a slot per scheme."""
    return join_slots(encode_slot(scheme, rules) for scheme, rules in entries.items())


def decode_entries(data: bytes) -> dict[str, RobotsRules]:
    """``encode_entries`` undone; StoreError if corrupt."""
    return {scheme: decode_slot(slot) for scheme, slot in split_slots(data).items()}


class RobotsCache:
    """A thread-safe LRU of rules by origin, bounded by bytes, over a persistent store.

    ``hits`` are answers from memory, ``loads`` from the store, ``misses`` when
    neither holds unexpired rules (the caller then fetches robots.txt);
    ``corrupt`` counts stored entries that could not be decoded (read as
    misses). The store is keyed by host key and holds every scheme's entry.
    Expired rules stay until evicted, for ``stale``. An entry larger than the
    whole bound is kept alone.
    """

    def __init__(
        self,
        max_bytes: int,
        agent: str,
        load: Callable[[str], bytes | None] | None = None,
        store: Callable[[str, bytes], None] | None = None,
    ) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        self._max_bytes = max_bytes
        self._agent = agent
        self._load = load
        self._store = store
        self._entries: OrderedDict[tuple[str, str], RobotsRules] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._hits = self._loads = self._misses = self._evictions = self._corrupt = 0

    def get(self, url: str, now: float) -> RobotsRules | None:
        """Unexpired rules for the origin of ``url``, or None when robots.txt must be fetched."""
        key = origin(url)
        with self._lock:
            rules = self._entries.get(key)
            if rules is not None and not rules.expired(now):
                self._entries.move_to_end(key)
                self._hits += 1
                return rules
        stored = self._read(key) if rules is None else None
        with self._lock:
            if stored is not None and not stored.expired(now):
                self._loads += 1
                self._insert(key, stored)
                return stored
            self._misses += 1
            return None

    def stale(self, url: str, now: float) -> RobotsRules | None:
        """The expired rules of ``url``'s origin, if they may still stand in (section 2.4)."""
        key = origin(url)
        with self._lock:
            rules = self._entries.get(key)
        if rules is None:
            rules = self._read(key)
        return rules if rules is not None and rules.usable_stale(now) else None

    def _slots(self, host_key: str) -> dict[str, bytes]:
        data = None if self._load is None else self._load(host_key)
        if data is None:
            return {}
        try:
            return split_slots(data)
        except StoreError:
            with self._lock:
                self._corrupt += 1
            return {}

    def _read(self, key: tuple[str, str]) -> RobotsRules | None:
        """The stored rules of one origin: only its own slot is decoded."""
        slot = self._slots(key[1]).get(key[0])
        if slot is None:
            return None
        try:
            rules = decode_slot(slot)
        except StoreError:
            with self._lock:
                self._corrupt += 1
            return None
        return rules if rules.agent == self._agent else None

    def put(self, url: str, rules: RobotsRules) -> None:
        """Keep ``rules`` for ``url``'s origin in memory and hand them to the store."""
        scheme, host = key = origin(url)
        if scheme not in SCHEMES:
            raise ValueError(f"robots.txt rules for an origin that is not http(s): {url!r}")
        with self._lock:
            self._insert(key, rules)
        if self._store is not None:
            slots = self._slots(host)
            slots[scheme] = encode_slot(scheme, rules)
            self._store(host, join_slots(slots.values()))

    def _insert(self, key: tuple[str, str], rules: RobotsRules) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.size
        self._entries[key] = rules
        self._bytes += rules.size
        while self._bytes > self._max_bytes and len(self._entries) > 1:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.size
            self._evictions += 1

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "robots/hits": self._hits,
                "robots/loads": self._loads,
                "robots/misses": self._misses,
                "robots/evictions": self._evictions,
                "robots/corrupt": self._corrupt,
                "robots/entries": len(self._entries),
                "robots/bytes": self._bytes,
            }
