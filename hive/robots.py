"""robots.txt (RFC 9309): what a fetch of it means, the rules it sets, and their cache.

This module never fetches: the worker fetches ``/robots.txt`` under the host's
politeness with its HTTP client and hands the outcome to
``RobotsPolicy.from_fetch``. The status policy, RFC 9309 section 2.3.1:

- **2xx**: the first ``max_bytes`` bytes are parsed (RFC 9309 asks for at least
  500 KiB). A file cut there loses its last, partial line too, so a truncated
  ``Allow: /private-stuff`` cannot become ``Allow: /``. A UTF-8 byte order mark
  is stripped (protego would read it into the first line and drop the first
  group); invalid UTF-8 is replaced, never fatal.
- **3xx**: the fetch side follows redirects, up to ``max_redirects`` hops
  (``RobotsPolicy.next_hop`` says where to go next and when to stop). A 3xx
  that reaches ``from_fetch`` (too many hops, no usable Location) means the
  file is unavailable: allow all.
- **4xx other than 429**: unavailable, allow all.
- **429, 5xx, any other status, timeout or unreachable** (``status=None``):
  disallow all and retry. Try ``n`` (counting from 1) that fails is retried
  ``retry_delay * 2**(n-1)`` seconds later, or after the answer's
  ``Retry-After`` if that is longer (at most ``cache_ttl`` either way), until
  ``tries`` tries in all have failed: the host is then ``unreachable`` (its
  URLs end as ``robots_unreachable``) for ``cache_ttl``. The caller counts the
  tries (it keeps them with the host's state).

Definitive answers are kept for ``cache_ttl`` (RFC 9309: at most 24 hours).
Groups are matched by the product token of the configured User-Agent
(``hive`` in ``hive/0.1 (+https://...)``), case-insensitively; protego picks
the longest group name that equals our token or is a prefix of it ending at a
token boundary, else ``*``. Rules are matched by protego: the longest pattern
wins, ``Allow`` on a tie; ``/robots.txt`` itself is always allowed.

Persistence: ``RobotsRules.encode`` keeps the kind, the expiry and the raw
(already cut) body; ``decode`` parses the body again. ``RobotsCache`` keeps a
bounded LRU of parsed rules in memory over ``load``/``store`` callables that
the worker backs with LMDB.
"""

from __future__ import annotations

import re
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, get_args
from urllib.parse import urljoin, urlsplit

from protego import Protego

from hive.config import Config
from hive.errors import ConfigError, StoreError

RulesKind = Literal["allow_all", "disallow_all", "parsed", "unreachable"]
_KINDS: tuple[RulesKind, ...] = get_args(RulesKind)

_BOM = b"\xef\xbb\xbf"
_FORMAT_VERSION = 1
_HEADER = struct.Struct(">BBd")
_PRODUCT = re.compile(r"[A-Za-z0-9_-]+")


def product_token(user_agent: str) -> str:
    """The product token robots.txt groups are matched against, lowercased."""
    found = _PRODUCT.match(user_agent.strip())
    if found is None:
        raise ConfigError(f"fetch.user_agent: no product token at the start of {user_agent!r}")
    return found.group().lower()


def _clip(body: bytes, max_bytes: int) -> bytes:
    if len(body) <= max_bytes:
        return body
    cut = body[:max_bytes]
    end = max(cut.rfind(b"\n"), cut.rfind(b"\r"))
    return cut[: end + 1]


@dataclass(frozen=True, slots=True)
class RobotsRules:
    """One host's rules for our agent token, valid until ``expires``."""

    kind: RulesKind
    agent: str
    expires: float
    body: bytes = b""
    _parser: Protego | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown robots rules kind {self.kind!r}")
        if self.kind == "parsed":
            text = self.body.removeprefix(_BOM).decode("utf-8", errors="replace")
            object.__setattr__(self, "_parser", Protego.parse(text))

    def allowed(self, url: str) -> bool:
        """May our agent fetch ``url``? A URL the parser cannot read is refused."""
        if self._parser is None:
            return self.kind == "allow_all"
        try:
            return self._parser.can_fetch(url, self.agent)
        except ValueError:
            return False

    def crawl_delay(self) -> float | None:
        """The Crawl-delay of the group that applies to our agent, if any."""
        return None if self._parser is None else self._parser.crawl_delay(self.agent)

    def expired(self, now: float) -> bool:
        return now >= self.expires

    def encode(self) -> bytes:
        """Bytes for the store: format version, kind, expiry, raw body."""
        return _HEADER.pack(_FORMAT_VERSION, _KINDS.index(self.kind), self.expires) + self.body

    @classmethod
    def decode(cls, data: bytes, agent: str) -> RobotsRules:
        """Rules from ``encode`` output, reparsed for ``agent``; StoreError if corrupt."""
        if len(data) < _HEADER.size:
            raise StoreError(f"robots entry too short ({len(data)} bytes)")
        version, kind, expires = _HEADER.unpack_from(data)
        if version != _FORMAT_VERSION or kind >= len(_KINDS):
            raise StoreError(f"robots entry of unknown version {version} or kind {kind}")
        return cls(_KINDS[kind], agent, expires, data[_HEADER.size :])


