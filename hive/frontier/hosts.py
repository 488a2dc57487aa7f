"""HostState: what the frontier remembers of one host, persisted in ``hosts``.

Politeness (next-allowed time, last delay and download time, Crawl-delay,
consecutive failures), robots.txt freshness and tries, a block reason (robots
unreachable, Crawl-delay over the cap, an operator's ``deny``), counts, and
where the host is parked. ``head`` is in memory only: while the host is bound,
the back key and record bytes of the best URL in its queue (None when empty),
so that neither a lease nor its outcome has to look the queue up again.
"""

from __future__ import annotations

import struct

_FORMAT = struct.Struct(">dddddIIIIdI")


class HostState:
    __slots__ = (
        "host_key", "next_allowed", "delay", "download_time", "crawl_delay", "robots_until",
        "admitted", "fetched", "queued", "failures", "parked_at", "robots_tries",
        "blocked", "head",
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
        self.blocked = ""
        self.head: tuple[bytes, bytes] | None = None

    def encode(self) -> bytes:
        head = _FORMAT.pack(
            self.next_allowed, self.delay, self.download_time, self.crawl_delay,
            self.robots_until, self.admitted, self.fetched, self.queued, self.failures,
            self.parked_at, self.robots_tries,
        )
        return head + self.blocked.encode() + b"\0" + self.host_key.encode()

    @classmethod
    def decode(cls, data: bytes) -> HostState:
        values = _FORMAT.unpack_from(data)
        blocked, _, key = data[_FORMAT.size :].partition(b"\0")
        state = cls(key.decode())
        (
            state.next_allowed, state.delay, state.download_time, state.crawl_delay,
            state.robots_until, state.admitted, state.fetched, state.queued, state.failures,
            state.parked_at, state.robots_tries,
        ) = values
        state.blocked = blocked.decode()
        return state
