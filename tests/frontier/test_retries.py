"""A URL's retries as the server sees them: broken pages do not hold their host.

One host of the test web (``Web(broken=k)``: k pages answering 500 for ever),
served by a process of its own, crawled by a real worker; the assertions are
made on the server's request log. Before, a page to be retried stayed at the
head of its host's queue and the host waited out each back-off, so a host with
k broken pages took the sum of their retry chains on top of its pages.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hive.frontier.verify import verify_store
from hive.procs.worker import Worker
from hive.storage.modes import read_only
from hive.testweb import Web, WebProcess
from hive.testweb.requestlog import Request, as_received, politeness_violations, received
from tests.conftest import WEB_ADDRESS, crawl_config, wait_for

DELAY = 0.05
BACKOFF = 0.5
RETRIES = 2
PAGES = 30
BROKEN = 5
# A broken page's retry chain: BACKOFF, then 2 × BACKOFF.
CHAIN = BACKOFF * (2**RETRIES - 1)


def sections() -> dict[str, dict[str, Any]]:
    return {
        "politeness": {"min_delay": DELAY, "max_delay": DELAY, "backoff_base": BACKOFF,
                       "backoff_max": 10.0},
        "frontier": {"max_retries": RETRIES, "max_urls_per_host": 1000},
        "fetch": {"threads": 2},
        "warc": {"enabled": False},
    }


def web(broken: int) -> Web:
    return Web(seed=5, hosts=1, pages=PAGES, links=5, hostile=False, broken=broken)


def crawl(tmp_path: Path, broken: int) -> tuple[list[Request], Path]:
    """Crawl the one-host web with ``broken`` broken pages; its request log and crawl logs."""
    work = tmp_path / f"broken-{broken}"
    work.mkdir()
    with WebProcess(web(broken), work / "requests.jsonl", host=WEB_ADDRESS) as server:
        worker = Worker(crawl_config(server, **sections()), work / "store", log_dir=work)
        try:
            worker.add(server.seeds(), time.time())
            assert worker.run_until_idle(60.0), worker.stats()
            sent = worker.stats()["fetch/requests"]
        finally:
            worker.close()
        wait_for(lambda: len(server.requests) >= sent)
        return server.requests, work


def span(requests: list[Request]) -> float:
    return max(r.end for r in requests) - min(r.start for r in requests)


def test_broken_pages_cost_their_host_the_longest_chain_not_the_sum(tmp_path: Path) -> None:
    """k broken pages among n: the host finishes in about n × delay plus the longest retry
    chain. Measured against the same host without them, on the same machine: the broken
    pages add their requests and at most about one chain (here 15 × 0.05 + 1.5 s), where
    waiting out each chain in turn added the sum (7.5 s) and more."""
    plain, _ = crawl(tmp_path, 0)
    requests, logs = crawl(tmp_path, BROKEN)
    broken = Counter(r.path for r in requests if r.status == 500)
    assert broken == {f"/broken/{i}.html": RETRIES + 1 for i in range(BROKEN)}
    assert Counter(r.path for r in requests if r.status != 500) == Counter(
        r.path for r in plain
    ), "every other page once, as without the broken ones"
    assert politeness_violations(as_received(requests, received(logs)), DELAY) == []
    for path in broken:
        tries = sorted(r.start for r in requests if r.path == path)
        assert tries[1] - tries[0] >= BACKOFF and tries[2] - tries[1] >= 2 * BACKOFF, tries
    added = span(requests) - span(plain)
    expected = BROKEN * (RETRIES + 1) * DELAY + CHAIN
    assert added < 2 * expected < BROKEN * CHAIN, (added, span(plain))


CHILD = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from hive import config
    from hive.procs.worker import Worker

    store, logs, seed, sections = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    cfg = config.load(environ={}).replace(**json.loads(sections))
    worker = Worker(cfg, store, log_dir=logs)
    worker.add([seed], time.time())
    done = worker.run_until_idle(60.0)
    worker.close()
    sys.exit(0 if done else 3)
    """
)


def retrying(store: Path) -> int:
    """Retries committed in a running worker's store."""
    if not (store / "data.mdb").exists():
        return 0
    with read_only(store, live=True) as txn:
        return txn.entries("retries")


def test_retries_survive_kill_nine_of_the_worker(tmp_path: Path) -> None:
    """kill -9 the worker while broken pages wait for their retries, start it again: every
    broken page still gets all its tries, each its back-off after the one before, politely;
    a page is asked once more at most (the one fetch in flight on the host when it died,
    asked again after the host's delay)."""
    store, logs = tmp_path / "store", tmp_path / "logs"
    logs.mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with WebProcess(web(BROKEN), tmp_path / "requests.jsonl", host=WEB_ADDRESS) as server:
        cfg = sections()
        cfg["dns"] = {"resolve": [server.resolve], "allow_nets": [f"{WEB_ADDRESS}/32"]}
        cfg["fetch"] |= {"connect_timeout": 1.0, "read_timeout": 1.0, "total_timeout": 2.0}
        command = [sys.executable, "-c", CHILD, str(store), str(logs), server.seeds()[0],
                   json.dumps(cfg)]
        child = subprocess.Popen(command, env=env)
        try:
            wait_for(lambda: retrying(store) >= 2 or child.poll() is not None, timeout=30.0)
            child.send_signal(signal.SIGKILL)
        finally:
            child.wait(timeout=10)
        assert child.returncode == -signal.SIGKILL, "the crawl ended before the kill"
        killed_with = retrying(store)
        assert killed_with >= 2
        again = subprocess.run(command, env=env, timeout=90)
        assert again.returncode == 0
        requests = server.requests
    tries = Counter(r.path for r in requests if r.status == 500)
    assert set(tries) == {f"/broken/{i}.html" for i in range(BROKEN)}
    assert all(n >= RETRIES + 1 for n in tries.values()), tries
    asked = Counter(r.path for r in requests if r.path != "/robots.txt")
    expected = PAGES + BROKEN * (RETRIES + 1)
    assert expected <= sum(asked.values()) <= expected + 1, asked
    for path in tries:
        starts = sorted(r.start for r in requests if r.path == path)
        gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
        assert sum(gap >= BACKOFF for gap in gaps) >= RETRIES, starts
    assert politeness_violations(as_received(requests, received(logs)), DELAY) == []
    report = verify_store(store)
    assert report.ok, report.summary()
    assert report.counts["urls/pending"] == 0 and report.counts["retries"] == 0
