"""A slow owner is not a dead one; a hung one is restarted. Real hives, real signals.

A worker stopped with SIGSTOP keeps its hosts and its inbox: its peers' link
batches wait unacknowledged. They must be resent for as long as it takes (not
quarantined after a few tries, which lost 532 links when a worker was paused
for 330 s), and the supervisor must notice the silence and restart it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from hive.core.ring import Ring
from hive.storage.store import Store
from hive.testweb import WebProcess
from tests.conftest import WEB_ADDRESS, wait_for
from tests.test_hive import Hive, check_crawl, finish, web  # noqa: F401  (web is a fixture)

pytestmark = pytest.mark.slow


def test_links_for_a_paused_worker_wait_for_it_and_are_not_given_up(
    tmp_path: Path, web: WebProcess  # noqa: F811
) -> None:
    hive = Hive(tmp_path, web, hive={"resend_after": 0.1, "max_tries": 2, "hung_after": 600.0})
    process = hive.start(2)
    wait_for(lambda: len(web.requests) > 20, timeout=30)
    # Not the owner of the web's one address: its peer must go on fetching (and finding
    # links for it), which a paused owner of the address it fetches at would stop.
    paused = f"worker {1 - Ring.from_params(hive.state()['ring']).owner(WEB_ADDRESS)}"
    victim = hive.pid(paused)
    assert victim is not None
    os.kill(victim, signal.SIGSTOP)
    try:
        # Long enough for old hives to give up: tries at 0.1, 0.2, 0.4 ... s.
        wait_for(lambda: (hive.status() or {}).get("totals", {}).get("outbox/size", 0) > 0
                 and _overdue(hive) > 0, timeout=30)
    finally:
        os.kill(victim, signal.SIGCONT)
    finish(process)
    assert hive.pid(paused) == victim, "a slow worker is not restarted"
    check_crawl(web, data=hive.data)
    result = hive.run("verify")
    assert result.returncode == 0, result.stdout + result.stderr
    for worker in ("worker-00", "worker-01"):
        store = Store(hive.data / worker)
        try:
            assert store.entries("quarantine") == 0, f"{worker} gave up on a slow owner"
        finally:
            store.close(0.0)


def _overdue(hive: Hive) -> int:
    status = hive.status() or {}
    return sum(row.get("stats", {}).get("outbox/overdue", 0) for row in status.get("processes", []))


def test_a_worker_whose_reports_stop_is_restarted(
    tmp_path: Path, web: WebProcess  # noqa: F811
) -> None:
    hive = Hive(tmp_path, web, hive={"hung_after": 3.0})
    process = hive.start(2)
    wait_for(lambda: len(web.requests) > 20, timeout=30)
    victim = hive.pid("worker 0")
    assert victim is not None
    os.kill(victim, signal.SIGSTOP)
    wait_for(lambda: hive.pid("worker 0") not in (None, victim), timeout=30)
    finish(process)
    check_crawl(web, data=hive.data, allowed_repeats=2 * 8)
    log = (hive.data / "logs" / "supervisor.log").read_text()
    assert "worker 0 sent no report for" in log
