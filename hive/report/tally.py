"""The crawl log folded into bounded counters and time buckets: what the report draws.

Memory is bounded by the constants below, never by the length of the log or
what a server sent: a counter keyed by something a log line says (an outcome,
a MIME type, a host) keeps at most twice its capacity of keys and, past that,
only its ``capacity`` largest (Misra-Gries style pruning); the report says when
that happened, since the counts of the keys kept are then lower bounds. Time is
cut into at most ``MAX_BUCKETS`` buckets whose width doubles as the crawl
grows longer.

What a line counts as, from hive.fetch.crawllog's fields:

* a *fetch* is a line with an HTTP status or a download time (a refusal or an
  ended host has neither); a *page* is a fetch whose outcome is ``ok``;
* an *error* is an outcome that is neither a success nor a refusal
  (``NOT_ERRORS``);
* a *refusal* is the outcome ``refused`` (by its ``reason``) or a URL that
  robots.txt disallowed or whose robots.txt was unreachable;
* a fetch counts at the IP address it went to (``address``, when the line names one):
  the busiest addresses, their fetches and the distinct hosts fetched there (a bounded
  counter of (address, host) pairs, so a host count is a lower bound once it prunes);
* a recrawl's fetch counts its *change* (``change``: new, changed, unchanged, gone,
  moved);
* a *politeness wait* is the time from the end of one fetch of a host to the
  start (``t - dl``) of its next, within one worker's log.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hive.core.prior import CHANGES
from hive.outcome import Kind

# Outcomes that are not errors: the kinds that are not (hive.outcome), and refusals,
# which the crawl log writes as lines of their own.
NOT_ERRORS = frozenset({kind.value for kind in Kind if not kind.error} | {Kind.REFUSED.value})
# Outcomes that are refusals without a ``reason`` field, and the reason the report gives.
REFUSAL_OUTCOMES = {
    "robots": "robots.txt disallows", "robots_unreachable": "robots.txt unreachable",
}
MAX_BUCKETS = 400
# Distinct outcomes, status codes, MIME types, reasons kept: a real crawl has tens.
LABELS = 1000
# Hosts kept in the host table: enough for any top list, bounded whatever the crawl.
HOSTS = 50_000
# A host key is at most this long (a DNS name is 253); a longer one in a damaged log is cut.
MAX_HOST = 300
# Lines between two prunings of the bounded counters: a counter holds at most this many more.
BOUND_EVERY = 4096
# Depths at or past this are counted together.
MAX_DEPTH = 50
# A host needs this many fetches to be ranked among the slowest.
SLOW_MIN_FETCHES = 3
# Upper edges (seconds) of the politeness-wait histogram's bins; the last is open.
WAIT_EDGES = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)


class BoundedCounter:
    """Counts by key; :meth:`bound`, called every ``BOUND_EVERY`` lines, keeps at most
    ``2 * capacity`` keys (see the module docstring)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.counts: Counter[Any] = Counter()
        self.pruned = 0

    def add(self, key: Any) -> None:
        self.counts[key] += 1

    def bound(self) -> None:
        """Keep the ``capacity`` largest counts if there are more than twice as many keys."""
        if len(self.counts) > 2 * self.capacity:
            self.counts = Counter(dict(self.counts.most_common(self.capacity)))
            self.pruned += 1

    def top(self, n: int) -> list[tuple[Any, int]]:
        return self.counts.most_common(n)


