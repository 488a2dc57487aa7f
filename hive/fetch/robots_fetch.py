"""The robots.txt fetch, on a fetch thread: a robots.txt lease to its ``Fetched``.

The frontier leases an origin's robots.txt before its pages (hive.fetch.gate);
a fetch thread fetches it here through the pipeline's GET (so the exchange goes
to the sinks like any other), follows redirects on the same host only, and asks
the policy (hive.fetch.robots_policy) what the answer settles. The rules a fetch
settles ride on its ``Fetched`` back to the frontier thread, which keeps them in
the cache (``FrontierGate.keep``); the sitemaps they name are handed on by the
pipeline.

Parsing a big robots.txt holds much memory while protego reads it: at most
``ROBOTS_PARSES`` fetch threads parse one larger than ``BIG_ROBOTS`` at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from hive.core.lease import Lease
from hive.core.politeness import Politeness
from hive.core.urls import canonicalize, host_key
from hive.errors import URLError
from hive.fetch.client import FetchResult
from hive.fetch.dns import Addresses
from hive.fetch.fetched import Fetched
from hive.fetch.robots_policy import RobotsPolicy
from hive.fetch.robots_rules import RobotsRules
from hive.fetch.sitemaps import robots_sitemaps
from hive.outcome import Kind

# Parsing a robots.txt holds ~60 bytes per byte of it while protego reads it (30 MB for a
# 512 KB file of wildcards, bench/bench_robots.py): at most this many fetch threads parse
# one larger than BIG_ROBOTS at once, so T threads meeting such files hold ~60 MB, not T x 30.
ROBOTS_PARSES = 2
BIG_ROBOTS = 64 << 10


def robots_status(result: FetchResult) -> int | None:
    """The status robots.txt's policy reads from a fetch: None unless the answer came whole.

    A 2xx whose body was cut by a failure (connection dropped, timeout) or could
    not be decoded is no robots.txt: taking it as an empty file would allow all.
    Cut at the size cap (``too_large``, ``decoded_too_large``) it is a file: its
    first ``robots.max_bytes`` are what RFC 9309 asks to parse.
    """
    if result.status is None:
        return None
    if result.outcome == Kind.REDIRECT or result.outcome.startswith("http_"):
        return result.status
    if result.outcome in (Kind.TOO_LARGE, Kind.DECODED_TOO_LARGE):
        return result.status
    if result.outcome != Kind.OK:
        return None
    codings = {
        c.strip().lower()
        for name, value in result.headers if name.lower() == "content-encoding"
        for c in value.split(",")
    } - {"", "identity"}
    if codings and result.raw_body and result.body == result.raw_body:
        return None  # a content coding the fetcher could not undo: the bytes are not the file
    return result.status


class RobotsFetch:
    """robots.txt leases on the fetch threads, which share one (the module docstring).

    ``get(url, addresses)``: the pipeline's GET from the host's addresses (the next when
    connecting to one fails), which hands the exchange to the sinks.
    ``sitemaps``: whether the ``Sitemap:`` lines of a file are kept with its rules.
    """

    def __init__(
        self, policy: RobotsPolicy, politeness: Politeness,
        get: Callable[[str, Addresses], FetchResult], sitemaps: bool,
    ) -> None:
        self.policy = policy
        self.politeness = politeness
        self._get = get
        self.sitemaps = sitemaps
        self._parses = threading.BoundedSemaphore(ROBOTS_PARSES)

    def fetch(
        self, lease: Lease, stale: RobotsRules | None, addresses: Addresses, started: float
    ) -> Fetched:
        """Fetch robots.txt, following redirects on the same host only (hive.fetch.robots_policy).

        Every hop is a request to this host under its lease, so each waits the
        host's delay after the last response, as its pages do. A hop to another
        host (another politeness key) is not requested: the 3xx stands, and the
        policy reads it as an unavailable robots.txt.
        """
        url, hops = lease.record.url, 0
        while True:
            result = self._get(url, addresses)
            target = (
                self.policy.next_hop(url, result.location, hops)
                if result.outcome == Kind.REDIRECT else None
            )
            if target is None:
                break
            try:
                target = canonicalize(target)
            except URLError:
                break
            if host_key(target) != lease.record.host_key:
                message = f"robots.txt redirects to another host: {target}"
                fetched = self.outcome(
                    lease, stale, result.status, b"", started, result.finished, message
                )
                fetched.address = result.address
                return fetched
            wait = self.politeness.delay(result.download_time)
            time.sleep(max(0.0, result.finished + wait - time.time()))
            url, hops = target, hops + 1
        fetched = self.outcome(
            lease, stale, robots_status(result), result.body, started, result.finished,
            result.message, result.retry_after,
        )
        fetched.address, fetched.unconnected = result.address, result.unconnected
        return fetched

    def outcome(
        self, lease: Lease, stale: RobotsRules | None, status: int | None, body: bytes,
        started: float, finished: float, message: str, retry_after: float | None = None,
    ) -> Fetched:
        """What an answer (``status`` None: none came whole) settles, as the lease's
        ``Fetched``; ``stale``: the origin's expired rules, which may stand in."""
        gate = self._parses if len(body) > BIG_ROBOTS else contextlib.nullcontext()
        named: tuple[str, ...] = ()
        if self.sitemaps and body and status is not None and 200 <= status < 300:
            named = tuple(robots_sitemaps(body, lease.record.url))
        with gate:
            decision = self.policy.from_fetch(
                status, body, finished, attempt=lease.record.attempts + 1,
                retry_after=retry_after, stale=stale, sitemaps=named,
            )
        contacted = status is not None
        rules = decision.rules
        fetched = Fetched(
            Kind.ROBOTS_OK, status, contacted, lease=lease, started=started, finished=finished,
            size=len(body), message=message,
            rules=rules if decision.final or decision.stale else None,
        )
        if decision.unreachable:
            fetched.kind, fetched.robots_until = Kind.ROBOTS_UNREACHABLE, rules.expires
        elif decision.stale:
            fetched.kind, fetched.robots_until = Kind.ROBOTS_STALE, rules.expires
            fetched.crawl_delay = rules.crawl_delay()
        elif decision.retry_at is not None:
            fetched.kind, fetched.retry_after = Kind.ROBOTS_RETRY, decision.retry_at - finished
        else:
            fetched.robots_until, fetched.crawl_delay = rules.expires, rules.crawl_delay()
        return fetched
