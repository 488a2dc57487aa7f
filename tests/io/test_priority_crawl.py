"""A queued URL rises as links to it arrive and is fetched earlier, as the server sees it,
across a kill -9 of its worker; the scorer's scores reach the crawl log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hive import config
from hive.core.urls import fingerprint, host_hash, host_key
from hive.frontier.verify import verify_store
from hive.procs.worker import Worker
from hive.storage.modes import read_only
from hive.storage.schema import Pending, pending, url_key
from hive.testweb import Web, duplicates, serve
from hive.testweb.powerlaw import PowerWeb
from tests.conftest import WEB_ADDRESS, crawl_config, wait_for

pytestmark = pytest.mark.slow

# pl000 waits 1 s between fetches (its robots.txt's Crawl-delay) while the other hosts'
# pages, 50 ms apart, link to its pages.
WEB = PowerWeb(seed=4, hosts=8, pages=8, links=5, alpha=1.1, crawl_delay=1.0)
CHILD = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from hive import config
    from hive.procs.worker import Worker
    cfg = config.from_dict(json.loads(Path(sys.argv[1]).read_text()))
    worker = Worker(cfg, Path(sys.argv[2]), log_dir=Path(sys.argv[3]))
    worker.add(json.loads(sys.argv[4]), time.time())
    worker.run_until_idle(timeout=60)
    """
)


def target_and_others() -> tuple[int, list[int]]:
    """pl000's page most linked from other hosts (not its first), and its pages before it
    that no other host links to (page order, which first come first served keeps)."""
    pages = range(1, WEB.pages)
    target = max(pages, key=lambda n: (WEB.linking_hosts(n), n))
    others = [n for n in pages if n < target and WEB.linking_hosts(n) <= 1]
    assert WEB.linking_hosts(target) >= 4 and others, (target, others)
    return target, others


def state(store: Path, url: str) -> Pending | None:
    key = url_key(host_hash(host_key(url)), fingerprint(url))
    with read_only(store, live=True) as txn:
        found = txn.get("urls", key)
    return None if found is None else pending(found)


def risen(store: Path, url: str) -> Pending | None:
    if not (store / "data.mdb").exists():
        return None
    found = state(store, url)
    return found if found and found.level < found.base and found.linkers.bit_count() >= 4 else None


def test_a_url_rises_and_is_fetched_first_across_a_kill_nine(tmp_path: Path) -> None:
    target, others = target_and_others()
    store, logs = tmp_path / "store", tmp_path / "logs"
    with serve(Web(hosts=1, hostile=False), WEB_ADDRESS, power=WEB) as server:
        cfg = crawl_config(
            server, scope={"mode": "any"}, politeness={"crawl_delay_cap": 2.0},  # type: ignore[arg-type]
            priority={"scorer": "hive.fetch.scoring:text_quality", "inlink_levels": 1.0},
        )
        url = WEB.url(target, server.port)
        (tmp_path / "cfg.json").write_text(json.dumps(cfg.to_dict()))
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(tmp_path / "cfg.json"), str(store), str(logs),
             json.dumps(WEB.seeds(server.port))], env=env)
        try:
            before = wait_for(lambda: risen(store, url), timeout=20)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        killed = time.time()
        # Killed before pl000 fetched its home (1 s after its robots.txt): the URL waited,
        # risen, and its evidence is on disk.
        path = f"/p/{target}.html"
        assert not [r for r in server.requests if r.path == path and r.hostname == WEB.names[0]]
        after = state(store, url)
        assert after is not None and after.level == before.level
        assert after.linkers & before.linkers == before.linkers
        report = verify_store(store)
        assert report.ok, report.summary()

        worker = Worker(config.from_dict(cfg.to_dict()), store, log_dir=logs)
        try:
            worker.add(WEB.seeds(server.port), time.time())
            deadline = time.monotonic() + 30
            while not any(r.path == path and r.hostname == WEB.names[0]
                          for r in server.requests):
                assert time.monotonic() < deadline, "the risen URL was never fetched"
                worker.wait(worker.loop_once(time.time()))
            worker.drain()
        finally:
            worker.close()
        requests = server.requests
    # At the server: pl000's risen page came before its pages no other host links to,
    # which come before it in page order; nothing was fetched twice.
    first = {r.path: r.start for r in reversed(requests) if r.hostname == WEB.names[0]}
    late = [n for n in others if f"/p/{n}.html" in first and first[f"/p/{n}.html"] < first[path]]
    assert late == [], f"fetched before the risen page {target}: {late}"
    # Fetched twice: only what was in flight at the kill (its outcome never committed).
    twice = duplicates(requests)
    assert all(n == 2 for n in twice.values()), twice
    assert all(min(r.start for r in requests if r.url == url) < killed for url in twice), twice
    lines = [json.loads(line) for log in logs.glob("crawl-*.jsonl")
             for line in log.read_text().splitlines()]
    scored = [line for line in lines if "score" in line]
    assert scored and all(0.0 <= line["score"] <= 1.0 for line in scored)
    assert not [line for line in lines if "scorer" in line], "the example scorer never fails"
