"""Worker reports merged into what ``hive status`` shows: which reports are kept, the totals,
the rate and the status document."""

from __future__ import annotations

from typing import Any

from hive.core import wire
from hive.procs.metrics import HiveCollector
from hive.procs.metrics import Snapshot as MetricsSnapshot
from hive.procs.stats import HiveStats, Process, WorkerReport
from hive.procs.statustext import cookie_note, format_status, sink_note


def report(worker: int, number: int, sent: float = 0.0, **stats: Any) -> WorkerReport:
    return WorkerReport(worker, number, False, sent, sent + 0.5, stats)


def test_a_report_is_read_from_its_message() -> None:
    message = wire.Stats(3, {"hive/report": 7, "hive/idle": True, "hive/time": 12.5, "x": 1})
    got = WorkerReport.from_message(message, 13.0)
    assert got == WorkerReport(3, 7, True, 12.5, 13.0, dict(message.values))
    assert WorkerReport.from_message(wire.Stats(3, {"hive/report": "7"}), 1.0) is None
    assert WorkerReport.from_message(wire.Stats(3, {"x": 1}), 1.0) is None


def test_only_the_newest_report_of_a_known_worker_is_kept() -> None:
    stats = HiveStats(range(2))
    assert stats.take(report(0, 2, a=2))
    assert not stats.take(report(0, 1, a=1)), "out of order"
    assert not stats.take(report(0, 2, a=3)), "the same number again"
    assert not stats.take(report(5, 1)), "no such worker"
    assert stats.reports[0].stats == {"a": 2} and list(stats.reports) == [0]
    assert stats.last_heard(0) == 0.5 and stats.last_heard(1) == 0.0


def test_after_a_restart_the_dead_process_reports_are_stale() -> None:
    stats = HiveStats(range(1))
    assert stats.take(report(0, 40, sent=9.0))
    stats.restarted(0, 10.0)
    assert not stats.reporting and stats.last_heard(0) == 0.0
    assert not stats.take(report(0, 41, sent=9.5)), "sent before it died, arrived late"
    assert stats.take(report(0, 1, sent=11.0)), "the new process counts from 1"
    assert stats.take(report(0, 2, sent=12.0))


def test_totals_sum_the_workers_and_count_errors() -> None:
    stats = HiveStats(range(2))
    stats.take(report(0, 1, **{"frontier/pending": 4, "frontier/done/ok": 5,
                               "frontier/done/http_404": 2, "frontier/done/robots": 1,
                               "refusals/max_depth": 3}))
    stats.take(report(1, 1, **{"frontier/pending": 1, "frontier/done/dns": 1,
                               "worker/in_flight": 2}))
    totals = stats.totals()
    assert totals["frontier/pending"] == 5 and totals["worker/in_flight"] == 2
    assert totals["fetched"] == 9 and totals["errors"] == 3 and totals["refused"] == 3
    assert totals["pages_this_start"] == 5 and totals["pages_per_s"] == 0.0


def test_the_rate_is_the_pages_of_this_start_over_the_window() -> None:
    stats = HiveStats(range(1), {0: 100})
    stats.sample(1000.0)
    stats.take(report(0, 1, **{"frontier/done/ok": 130}))
    stats.sample(1000.5)  # within a second of the last sample: not taken
    stats.sample(1010.0)
    assert stats.rate() == 3.0
    for t in range(1011, 1200):
        stats.sample(float(t))
    assert stats.rate() == 0.0, "the pages are older than the window"


