"""The /metrics server over real HTTP on loopback: what a snapshot exposes, a clean shutdown,
a port in use named."""

from __future__ import annotations

import os
import socket
import time
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hive.errors import HiveError
from hive.outcome import Outcome
from hive.procs.fetchtimes import FetchTimes
from hive.procs.metrics import MetricsServer

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture
def server() -> Iterator[MetricsServer]:
    metrics = MetricsServer("127.0.0.1", free_port())
    yield metrics
    metrics.close()


def a_report(now: float) -> dict[str, float]:
    times = FetchTimes()
    for seconds in (0.02, 0.3, 4.0):
        times.observe(seconds, Outcome("ok", 200))
    return {
        "frontier/done/ok": 3, "frontier/done/http_404": 1, "fetch/bytes": 5000,
        "fetch/requests": 5, "frontier/pending": 7, "worker/in_flight": 2,
        "frontier/hosts/bound": 4, "frontier/hosts/ready": 1, "frontier/hosts/waiting": 2,
        "frontier/hosts/parked": 9, "refusals/max_depth": 6, "refusals/max_depth/a.test": 6,
        "robots/hits": 10, "robots/loads": 2, "robots/misses": 3, "dns/hits": 8,
        "dns/misses": 2, "outbox/size": 1, "frontier/wait/until": now + 30,
        "hosts/time": now, "hosts/drain": 120.0, "hive/time": now, **times.stats(),
        "cookies/refused/too_large": 49, "cookies/dropped/header_bytes": 3,
        "cookies/bytes": 9000, "priority/evidence": 40, "priority/moved/back": 7,
        "priority/scorer/scored": 11, "priority/scorer/timeout": 2,
        "address/waiting_hosts": 5, "address/waiting/192.0.2.7": 4,
        "address/waiting/192.0.2.9": 1, "address/granted": 30,
    }


def test_a_snapshot_is_exposed_with_prometheus_names(server: MetricsServer) -> None:
    pid = os.getpid()
    before = scrape(server.url)
    assert ("hive_supervisor_outbox_batches", ()) in before
    assert not any(name == "hive_pages_fetched_total" for name, _ in before)
    now = time.time()
    server.publish({0: a_report(now), 1: {}}, [("worker 0", pid, 2), ("splitter", None, 0)], 4)
    got = scrape(server.url)
    w0 = (("worker", "0"),)
    assert got[("hive_pages_fetched_total", w0)] == 3
    assert got[("hive_fetched_bytes_total", w0)] == 5000
    assert got[("hive_outcomes_total", (("kind", "http_404"), ("worker", "0")))] == 1
    assert got[("hive_refusals_total", (("reason", "max_depth"), ("worker", "0")))] == 6
    assert not any(k[0] == "hive_refusals_total" and ("reason", "max_depth/a.test") in k[1]
                   for k in got), "the per-host split is not a reason"
    assert got[("hive_http_responses_total", (("class", "2xx"), ("worker", "0")))] == 3
    assert got[("hive_urls_pending", w0)] == 7
    assert got[("hive_hosts", (("state", "parked"), ("worker", "0")))] == 9
    assert got[("hive_leases_in_flight", w0)] == 2
    assert got[("hive_robots_cache_hits_total", w0)] == 12
    assert got[("hive_dns_cache_misses_total", w0)] == 2
    assert got[("hive_outbox_batches", w0)] == 1
    assert got[("hive_cookies_refused_total", (("reason", "too_large"), ("worker", "0")))] == 49
    assert got[("hive_cookies_dropped_total", (("bound", "header_bytes"), ("worker", "0")))] == 3
    assert got[("hive_cookie_bytes", w0)] == 9000
    assert got[("hive_priority_evidence_total", w0)] == 40
    assert got[("hive_priority_moves_total", (("queue", "back"), ("worker", "0")))] == 7
    assert got[("hive_scorer_pages_total", (("result", "timeout"), ("worker", "0")))] == 2
    assert got[("hive_supervisor_outbox_batches", ())] == 4
    assert got[("hive_hosts_waiting_on_address", w0)] == 5
    assert got[("hive_address_waiting_hosts", (("address", "192.0.2.7"), ("worker", "0")))] == 4
    assert got[("hive_address_grants_total", w0)] == 30
    assert 0 < got[("hive_politeness_wait_seconds", w0)] <= 30
    assert 0 < got[("hive_drain_forecast_seconds", w0)] <= 120
    assert got[("hive_fetch_duration_seconds_bucket", (("le", "0.025"), ("worker", "0")))] == 1
    assert got[("hive_fetch_duration_seconds_bucket", (("le", "+Inf"), ("worker", "0")))] == 3
    assert got[("hive_fetch_duration_seconds_count", w0)] == 3
    assert abs(got[("hive_fetch_duration_seconds_sum", w0)] - 4.32) < 1e-9
    assert ("hive_urls_pending", (("worker", "1"),)) not in got, "no report, no figures"
    assert got[("hive_process_restarts_total", (("process", "worker-0"),))] == 2
    assert got[("hive_process_restarts_total", (("process", "splitter"),))] == 0
    for process in ("worker-0", "supervisor"):
        assert got[("hive_process_resident_memory_bytes", (("process", process),))] > 1 << 20
        assert got[("hive_process_cpu_seconds_total", (("process", process),))] > 0
    assert ("hive_process_resident_memory_bytes", (("process", "splitter"),)) not in got


def test_close_stops_serving_and_frees_the_port() -> None:
    port = free_port()
    metrics = MetricsServer("127.0.0.1", port)
    scrape(metrics.url)
    metrics.close()
    assert not metrics._thread.is_alive()
    with pytest.raises(OSError):
        scrape(metrics.url)
    again = MetricsServer("127.0.0.1", port)
    again.close()


def test_a_port_in_use_is_named(server: MetricsServer) -> None:
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(HiveError, match=f"port {port} \\(hive.metrics_port\\)"):
        MetricsServer("127.0.0.1", port)
