"""FetchTimes: a worker's fetch durations in fixed buckets, and its HTTP responses by class.

The frontier thread records each outcome it applies (``observe``): one bisect
over a dozen bounds, two integer increments and a float addition, with no lock
(only that thread touches it) and no allocation. ``stats`` gives them to the
worker's report, where the supervisor's ``/metrics`` (hive/procs/metrics.py)
reads them as a Prometheus histogram:

- ``fetch/seconds/le/<bound>``: outcomes that reached the host within
  ``bound`` seconds, cumulative as Prometheus buckets are (the last bound is
  ``+Inf``, the count), and ``fetch/seconds/sum``;
- ``fetch/status/<class>``: responses by status class (``2xx`` … ``5xx``;
  ``other`` for a status outside 100-599).

A duration runs from the lease's start to the end of its response (DNS and
robots.txt look-ups included), for outcomes that contacted the host: a
refusal made without a request has no duration worth counting.
"""

from __future__ import annotations

from bisect import bisect_left

from hive.outcome import Outcome

# Seconds: a page from a nearby server takes milliseconds, a slow one seconds; the
# fetch.total_timeout default (30 s) ends the range. Fixed, so that workers' histograms
# sum and a restart does not change them.
BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BUCKET_KEYS = tuple(f"fetch/seconds/le/{b:g}" for b in BOUNDS) + ("fetch/seconds/le/+Inf",)
SUM_KEY = "fetch/seconds/sum"
STATUS_KEYS = ("fetch/status/1xx", "fetch/status/2xx", "fetch/status/3xx", "fetch/status/4xx",
               "fetch/status/5xx", "fetch/status/other")


class FetchTimes:
    __slots__ = ("buckets", "seconds", "statuses")

    def __init__(self) -> None:
        self.buckets = [0] * len(BUCKET_KEYS)
        self.seconds = 0.0
        self.statuses = [0] * len(STATUS_KEYS)

    def observe(self, seconds: float, outcome: Outcome) -> None:
        """Count one applied outcome that took ``seconds`` from lease to response."""
        if not outcome.contacted:
            return
        self.buckets[bisect_left(BOUNDS, seconds)] += 1
        self.seconds += seconds
        status = outcome.status
        if status is not None:
            self.statuses[status // 100 - 1 if 100 <= status < 600 else 5] += 1

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = {}
        total = 0
        for key, n in zip(BUCKET_KEYS, self.buckets, strict=True):
            total += n
            out[key] = total
        out[SUM_KEY] = self.seconds
        out.update(zip(STATUS_KEYS, self.statuses, strict=True))
        return out
