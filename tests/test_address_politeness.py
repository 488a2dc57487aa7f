"""Politeness per IP address across the whole hive, measured at the server.

The test web listens at several loopback addresses: most of its hosts share one
(a shared server of virtual hosts), the rest are spread two to an address. A
``hive start --procs 4`` crawl (and one across a kill -9 of the shared
address's owner) must keep, at each address the server listened at, at most
``ip_concurrency`` requests in flight and at most ``(1 + ip_grant_hold) /
ip_min_delay + 1`` starts in any second; every page fetched, no host's gap below
its delay, nothing fetched twice beyond what a kill repeats.
"""

from __future__ import annotations

import math
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive.core.ring import Ring
from hive.testweb import Web, WebProcess
from hive.testweb.requestlog import address_violations, busiest_second
from tests.conftest import WEB_ADDRESS, wait_for
from tests.test_hive import Hive, check_crawl, finish

pytestmark = pytest.mark.slow
SHARED = "127.0.0.3"
SPREAD = tuple(f"127.0.0.{i}" for i in range(4, 14))
SHARED_HOSTS = 80
CONCURRENCY = 2
MIN_DELAY = 0.05
HOLD = 0.25
# Server stamps are when a request arrived, not when the crawler sent it: a start may
# arrive a little late and bunch with the next, by one request at most within a second.
JITTER = 1


def starts_bound() -> int:
    return math.floor((1 + HOLD) / MIN_DELAY) + 1 + JITTER


@pytest.fixture
def web(tmp_path: Path) -> Iterator[WebProcess]:
    with WebProcess(Web(seed=9, hosts=SHARED_HOSTS + 2 * len(SPREAD), pages=2, hostile=False),
                    tmp_path / "requests.jsonl", host=WEB_ADDRESS,
                    also=(SHARED, *SPREAD)) as server:
        yield server


def addresses_of(web: WebProcess) -> dict[str, str]:
    names = web.web.names
    placed = dict.fromkeys(names[:SHARED_HOSTS], SHARED)
    for i, name in enumerate(names[SHARED_HOSTS:]):
        placed[name] = SPREAD[i // 2]
    return placed


def hive_for(tmp_path: Path, web: WebProcess) -> Hive:
    placed = addresses_of(web)
    return Hive(
        tmp_path, web,
        dns={"resolve": [f"{name}={address}" for name, address in placed.items()],
             "allow_nets": [f"{address}/32" for address in (SHARED, *SPREAD)]},
        politeness={"ip_concurrency": CONCURRENCY, "ip_min_delay": MIN_DELAY,
                    "ip_grant_hold": HOLD},
    )


def check_addresses(web: WebProcess) -> None:
    requests = web.requests
    assert {r.server for r in requests} == {SHARED, *SPREAD}
    assert address_violations(requests, CONCURRENCY, starts_bound()) == []
    assert busiest_second(requests)[SHARED] >= 0.5 / MIN_DELAY  # and the limit is used


def test_four_workers_keep_every_address_within_its_limits(tmp_path: Path,
                                                           web: WebProcess) -> None:
    hive = hive_for(tmp_path, web)
    process = hive.start(4)

    def held_back() -> bool:
        shown = hive.run("status", "--hosts", "5")
        return f"held back by their address {SHARED}:" in shown.stdout

    wait_for(held_back, timeout=60, interval=0.5)
    finish(process, timeout=180)
    check_crawl(web, data=hive.data)
    check_addresses(web)


def test_the_limits_hold_across_a_kill_of_the_shared_address_owner(
        tmp_path: Path, web: WebProcess) -> None:
    hive = hive_for(tmp_path, web)
    process = hive.start(4)
    wait_for(lambda: len(web.requests) > 60, timeout=60)
    owner = Ring.from_params(hive.state()["ring"]).owner(SHARED)
    victim = hive.pid(f"worker {owner}")
    assert victim is not None
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: hive.pid(f"worker {owner}") not in (None, victim), timeout=30)
    finish(process, timeout=240)
    check_crawl(web, allowed_repeats=2 * 8, data=hive.data)
    check_addresses(web)