@dataclass(frozen=True, slots=True)
class RobotsDecision:
    """What one robots.txt fetch settles: rules to use, and maybe when to try again.

    ``retry_at`` is set for a transient failure: ``rules`` then disallow all
    until that time, when the caller fetches robots.txt again.
    """

    rules: RobotsRules
    retry_at: float | None = None

    @property
    def final(self) -> bool:
        return self.retry_at is None

    @property
    def unreachable(self) -> bool:
        return self.rules.kind == "unreachable"


@dataclass(frozen=True, slots=True)
class RobotsPolicy:
    """The RFC 9309 status policy of the module docstring, with its config values."""

    agent: str
    cache_ttl: float
    max_bytes: int
    max_redirects: int
    tries: int
    retry_delay: float

    @classmethod
    def from_config(cls, cfg: Config) -> RobotsPolicy:
        return cls(
            agent=product_token(cfg.fetch.user_agent),
            cache_ttl=cfg.robots.cache_ttl,
            max_bytes=cfg.robots.max_bytes,
            max_redirects=cfg.robots.max_redirects,
            tries=cfg.robots.tries,
            retry_delay=cfg.robots.retry_delay,
        )

    def from_fetch(
        self, status: int | None, body: bytes, now: float, attempt: int,
        retry_after: float | None = None,
    ) -> RobotsDecision:
        """The decision for try number ``attempt`` (from 1) that got ``status``.

        ``status`` is None when no response came (timeout, refused, reset, DNS).
        ``retry_after``: the answer's Retry-After, in seconds from ``now``, if any.
        """
        if attempt < 1:
            raise ValueError(f"attempt counts from 1, got {attempt}")
        expires = now + self.cache_ttl
        if status is not None and 200 <= status < 300:
            return RobotsDecision(
                RobotsRules("parsed", self.agent, expires, _clip(body, self.max_bytes))
            )
        if status is not None and 300 <= status < 500 and status != 429:
            return RobotsDecision(RobotsRules("allow_all", self.agent, expires))
        if attempt >= self.tries:
            return RobotsDecision(RobotsRules("unreachable", self.agent, expires))
        wait = max(self.retry_delay * 2 ** (attempt - 1), retry_after or 0.0)
        retry_at = now + min(wait, self.cache_ttl)
        return RobotsDecision(RobotsRules("disallow_all", self.agent, retry_at), retry_at)

    def next_hop(self, url: str, location: str | None, hops: int) -> str | None:
        """Where a robots.txt redirect leads, or None to stop and hand the 3xx over.

        ``hops`` counts the redirects already followed; the target must be http(s).
        """
        if hops >= self.max_redirects or not location or not location.strip():
            return None
        try:
            target = urljoin(url, location.strip())
            scheme = urlsplit(target).scheme
        except ValueError:
            return None
        return target if scheme in ("http", "https") else None


class RobotsCache:
    """A bounded, thread-safe LRU of parsed rules by host key, over a persistent store.

    ``hits`` are answers from memory, ``loads`` from the store, ``misses`` when
    neither holds unexpired rules (the caller then fetches robots.txt);
    ``corrupt`` counts stored entries that could not be decoded (read as misses).
    """

    def __init__(
        self,
        max_entries: int,
        agent: str,
        load: Callable[[str], bytes | None] | None = None,
        store: Callable[[str, bytes], None] | None = None,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max_entries = max_entries
        self._agent = agent
        self._load = load
        self._store = store
        self._entries: OrderedDict[str, RobotsRules] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._loads = self._misses = self._evictions = self._corrupt = 0

    def get(self, host_key: str, now: float) -> RobotsRules | None:
        """Unexpired rules for ``host_key``, or None when robots.txt must be fetched."""
        with self._lock:
            rules = self._entries.get(host_key)
            if rules is not None and not rules.expired(now):
                self._entries.move_to_end(host_key)
                self._hits += 1
                return rules
            if rules is not None:
                del self._entries[host_key]
        stored = self._read(host_key)
        with self._lock:
            if stored is not None and not stored.expired(now):
                self._loads += 1
                self._insert(host_key, stored)
                return stored
            self._misses += 1
            return None

    def _read(self, host_key: str) -> RobotsRules | None:
        data = None if self._load is None else self._load(host_key)
        if data is None:
            return None
        try:
            return RobotsRules.decode(data, self._agent)
        except StoreError:
            with self._lock:
                self._corrupt += 1
            return None

    def put(self, host_key: str, rules: RobotsRules) -> None:
        """Keep ``rules`` in memory and hand them to the store."""
        with self._lock:
            self._insert(host_key, rules)
        if self._store is not None:
            self._store(host_key, rules.encode())

    def _insert(self, host_key: str, rules: RobotsRules) -> None:
        self._entries[host_key] = rules
        self._entries.move_to_end(host_key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
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
            }
