"""The report's reading and tallying: odd lines are skipped and said, every table is bounded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hive.fetch.crawllog import CrawlLog
from hive.procs.stats import NOT_ERRORS as SUPERVISOR_NOT_ERRORS
from hive.report.lines import MAX_LINE, Skips, read_lines
from hive.report.tally import (
    BOUND_EVERY,
    LABELS,
    NOT_ERRORS,
    WAIT_EDGES,
    BoundedCounter,
    Tally,
    TimeBuckets,
)


def line(**fields: Any) -> str:
    entry = {"t": 100.0, "outcome": "ok", "status": 200, "bytes": 10, "dl": 0.1,
             "url": "http://a.test/", "via": "", "depth": 0, **fields}
    return json.dumps(entry) + "\n"


def read(path: Path) -> tuple[list[dict[str, Any]], Skips]:
    skips = Skips()
    return list(read_lines([path], skips)), skips


def test_a_truncated_last_line_a_non_json_line_and_bad_fields_are_skipped_and_named(
    tmp_path: Path,
) -> None:
    path = tmp_path / "crawl-00.jsonl"
    path.write_text(line() + "not json\n" + "[1, 2]\n" + line(t="late") + line(status="200")
                    + line(url="http://b.test/") + "\n" + line()[:30])
    entries, skips = read(path)
    assert [e["url"] for e in entries] == ["http://a.test/", "http://b.test/"]
    assert skips.by_cause == {"not JSON": 2, "not a JSON object": 1, "no time (t)": 1,
                              "status is not a number": 1, "unfinished last line": 1}
    assert skips.named[0] == "crawl-00.jsonl:2: not JSON"
    assert skips.named[-1] == "crawl-00.jsonl:7: not JSON", "the first five are named"


def test_a_line_longer_than_the_bound_is_skipped_without_being_held(tmp_path: Path) -> None:
    path = tmp_path / "crawl-00.jsonl"
    path.write_text(line(msg="x" * (3 * MAX_LINE)) + line(url="http://after.test/"))
    entries, skips = read(path)
    assert [e["url"] for e in entries] == ["http://after.test/"]
    assert skips.by_cause == {f"longer than {MAX_LINE} bytes": 1}


def test_the_crawl_logs_own_lines_are_read_back_whole(tmp_path: Path) -> None:
    log = CrawlLog(tmp_path, "crawl-00", 1 << 30)
    log.write(5.0, "ok", "http://a.test/x", status=200, size=7, download=0.5, depth=2,
              mime="text/html; charset=utf-8")
    log.write(6.0, "refused", "http://b.test/", reason="max_depth", message="too deep")
    log.close()
    tally = Tally()
    for entry in read(tmp_path / "crawl-00.jsonl")[0]:
        tally.add(entry)
    assert (tally.pages, tally.size, tally.mimes.top(5)) == (1, 7, [("text/html", 1)])
    assert tally.refusals.top(5) == [("max_depth", 1)] and tally.depths == {2: 1}


def test_the_report_counts_as_errors_what_the_supervisor_does() -> None:
    assert NOT_ERRORS.issuperset(SUPERVISOR_NOT_ERRORS)
    assert NOT_ERRORS.difference(SUPERVISOR_NOT_ERRORS) == {"refused"}


def test_a_bounded_counter_keeps_its_largest_keys_and_says_it_pruned() -> None:
    counter = BoundedCounter(3)
    for key in range(100):
        for _ in range(10 if key < 3 else 1):
            counter.add(key)
        counter.bound()
    assert len(counter.counts) <= 6 and counter.pruned > 0
    assert [k for k, _ in counter.top(3)] == [0, 1, 2]


def test_a_log_of_endless_distinct_outcomes_keeps_the_tally_bounded() -> None:
    tally = Tally()
    for n in range(3 * BOUND_EVERY):
        tally.add({"t": 1.0, "outcome": f"odd-{n}", "status": 200 + n, "url": "http://a.test/"})
    for counter in (tally.outcomes, tally.statuses):
        assert len(counter.counts) <= 2 * LABELS + BOUND_EVERY and counter.pruned > 0


def test_time_buckets_widen_to_stay_bounded_and_keep_every_page() -> None:
    buckets = TimeBuckets(width=1.0, max_buckets=10)
    for second in range(1000):
        buckets.add(50.0 + second, 1, 1, 100)
    buckets.add(20.0, 1, 1, 0)  # a line from a worker whose file is read later
    series = buckets.series()
    assert len(series) <= 10 and buckets.width >= 100
    assert round(sum(row[1] for row in series) * buckets.width) == 1001


def test_the_host_table_is_bounded_and_keeps_the_busiest(tmp_path: Path) -> None:
    tally = Tally(host_capacity=10)
    for n in range(5):
        tally.add({"t": float(n), "outcome": "ok", "status": 200, "dl": 0.1,
                   "url": "http://busy.test/"})
    for n in range(1000):
        tally.add({"t": 1.0, "outcome": "timeout", "status": None, "dl": 1.0,
                   "url": f"http://h{n}.test/"})
    assert len(tally.hosts) <= 20 and tally.hosts_pruned > 0
    assert tally.top_hosts("pages", 1) == [("busy.test", 5)]


def test_the_busiest_addresses_count_fetches_and_distinct_hosts_within_a_bound() -> None:
    tally = Tally()
    for n in range(30):  # 30 fetches over 3 hosts at one shared address
        tally.add({"t": float(n), "outcome": "ok", "status": 200, "dl": 0.1,
                   "url": f"http://h{n % 3}.test/{n}", "address": "127.0.0.3"})
    tally.add({"t": 1.0, "outcome": "ok", "status": 200, "dl": 0.1, "url": "http://o.test/",
               "address": "127.0.1.1"})
    tally.add({"t": 1.0, "outcome": "refused", "reason": "x", "url": "http://r.test/",
               "address": "127.0.1.2"})  # not a fetch: not counted at its address
    tally.add({"t": 1.0, "outcome": "ok", "status": 200, "dl": 0.1, "url": "http://n.test/"})
    assert tally.busiest_addresses(5) == [("127.0.0.3", 30, 3), ("127.0.1.1", 1, 1)]
    many = Tally()
    for n in range(3 * BOUND_EVERY):  # every fetch at an address of its own
        many.add({"t": 1.0, "outcome": "ok", "status": 200, "dl": 0.1,
                  "url": f"http://h{n}.test/", "address": f"10.{n >> 16}.{n >> 8 & 255}.{n & 255}"})
    assert len(many.addresses.counts) <= 2 * LABELS + BOUND_EVERY and many.addresses.pruned


def test_politeness_waits_run_from_the_end_of_a_fetch_to_the_start_of_the_next() -> None:
    tally = Tally()
    for t, dl in ((10.0, 1.0), (13.0, 1.0), (13.5, 0.1)):
        tally.add({"t": t, "outcome": "ok", "status": 200, "dl": dl, "url": "http://a.test/"})
    # Waits of 13 - 1 - 10 = 2 s and 13.5 - 0.1 - 13 = 0.4 s.
    assert sum(tally.waits) == 2 and round(tally.wait_total, 6) == 2.4
    assert tally.waits[WAIT_EDGES.index(0.5)] == 1 and tally.waits[WAIT_EDGES.index(5.0)] == 1
