"""HostState: what the frontier remembers of one host, persisted in ``hosts``.

Politeness (next-allowed time, last delay and download time, Crawl-delay,
consecutive failures), robots.txt freshness and tries per scheme (robots.txt
belongs to an origin, RFC 9309 section 2.3, while politeness belongs to the
host), a block reason (Crawl-delay over the cap, an address refused, an
operator's ``deny``), counts (sitemap files admitted among them, for
``sitemaps.max_files_per_host``; pages listed by sitemaps of other origins and not yet
vouched for by the host's robots.txt, ``listed``, held against ``max_urls_per_host``
apart from ``admitted`` so that they never crowd out the host's own links), and where
the host is parked. ``head`` is in
memory only: while the host is bound, the back key and record bytes of the best
URL in its queue (None when empty), so that neither a lease nor its outcome has
to look the queue up again.

A host here is a politeness key (hive.core.keys), which ``host_key`` holds and
whose hash keys the record; today that key is the host key, so the per-host
parts above (robots.txt, the budgets, a block) and politeness share a record.
"""

from __future__ import annotations

import struct

_FORMAT = struct.Struct(">dddddIIIIdI")
# The http origin's robots.txt freshness and tries, after the host key (stores written
# before robots.txt was kept per scheme lack it: http then fetches its own again).
_HTTP_ROBOTS = struct.Struct(">dI")
# Sitemap files admitted for the host, after that (stores written before sitemaps lack it: 0).
_SITEMAPS = struct.Struct(">I")
# Pages of the host listed by sitemaps of other origins and not yet vouched for, after that
# (stores written before lack it: 0).
_LISTED = struct.Struct(">I")
# Queue entries of the host whose URL a stronger discovery has given a newer entry: they
# go without a fetch when they come up, so they cost the host no time (stores written
# before lack it: 0).
_STALE = struct.Struct(">I")


class HostState:
    __slots__ = (
        "host_key", "next_allowed", "delay", "download_time", "crawl_delay", "robots_until",
        "admitted", "fetched", "queued", "failures", "parked_at", "robots_tries",
        "blocked", "head", "http_robots_until", "http_robots_tries", "sitemaps", "listed",
        "stale",
    )

    def __init__(self, host_key: str) -> None:
        self.host_key = host_key
        self.next_allowed = 0.0
        self.delay = 0.0
        self.download_time = 0.0
        self.crawl_delay = 0.0
        self.robots_until = 0.0
        self.admitted = 0
        self.fetched = 0
        self.queued = 0
        self.failures = 0
        self.parked_at = -1.0
        self.robots_tries = 0
        self.http_robots_until = 0.0
        self.http_robots_tries = 0
        self.blocked = ""
        self.sitemaps = 0
        self.listed = 0
        self.stale = 0
        self.head: tuple[bytes, bytes] | None = None

    def robots_state(self, scheme: str) -> tuple[float, int]:
        """(fresh until, failed tries) of the robots.txt of this host's ``scheme`` origin."""
        if scheme == "http":
            return self.http_robots_until, self.http_robots_tries
        return self.robots_until, self.robots_tries

    def set_robots_state(self, scheme: str, until: float, tries: int) -> None:
        if scheme == "http":
            self.http_robots_until, self.http_robots_tries = until, tries
        else:
            self.robots_until, self.robots_tries = until, tries

    def encode(self) -> bytes:
        head = _FORMAT.pack(
            self.next_allowed, self.delay, self.download_time, self.crawl_delay,
            self.robots_until, self.admitted, self.fetched, self.queued, self.failures,
            self.parked_at, self.robots_tries,
        )
        tail = _HTTP_ROBOTS.pack(self.http_robots_until, self.http_robots_tries)
        if self.sitemaps or self.listed or self.stale:
            tail += _SITEMAPS.pack(self.sitemaps)
        if self.listed or self.stale:
            tail += _LISTED.pack(self.listed)
        if self.stale:
            tail += _STALE.pack(self.stale)
        return head + self.blocked.encode() + b"\0" + self.host_key.encode() + b"\0" + tail

    @property
    def pending(self) -> int:
        """The host's queue entries that will be fetched: ``queued`` less the stale ones (a
        lower bound of its URLs still to fetch)."""
        return max(self.queued - self.stale, 0)

    @classmethod
    def decode(cls, data: bytes) -> HostState:
        values = _FORMAT.unpack_from(data)
        blocked, _, rest = data[_FORMAT.size :].partition(b"\0")
        key, _, tail = rest.partition(b"\0")
        state = cls(key.decode())
        with_sitemaps = _HTTP_ROBOTS.size + _SITEMAPS.size
        with_listed = with_sitemaps + _LISTED.size
        if len(tail) in (_HTTP_ROBOTS.size, with_sitemaps, with_listed,
                         with_listed + _STALE.size):
            state.http_robots_until, state.http_robots_tries = _HTTP_ROBOTS.unpack_from(tail)
        if len(tail) >= with_sitemaps:
            (state.sitemaps,) = _SITEMAPS.unpack_from(tail, _HTTP_ROBOTS.size)
        if len(tail) >= with_listed:
            (state.listed,) = _LISTED.unpack_from(tail, with_sitemaps)
        if len(tail) == with_listed + _STALE.size:
            (state.stale,) = _STALE.unpack_from(tail, with_listed)
        (
            state.next_allowed, state.delay, state.download_time, state.crawl_delay,
            state.robots_until, state.admitted, state.fetched, state.queued, state.failures,
            state.parked_at, state.robots_tries,
        ) = values
        state.blocked = blocked.decode()
        return state