def test_the_status_document_carries_each_workers_report() -> None:
    stats = HiveStats(range(2))
    stats.take(WorkerReport(1, 1, True, 0.0, 0.0, {"frontier/done/http_500": 2}))
    rows: list[tuple[Process, int | None]] = [
        ({"role": "splitter", "pid": 10, "alive": True, "cpu": 1.0}, None),
        ({"role": "worker 0", "pid": 11, "alive": True, "cpu": None}, 0),
        ({"role": "worker 1", "pid": 12, "alive": True, "cpu": None}, 1),
    ]
    status = stats.status(rows, data_dir="/d", started=1.0, stopping=False, cpu_window=10.0,
                          fetch_total_timeout=30.0, outbox=0, bad_messages=2, resize=None,
                          hosts={"hosts/drain": 0.0}, metrics=None)
    splitter, worker0, worker1 = status["processes"]
    assert splitter == {"role": "splitter", "pid": 10, "alive": True, "cpu": 1.0}
    assert worker0["stats"] == {} and worker0["idle"] is False and worker0["errors"] == 0
    assert worker1["stats"] == {"frontier/done/http_500": 2} and worker1["idle"] is True
    assert worker1["errors"] == 2
    assert status["procs"] == 2 and status["bad_messages"] == 2 and status["waiting"] is None
    assert status["totals"]["errors"] == 2


def test_cookies_refused_or_dropped_are_a_status_note() -> None:
    quiet = {"cookies/kept": 4, "cookies/bytes": 5000}
    assert cookie_note([quiet, {}]) == ""
    busy = {"cookies/refused/too_large": 9000, "cookies/dropped/header_bytes": 48,
            "cookies/bytes": 1 << 20}
    other = {"cookies/refused/too_large": 800, "cookies/refused/policy": 2,
             "cookies/bytes": 1 << 19}
    note = cookie_note([busy, other])
    assert note == ("cookies: 9,802 refused (too_large 9,800, policy 2); "
                    "48 dropped (header_bytes 48); 1.5 MiB held")
    status = {"processes": [{"role": "worker-0", "stats": busy}],
              "totals": {"pages_per_s": 0.0}}
    assert "cookies: 9,000 refused (too_large 9,000)" in format_status(status, 200, 0.0)


def test_a_failing_optional_output_is_a_status_note_and_a_metric() -> None:
    quiet = {"role": "worker-00", "stats": {"sinks/text/failed": 0, "frontier/done/ok": 3}}
    assert sink_note([quiet, {"role": "splitter"}]) == ""
    rows = [{"role": "worker-00", "stats": {"sinks/text/failed": 12, "sinks/extra/failed": 1}},
            {"role": "worker-01", "stats": {"sinks/text/failed": 3}}]
    assert sink_note(rows) == ("outputs failing: extra 1 (worker-00 1); text 15 (worker-00 12, "
                               "worker-01 3); their pages are missing from that output "
                               "(see each worker's log)")
    status = {"processes": rows, "totals": {"pages_per_s": 0.0}}
    assert "outputs failing: extra 1" in format_status(status, 200, 0.0)
    collector = HiveCollector()
    collector.publish(MetricsSnapshot(time=1.0, reports={0: rows[0]["stats"],
                                                         1: rows[1]["stats"]}))
    family = next(f for f in collector.collect() if f.name == "hive_sink_failures")
    assert sorted((s.labels["worker"], s.labels["sink"], s.value) for s in family.samples
                  if s.name == "hive_sink_failures_total") == [
        ("0", "extra", 1.0), ("0", "text", 12.0), ("1", "text", 3.0)]


def test_a_recrawls_not_modified_pages_count_as_pages() -> None:
    stats = HiveStats([0], {0: 3})
    stats.take(WorkerReport(0, 1, False, 0.0, 0.0, {"frontier/done/ok": 5,
                                                      "frontier/done/not_modified": 4}))
    assert stats.pages_this_start == 6


def test_a_recrawls_changes_are_a_metric() -> None:
    collector = HiveCollector()
    collector.publish(MetricsSnapshot(time=1.0, reports={
        0: {"changes/changed": 3, "changes/unchanged": 40}, 1: {"changes/gone": 1}}))
    family = next(f for f in collector.collect() if f.name == "hive_changes")
    assert sorted((s.labels["worker"], s.labels["change"], s.value) for s in family.samples
                  if s.name == "hive_changes_total") == [
        ("0", "changed", 3.0), ("0", "unchanged", 40.0), ("1", "gone", 1.0)]
