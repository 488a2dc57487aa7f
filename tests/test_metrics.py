"""/metrics and ``hive status --hosts`` on a real crawl of the synthetic web: the scraped
figures agree with ``hive status --json`` taken at the same time, counters only grow, and
once all that is left waits on a long Crawl-delay they are equal."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hive.procs.lifecycle import ExitCode
from hive.testweb import Web, WebProcess
from tests.conftest import WEB_ADDRESS, wait_for
from tests.io.test_metrics import Samples, free_port, scrape
from tests.test_hive import Hive, finish

pytestmark = pytest.mark.slow
CRAWL_DELAY = 20.0
MONOTONE = ("_total", "_count", "_sum", "_bucket")


@pytest.fixture
def web(tmp_path: Path) -> Iterator[WebProcess]:
    with WebProcess(Web(seed=5, hosts=12, pages=6, hostile=False,
                        robots_crawl_delay=CRAWL_DELAY),
                    tmp_path / "requests.jsonl", host=WEB_ADDRESS) as server:
        yield server


def per_worker(samples: Samples, name: str) -> dict[str, float]:
    return {dict(labels)["worker"]: value for (n, labels), value in samples.items() if n == name}


def from_status(status: dict[str, Any], key: str) -> dict[str, float]:
    return {row["role"].split()[1]: row["stats"][key] for row in status["processes"]
            if row["role"].startswith("worker ") and key in row.get("stats", {})}


def test_metrics_agree_with_status_during_a_crawl(tmp_path: Path, web: WebProcess) -> None:
    assert web.web.crawl_delay, "the test web needs a host with a Crawl-delay"
    port = free_port()
    hive = Hive(tmp_path, web, politeness={"min_delay": 0.2, "max_delay": 0.3,
                                           "crawl_delay_cap": 2 * CRAWL_DELAY},
                hive={"metrics_port": port})
    url = f"http://127.0.0.1:{port}/metrics"
    process = hive.start(2)
    wait_for(lambda: (hive.status() or {}).get("totals", {}).get("frontier/done/ok"), timeout=60)
    previous: Samples = {}
    rounds = 0
    while True:
        first = scrape(url)
        status = hive.status()
        second = scrape(url)
        assert status is not None
        for key, name in (("frontier/done/ok", "hive_pages_fetched_total"),
                          ("fetch/bytes", "hive_fetched_bytes_total"),
                          ("frontier/admitted", "hive_urls_admitted_total")):
            low, mid, high = per_worker(first, name), from_status(status, key), \
                per_worker(second, name)
            assert set(mid) == {"0", "1"}
            # A worker whose first report came after the first scrape has no sample in it
            # yet: an absent counter is a zero one.
            assert all(low.get(w, 0.0) <= mid[w] <= high[w] for w in mid), \
                (name, low, mid, high)
        for sample, value in second.items():
            if sample[0].endswith(MONOTONE) and sample in previous:
                assert value >= previous[sample], sample
        previous, rounds = second, rounds + 1
        waiting = status.get("waiting")
        if waiting and waiting["until"] - time.time() > 5:
            break
        assert process.poll() is None and rounds < 200, "the crawl should wait on Crawl-delay"
    # All that is left waits on the Crawl-delay hosts: nothing moves, so the figures are equal.
    samples, status = scrape(url), hive.status()
    assert status is not None
    for key, name in (("frontier/done/ok", "hive_pages_fetched_total"),
                      ("frontier/pending", "hive_urls_pending"),
                      ("fetch/bytes", "hive_fetched_bytes_total")):
        assert per_worker(samples, name) == from_status(status, key), name
    total = sum(per_worker(samples, "hive_pages_fetched_total").values())
    assert total == status["totals"]["frontier/done/ok"] > 0
    assert sum(per_worker(samples, "hive_fetch_duration_seconds_count").values()) > 0
    assert sum(v for (n, _), v in samples.items() if n == "hive_http_responses_total") > 0
    assert all(per_worker(samples, "hive_politeness_wait_seconds")[w] > 0
               for w, n in from_status(status, "frontier/pending").items() if n)
    # Hosts at a glance: the Crawl-delay hosts hold what is pending, each at its delay. A
    # worker looks at its hosts every few seconds (hive/procs/hoststatus.py): wait for a
    # look taken after the rest went quiet.
    delayed = {f"{name}:{web.port}" for name in web.web.crawl_delay}

    def pending_hosts() -> list[dict[str, Any]] | None:
        status = hive.status() or {}
        rows = [row for row in status.get("hosts", {}).get("top", []) if row["pending"]]
        return rows if rows and {row["host"] for row in rows} <= delayed else None

    top = wait_for(pending_hosts, timeout=15, interval=0.5)
    samples, status = scrape(url), hive.status()
    assert top and status is not None, status
    hosts = status["hosts"]
    assert sum(row["pending"] for row in top) == status["totals"]["frontier/pending"]
    for row in top:
        assert row["delay"] == CRAWL_DELAY and row["state"] in ("waiting", "parked")
        assert from_status(status, "frontier/pending")[str(row["worker"])] >= row["pending"]
    assert hosts["forecast"]["seconds"] >= max(row["pending"] for row in top) * CRAWL_DELAY
    assert hosts["forecast"]["host"] in delayed
    forecast = max(per_worker(samples, "hive_drain_forecast_seconds").values())
    assert abs(forecast - hosts["forecast"]["seconds"]) < 10
    table = hive.run("status", "--hosts", "3")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("host ")))
    assert lines[head + 1].split()[0] == top[0]["host"]
    assert any(line.startswith("drain ≥ ") for line in lines[head:])
    assert "drain ≥ " in table.stdout.split("\n\n")[0], "the status notes say it too"
    short = json.loads(hive.run("status", "--json", "--hosts", "1").stdout)
    assert len(short["hosts"]["top"]) == 1 and short["metrics"] == url
    assert hive.run("stop").returncode == 0
    finish(process, code=ExitCode.STOPPED)
    with pytest.raises(OSError):
        scrape(url)