class TimeBuckets:
    """Pages, fetches and bytes per time bucket; the width doubles to stay within bounds."""

    def __init__(self, width: float = 1.0, max_buckets: int = MAX_BUCKETS) -> None:
        self.width = width
        self.max_buckets = max_buckets
        self.origin: float | None = None
        self.buckets: dict[int, list[int]] = {}
        self._low = self._high = 0

    def add(self, t: float, pages: bool, fetches: bool, size: int) -> None:
        if self.origin is None:
            self.origin = t
        bucket = self.buckets.get(int((t - self.origin) // self.width))
        if bucket is None:
            bucket = self._new(t)
        bucket[0] += pages
        bucket[1] += fetches
        bucket[2] += size

    def _new(self, t: float) -> list[int]:
        assert self.origin is not None
        index = int((t - self.origin) // self.width)
        self.buckets[index] = [0, 0, 0]
        self._low, self._high = min(self._low, index), max(self._high, index)
        while self._high - self._low >= self.max_buckets:
            self._widen()
        return self.buckets[int((t - self.origin) // self.width)]

    def _widen(self) -> None:
        merged: dict[int, list[int]] = {}
        for index, values in self.buckets.items():
            into = merged.setdefault(index // 2, [0, 0, 0])
            for k in range(3):
                into[k] += values[k]
        self.buckets = merged
        self.width *= 2
        self._low, self._high = self._low // 2, self._high // 2

    def series(self) -> list[tuple[float, float, float, float]]:
        """(seconds from the first bucket, pages/s, fetches/s, bytes/s), every bucket."""
        if not self.buckets:
            return []
        width, rows = self.width, []
        for index in range(self._low, self._high + 1):
            pages, fetches, size = self.buckets.get(index, (0, 0, 0))
            rows.append(((index - self._low) * width, pages / width, fetches / width, size / width))
        return rows

    @property
    def start(self) -> float | None:
        return None if self.origin is None else self.origin + self._low * self.width


@dataclass(slots=True)
class HostStats:
    pages: int = 0
    errors: int = 0
    fetches: int = 0
    download: float = 0.0
    last_end: float = -1.0

    @property
    def weight(self) -> int:
        return self.pages + self.errors + self.fetches


@dataclass
class Tally:
    """Everything the report shows, folded in one line at a time by :meth:`add`."""

    lines: int = 0
    first: float = math.inf
    last: float = -math.inf
    mime_lines: int = 0
    times: TimeBuckets = field(default_factory=TimeBuckets)
    outcomes: BoundedCounter = field(default_factory=lambda: BoundedCounter(LABELS))
    statuses: BoundedCounter = field(default_factory=lambda: BoundedCounter(LABELS))
    mimes: BoundedCounter = field(default_factory=lambda: BoundedCounter(LABELS))
    refusals: BoundedCounter = field(default_factory=lambda: BoundedCounter(LABELS))
    depths: Counter[int] = field(default_factory=Counter)
    waits: list[int] = field(default_factory=lambda: [0] * (len(WAIT_EDGES) + 1))
    wait_total: float = 0.0
    host_capacity: int = HOSTS
    hosts: dict[str, HostStats] = field(default_factory=dict)
    hosts_pruned: int = 0
    # A recrawl's changes (the ``change`` field, hive.core.prior): new, changed, unchanged,
    # gone, moved; a bad value is not counted.
    changes: Counter[str] = field(default_factory=Counter)
    addresses: BoundedCounter = field(default_factory=lambda: BoundedCounter(LABELS))
    address_hosts: BoundedCounter = field(default_factory=lambda: BoundedCounter(HOSTS))

    def add(self, entry: dict[str, Any]) -> None:
        self.lines += 1
        if self.lines % BOUND_EVERY == 0:
            for counter in (self.outcomes, self.statuses, self.mimes, self.refusals,
                            self.addresses, self.address_hosts):
                counter.bound()
        get = entry.get
        t: float = entry["t"]
        outcome: str = entry["outcome"]
        status = get("status")
        size: int = get("bytes", 0)
        download: float = get("dl", 0.0)
        if t < self.first:
            self.first = t
        if t > self.last:
            self.last = t
        self.outcomes.counts[outcome] += 1
        change = get("change")
        if change is not None and change in CHANGES:
            self.changes[change] += 1
        fetch = status is not None or download > 0
        page = fetch and outcome == "ok"
        error = outcome not in NOT_ERRORS
        self.times.add(t, page, fetch, size)
        if status is not None:
            self.statuses.counts[status] += 1
        if outcome == "refused":
            self.refusals.add(get("reason") or "malformed URL")
        elif outcome in REFUSAL_OUTCOMES:
            self.refusals.add(REFUSAL_OUTCOMES[outcome])
        if not (fetch or error):
            return
        host = _host(entry["url"])
        stats = self.hosts.get(host)
        if stats is None:
            stats = self.hosts[host] = HostStats()
            if len(self.hosts) > 2 * self.host_capacity:
                self._prune_hosts()
        if error:
            stats.errors += 1
        if not fetch:
            return
        stats.fetches += 1
        stats.download += download
        address = get("address")
        if isinstance(address, str) and address:
            address = address[:MAX_HOST]
            self.addresses.add(address)
            self.address_hosts.add((address, host))
        start = t - download
        if stats.last_end >= 0 and start >= stats.last_end:
            self._wait(start - stats.last_end)
        if t > stats.last_end:
            stats.last_end = t
        mime = get("mime")
        if mime:
            self.mime_lines += 1
            self.mimes.counts[_media_type(mime)] += 1
        if page:
            stats.pages += 1
            self.depths[min(int(get("depth", 0)), MAX_DEPTH)] += 1

    @property
    def pages(self) -> int:
        return sum(bucket[0] for bucket in self.times.buckets.values())

    @property
    def fetches(self) -> int:
        return sum(bucket[1] for bucket in self.times.buckets.values())

    @property
    def size(self) -> int:
        return sum(bucket[2] for bucket in self.times.buckets.values())

    def _wait(self, seconds: float) -> None:
        self.wait_total += seconds
        self.waits[bisect.bisect_right(WAIT_EDGES, seconds)] += 1

    def _prune_hosts(self) -> None:
        kept = heapq.nlargest(self.host_capacity, self.hosts.items(), key=lambda kv: kv[1].weight)
        self.hosts = dict(kept)
        self.hosts_pruned += 1

    def top_hosts(self, key: str, n: int) -> list[tuple[str, int]]:
        """The ``n`` hosts with the most pages or errors (``key``), with their count."""
        ranked = heapq.nlargest(n, self.hosts.items(), key=lambda kv: getattr(kv[1], key))
        return [(host, getattr(stats, key)) for host, stats in ranked if getattr(stats, key)]

    def busiest_addresses(self, n: int) -> list[tuple[str, int, int]]:
        """(address, fetches, distinct hosts fetched there) of the ``n`` addresses with the
        most fetches."""
        hosts: Counter[str] = Counter(address for address, _ in self.address_hosts.counts)
        return [(address, fetches, hosts[address])
                for address, fetches in self.addresses.top(n)]

    def slowest_hosts(self, n: int) -> list[tuple[str, float, int]]:
        """(host, mean download seconds, fetches) of the ``n`` slowest hosts with enough
        fetches to tell (``SLOW_MIN_FETCHES``)."""
        ranked = heapq.nlargest(
            n, ((h, s.download / s.fetches, s.fetches) for h, s in self.hosts.items()
                if s.fetches >= SLOW_MIN_FETCHES),
            key=lambda row: row[1],
        )
        return ranked


@functools.lru_cache(maxsize=256)
def _media_type(mime: str) -> str:
    """A Content-Type's type/subtype, lower case, without parameters (a few kinds recur)."""
    return mime.partition(";")[0].strip().lower()[:100]


def _host(url: str) -> str:
    """A canonical URL's host key (hive.core.urls.host_key), or the URL's start if odd."""
    scheme_end = url.find("://")
    start = scheme_end + 3 if scheme_end >= 0 else 0
    end = url.find("/", start)
    host = url[start:end] if end >= 0 else url[start:]
    return host[:MAX_HOST]
