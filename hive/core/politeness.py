"""The delay policy: when may a host be contacted again (pure).

Mercator's rule, with the limits a crawler on other people's servers needs:

    delay = clamp(factor × download_time, min_delay, max_delay)
    delay = max(delay, min(crawl_delay, crawl_delay_cap))      robots.txt Crawl-delay
    delay = max(delay, min(retry_after, retry_after_cap))      a 429/503 Retry-After
    delay = max(delay, backoff(host failures))                 the host is struggling
    delay = max(delay, backoff(retry))                         its URL is retried next
    backoff(n) = min(backoff_base × 2^(n-1), backoff_max)

and the host's next-allowed time is ``finished + delay``: the clock runs from
when the response finished arriving, so a slow response slows the host down.

Two back-offs, kept apart so that one broken page cannot stall its host:

- **The host's**: ``failures`` counts its consecutive host failures — the
  outcomes in ``politeness.host_failure_outcomes`` (429, 503, a refused
  connection, a timeout), which say the server is overloaded or down, whatever
  the URL. Any success resets it; a URL's own failure (a 500 or a 404 on one
  page) says nothing about the host's load and leaves it as it was.
- **The URL's**: a URL that will be retried (``frontier.retry_outcomes``)
  waits ``backoff(retry)`` before its ``retry``-th retry. After its own failure
  (a 500) it waits out of its host's queue (hive/frontier/retries.py) while
  the host goes on with its other URLs at its ordinary delay: a broken page
  costs its host its requests and nothing more, so a host with k broken pages
  among n takes about n × delay plus the longest retry chain, not the sum of
  the chains. After a host failure the host waits anyway: the URL stays at the
  head of its host's queue, asked first when the host is, and the host waits
  the longer of the two back-offs (``retry``).
"""

from __future__ import annotations

from dataclasses import dataclass

from hive.config import PolitenessConfig
from hive.outcome import Kind, parse_kinds


@dataclass(frozen=True, slots=True)
class Politeness:
    delay_factor: float
    min_delay: float
    max_delay: float
    crawl_delay_cap: float
    backoff_base: float
    backoff_max: float
    retry_after_cap: float
    host_failures: frozenset[Kind]

    @classmethod
    def from_config(cls, cfg: PolitenessConfig) -> Politeness:
        return cls(
            cfg.delay_factor, cfg.min_delay, cfg.max_delay, cfg.crawl_delay_cap,
            cfg.backoff_base, cfg.backoff_max, cfg.retry_after_cap,
            parse_kinds("politeness.host_failure_outcomes", cfg.host_failure_outcomes),
        )

    def backoff(self, n: int) -> float:
        """The n-th consecutive back-off (n ≥ 1): base, 2 × base, 4 × base … up to the cap."""
        return min(self.backoff_base * float(2 ** min(n - 1, 30)), self.backoff_max)

    def delay(
        self,
        download_time: float,
        crawl_delay: float = 0.0,
        retry_after: float | None = None,
        failures: int = 0,
        retry: int = 0,
    ) -> float:
        """Seconds to wait after a response that took ``download_time`` to arrive.

        ``failures``: the host's consecutive host failures, this response's
        included; ``retry``: which retry of this URL comes next, when the URL waits at
        the head of its host's queue (after a host failure; 0: none).
        """
        wait = min(max(self.delay_factor * max(download_time, 0.0), self.min_delay), self.max_delay)
        if crawl_delay > 0:
            wait = max(wait, min(crawl_delay, self.crawl_delay_cap))
        if retry_after is not None and retry_after > 0:
            wait = max(wait, min(retry_after, self.retry_after_cap))
        if failures > 0:
            wait = max(wait, self.backoff(failures))
        if retry > 0:
            wait = max(wait, self.backoff(retry))
        return wait

    def bound_hosts(self, threads: int, download_time: float, floor: int, cap: int) -> int:
        """Back-end slots needed to keep ``threads`` busy: T × (download + delay) / download.

        A host is fetched at most once per download + delay, so each thread
        needs that many hosts in rotation (Mercator's "3× the threads" assumed
        delays near the download time; at a 1 s floor and 5 ms pages it is 200×).
        """
        download_time = max(download_time, 1e-3)
        needed = threads * (download_time + self.delay(download_time)) / download_time
        return int(min(max(needed, floor), cap))
