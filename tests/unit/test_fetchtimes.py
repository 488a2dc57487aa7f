"""FetchTimes: fixed cumulative buckets of fetch durations, responses by status class."""

from __future__ import annotations

from hive.outcome import Outcome
from hive.procs.fetchtimes import BOUNDS, BUCKET_KEYS, SUM_KEY, FetchTimes


def test_durations_fall_in_cumulative_buckets_and_uncontacted_outcomes_are_left_out() -> None:
    times = FetchTimes()
    for seconds in (0.001, 0.005, 0.2, 0.2, 7.0, 99.0):
        times.observe(seconds, Outcome("ok", 200))
    times.observe(3.0, Outcome("dns", contacted=False))
    stats = times.stats()
    assert stats["fetch/seconds/le/0.005"] == 2  # a bound is inclusive, as Prometheus's "le"
    assert stats["fetch/seconds/le/0.1"] == 2
    assert stats["fetch/seconds/le/0.25"] == 4
    assert stats["fetch/seconds/le/10"] == 5
    assert stats["fetch/seconds/le/30"] == 5
    assert stats["fetch/seconds/le/+Inf"] == 6
    assert abs(stats[SUM_KEY] - 106.406) < 1e-9
    cumulative = [stats[k] for k in BUCKET_KEYS]
    assert cumulative == sorted(cumulative) and len(cumulative) == len(BOUNDS) + 1


def test_responses_are_counted_by_status_class() -> None:
    times = FetchTimes()
    for status in (200, 204, 301, 404, 429, 503, 999):
        times.observe(0.01, Outcome("x", status))
    times.observe(0.01, Outcome("timeout", None))
    stats = times.stats()
    assert [stats[f"fetch/status/{c}"] for c in ("1xx", "2xx", "3xx", "4xx", "5xx", "other")] == [
        0, 2, 1, 2, 1, 1]
