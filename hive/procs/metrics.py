"""The supervisor's Prometheus endpoint: ``/metrics`` from the workers' latest reports.

Nothing here runs per page. Each turn the supervisor ``publish``es a snapshot
(references to the workers' last stats dicts, which are replaced, never
changed, and a row per process): a few dozen references. A scrape reads the
latest snapshot in the HTTP server's thread and turns it into metric families
(``HiveCollector.collect``); its cost is per scrape, proportional to the stats
keys of the reports. Process figures (resident memory, CPU seconds) are read
from /proc at the scrape, through psutil objects owned by the collector.

Per worker (label ``worker``): pages fetched, bytes, requests, outcomes by
kind, HTTP responses by status class, refusals by reason, URLs admitted and
pending, hosts by state, leases in flight, cookies refused and dropped and the
bytes the cookie jars hold, optional outputs' failures by sink, the scorer's pages by
result and the links that raised queued URLs (hive.frontier.evidence), the fetch-duration histogram
(hive/procs/fetchtimes.py), the politeness wait (until its first waiting host
may go), robots.txt and DNS cache hits and misses, outbox depth, the drain
forecast (hive/procs/hoststatus.py) and the time of the last report; address
politeness (hive/procs/addresses.py): hosts waiting for a grant at their IP
address, in all and by address (label ``address``: the ones with the most
waiting), and the grants the worker gave as an address's owner. Per
process (label ``process``: ``supervisor``, ``splitter``, ``worker-N``):
restarts, resident memory, CPU seconds. A worker's counters that live in its
store (pages, outcomes, refusals, admitted) survive its restarts; those of its
process (bytes, requests, cache hits, durations) start again from zero, which
Prometheus's ``rate`` reads as a counter reset.

The server is prometheus_client's WSGI server in a daemon thread, bound to
``hive.metrics_bind`` (loopback unless ``hive.metrics_allow_remote``, checked
in hive/config.py) on ``hive.metrics_port``; ``close`` shuts it down and joins
its thread.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIServer

import psutil
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from hive.config import HiveConfig
from hive.errors import HiveError
from hive.fetch.sinks import failures
from hive.procs.fetchtimes import BUCKET_KEYS, SUM_KEY

STOP_TIMEOUT = 5.0
Row = tuple[str, str, str]  # (metric name, help, stats key)
# Stats keys read as counters per worker: (metric name, help, key).
COUNTERS: tuple[Row, ...] = (
    ("hive_pages_fetched", "Pages fetched (outcome ok).", "frontier/done/ok"),
    ("hive_fetched_bytes", "Response bodies received, in bytes.", "fetch/bytes"),
    ("hive_requests", "HTTP requests sent, robots.txt included.", "fetch/requests"),
    ("hive_urls_admitted", "URLs admitted to the frontier.", "frontier/admitted"),
    ("hive_dns_cache_hits", "DNS look-ups answered by the cache.", "dns/hits"),
    ("hive_dns_cache_misses", "DNS look-ups that asked the resolver.", "dns/misses"),
    ("hive_robots_cache_misses", "robots.txt rules not in memory or the store.",
     "robots/misses"),
    ("hive_priority_evidence", "Links that added to a queued URL's in-link evidence.",
     "priority/evidence"),
    ("hive_address_grants", "Start slots granted at the IP addresses the worker owns.",
     "address/granted"),
)
# Stats keys read as gauges per worker.
GAUGES: tuple[Row, ...] = (
    ("hive_urls_pending", "URLs waiting to be fetched.", "frontier/pending"),
    ("hive_leases_in_flight", "Leases out to fetch threads.", "worker/in_flight"),
    ("hive_outbox_batches", "Batches of links not yet acknowledged by their owners.",
     "outbox/size"),
    ("hive_cookie_bytes", "Memory the cookie jars account for, in bytes (fetch.cookie_jar_mb).",
     "cookies/bytes"),
    ("hive_hosts_waiting_on_address", "Hosts whose turn came, waiting for a start slot at "
     "their IP address (politeness.ip_concurrency, ip_min_delay).", "address/waiting_hosts"),
)
ADDRESS_PREFIX = "address/waiting/"
# Counters with a second label read from the end of their key: (name, help, label, prefix).
LABELLED = (
    ("hive_outcomes", "URLs ended, by outcome.", "kind", "frontier/done/"),
    ("hive_http_responses", "HTTP responses by status class.", "class", "fetch/status/"),
    ("hive_refusals", "URLs refused, by reason.", "reason", "refusals/"),
    ("hive_cookies_refused", "Set-Cookie values not kept, by reason.", "reason",
     "cookies/refused/"),
    ("hive_cookies_dropped", "Cookies dropped to fit a bound, by bound.", "bound",
     "cookies/dropped/"),
    ("hive_changes", "A recrawl's fetches by what changed since the prior crawls (new, "
     "changed, unchanged, gone, moved).", "change", "changes/"),
    ("hive_scorer_pages", "Pages put to the scorer (priority.scorer), by result: scored, "
     "none, error, timeout, bad_value, off.", "result", "priority/scorer/"),
    ("hive_priority_moves", "Queued URLs moved up by their in-link evidence, by queue.",
     "queue", "priority/moved/"),
)
HOST_STATES = ("bound", "ready", "waiting", "parked")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a scrape reads: the workers' last stats, a (name, pid, restarts) per child
    process, and the supervisor's outbox depth."""

    time: float = 0.0
    reports: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    processes: Sequence[tuple[str, int | None, int]] = ()
    outbox: int = 0


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class HiveCollector:
    """A prometheus_client collector over the latest published Snapshot."""

    def __init__(self) -> None:
        self.snapshot = Snapshot()
        self._lock = threading.Lock()
        self._ps: dict[int, psutil.Process] = {}

    def publish(self, snapshot: Snapshot) -> None:
        """Make ``snapshot`` the one scrapes read (one reference assignment)."""
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snapshot = self.snapshot
        yield from self._workers(snapshot)
        outbox = GaugeMetricFamily("hive_supervisor_outbox_batches",
                                   "Batches of seeds not yet acknowledged by their owners.")
        outbox.add_metric([], snapshot.outbox)
        yield outbox
        with self._lock:  # the server answers scrapes in threads; the psutil cache is shared
            yield from self._processes(snapshot)

    def _workers(self, snapshot: Snapshot) -> Iterator[Metric]:
        reports = sorted(snapshot.reports.items())
        families: list[tuple[type[CounterMetricFamily | GaugeMetricFamily], Row]] = [
            *((CounterMetricFamily, row) for row in COUNTERS),
            *((GaugeMetricFamily, row) for row in GAUGES),
        ]
        for make, (name, text, key) in families:
            family = make(name, text, labels=["worker"])
            for worker, stats in reports:
                value = _number(stats.get(key))
                if value is not None:
                    family.add_metric([str(worker)], value)
            yield family
        for name, text, label, prefix in LABELLED:
            family = CounterMetricFamily(name, text, labels=["worker", label])
            for worker, stats in reports:
                for key, value in stats.items():
                    rest = key[len(prefix):] if key.startswith(prefix) else ""
                    number = _number(value)
                    if rest and "/" not in rest and number is not None:
                        family.add_metric([str(worker), rest], number)
            yield family
        yield from self._worker_figures(snapshot.time, reports)

    def _worker_figures(self, now: float,
                        reports: list[tuple[int, Mapping[str, Any]]]) -> Iterator[Metric]:
        hosts = GaugeMetricFamily("hive_hosts", "Hosts by state (bound ones are ready, "
                                  "waiting or in flight).", labels=["worker", "state"])
        robots = CounterMetricFamily("hive_robots_cache_hits", "robots.txt rules found in "
                                     "memory or the store.", labels=["worker"])
        wait = GaugeMetricFamily("hive_politeness_wait_seconds", "Seconds until the worker's "
                                 "first waiting host may be fetched.", labels=["worker"])
        drain = GaugeMetricFamily("hive_drain_forecast_seconds", "Seconds the worker's slowest "
                                  "host needs to drain at its politeness delay (a lower bound).",
                                  labels=["worker"])
        seen = GaugeMetricFamily("hive_worker_last_report_timestamp_seconds",
                                 "When the worker sent its last report.", labels=["worker"])
        sinks = CounterMetricFamily("hive_sink_failures", "Exchanges an optional output "
                                    "failed to take, by sink.", labels=["worker", "sink"])
        addresses = GaugeMetricFamily(
            "hive_address_waiting_hosts", "Hosts waiting for a start slot, by IP address (the "
            "addresses with the most).", labels=["worker", "address"])
        durations = HistogramMetricFamily(
            "hive_fetch_duration_seconds", "Seconds from lease to the end of the response, "
            "for outcomes that reached the host.", labels=["worker"])
        for worker, stats in reports:
            label = str(worker)
            for state in HOST_STATES:
                value = _number(stats.get(f"frontier/hosts/{state}"))
                if value is not None:
                    hosts.add_metric([label, state], value)
            hits = [_number(stats.get(k)) for k in ("robots/hits", "robots/loads")]
            if all(h is not None for h in hits):
                robots.add_metric([label], sum(h or 0.0 for h in hits))
            until = _number(stats.get("frontier/wait/until"))
            wait.add_metric([label], max(until - now, 0.0) if until is not None else 0.0)
            forecast, at = _number(stats.get("hosts/drain")), _number(stats.get("hosts/time"))
            if forecast is not None and at is not None:
                drain.add_metric([label], max(forecast - max(now - at, 0.0), 0.0))
            for key, value in stats.items():
                number = _number(value)
                if key.startswith(ADDRESS_PREFIX) and number is not None:
                    addresses.add_metric([label, key[len(ADDRESS_PREFIX):]], number)
            for sink, count in failures(stats).items():
                sinks.add_metric([label, sink], count)
            reported = _number(stats.get("hive/time"))
            if reported is not None:
                seen.add_metric([label], reported)
            buckets = [(key.rsplit("/", 1)[1], _number(stats.get(key))) for key in BUCKET_KEYS]
            total = _number(stats.get(SUM_KEY))
            if total is not None and all(n is not None for _, n in buckets):
                durations.add_metric([label], [(b, n or 0.0) for b, n in buckets], total)
        yield from (hosts, robots, wait, drain, sinks, seen, addresses, durations)

    def _processes(self, snapshot: Snapshot) -> Iterator[Metric]:
        restarts = CounterMetricFamily("hive_process_restarts", "Times the supervisor "
                                       "restarted the process.", labels=["process"])
        memory = GaugeMetricFamily("hive_process_resident_memory_bytes", "Resident memory.",
                                   labels=["process"])
        cpu = CounterMetricFamily("hive_process_cpu_seconds", "CPU time, user and system.",
                                  labels=["process"])
        rows: list[tuple[str, int | None, int]] = [("supervisor", os.getpid(), 0)]
        rows += [(name.replace(" ", "-"), pid, n) for name, pid, n in snapshot.processes]
        live: dict[int, psutil.Process] = {}
        for name, pid, count in rows:
            if name != "supervisor":
                restarts.add_metric([name], count)
            if pid is None:
                continue
            process = self._ps.get(pid) or psutil.Process(pid)
            try:
                with process.oneshot():
                    rss, times = process.memory_info().rss, process.cpu_times()
            except psutil.Error:
                continue
            live[pid] = process
            memory.add_metric([name], rss)
            cpu.add_metric([name], times.user + times.system)
        self._ps = live
        yield from (restarts, memory, cpu)


class MetricsServer:
    """``/metrics`` served in a thread of the supervisor (see the module docstring)."""

    def __init__(self, bind: str, port: int) -> None:
        self.collector = HiveCollector()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.collector)
        try:
            self._server: WSGIServer
            self._server, self._thread = start_http_server(port, bind, registry)
        except OSError as exc:
            raise HiveError(f"cannot serve /metrics on {bind} port {port} (hive.metrics_port): "
                            f"{exc.strerror or exc}") from exc
        self.url = f"http://{f'[{bind}]' if ':' in bind else bind}:{port}/metrics"

    def publish(self, reports: Mapping[int, Mapping[str, Any]],
                processes: Sequence[tuple[str, int | None, int]], outbox: int) -> None:
        self.collector.publish(Snapshot(time.time(), reports, processes, outbox))

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(STOP_TIMEOUT)


def serve_metrics(cfg: HiveConfig) -> MetricsServer | None:
    """Start ``/metrics`` as configured; None when ``hive.metrics_port`` is 0 (off)."""
    if not cfg.metrics_port:
        return None
    return MetricsServer(cfg.metrics_bind, cfg.metrics_port)
