"""A connect failure tries the host's next address (hive.fetch.client ``fallbacks``,
hive.fetch.dns.happy_eyeballs): a name resolving to a dead loopback address, then a
live one, is crawled from the live one, politely, with that address in the crawl log
and in the WARC's WARC-IP-Address; with the address limits on, each address tried waits
for a grant of its own."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from hive.fetch.client import Fetcher
from hive.fetch.dns import happy_eyeballs
from hive.outcome import Kind
from hive.procs.worker import Worker
from hive.testweb import Web, WebProcess, as_received, politeness_violations, received
from tests.conftest import WEB_ADDRESS, crawl_config

pytestmark = pytest.mark.slow

# Nothing listens there: a connect is refused at once.
DEAD = "127.0.0.213"
DELAY = 0.1


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebProcess]:
    log = tmp_path_factory.mktemp("fallback") / "requests.jsonl"
    with WebProcess(Web(seed=4, hosts=3, pages=6, hostile=False), log,
                    host=WEB_ADDRESS) as server:
        yield server


@pytest.mark.parametrize(("answer", "order"), [
    (["1.1.1.1", "1.1.1.2", "2001:db8::1", "2001:db8::2", "1.1.1.3"],
     ["1.1.1.1", "2001:db8::1", "1.1.1.2", "2001:db8::2", "1.1.1.3"]),
    (["2001:db8::1", "1.1.1.1", "1.1.1.2"], ["2001:db8::1", "1.1.1.1", "1.1.1.2"]),
    (["1.1.1.1", "1.1.1.2"], ["1.1.1.1", "1.1.1.2"]),
    ([], []),
])
def test_happy_eyeballs_interleaves_the_families(answer: list[str], order: list[str]) -> None:
    assert happy_eyeballs(answer) == order


def test_the_fetcher_tries_the_next_address(web: WebProcess) -> None:
    url = web.url(web.web.names[1], "/")
    two = Fetcher("hive-test", 1.0, 1.0, 5.0, 1 << 20, 1 << 20, 2, connect_attempts=2)
    result = two.fetch(url, DEAD, fallbacks=[WEB_ADDRESS])
    assert (result.outcome, result.status, result.address) == (Kind.OK, 200, WEB_ADDRESS)
    assert two.stats()["fetch/connections/fallbacks"] == 1
    one = Fetcher("hive-test", 1.0, 1.0, 5.0, 1 << 20, 1 << 20, 2, connect_attempts=1)
    failed = one.fetch(url, DEAD, fallbacks=[WEB_ADDRESS])
    assert (failed.outcome, failed.address) == (Kind.CONNECT, DEAD)
    two.close()
    one.close()


def test_a_host_whose_first_address_is_dead_is_crawled_from_the_next(
        web: WebProcess, tmp_path: Path) -> None:
    dual = web.web.names[0]
    cfg = crawl_config(
        web, politeness={"min_delay": DELAY},
        dns={"resolve": [f"{dual}={DEAD},{WEB_ADDRESS}", web.resolve],
             "allow_nets": [f"{WEB_ADDRESS}/32", f"{DEAD}/32"]},
    )
    started = time.time()
    worker = Worker(cfg, tmp_path / "store", warc_dir=tmp_path / "warc", log_dir=tmp_path)
    worker.add(web.seeds(), started)
    assert worker.run_until_idle(timeout=60)
    stats = worker.stats()
    worker.close()
    requests = [r for r in web.requests if r.arrived is not None and r.arrived >= started]
    # Every page of the host reached the live address, and politely.
    fetched = {r.url for r in requests if r.method == "GET"}
    assert web.in_scope_urls() <= fetched
    timed = as_received(requests, received(tmp_path))
    gaps = dict.fromkeys(web.web.names, DELAY) | web.web.crawl_delay
    assert politeness_violations(timed, gaps, tolerance=0.01) == []
    assert stats["address/fallbacks"] >= 1  # the address limits are on (crawl_config)
    log = [json.loads(line) for line in (tmp_path / "crawl-00.jsonl").read_text().splitlines()]
    own = [e for e in log if f"//{dual}" in e["url"]]
    assert own and not [e for e in own if e["outcome"] in ("connect", "timeout")], own
    assert {e.get("address") for e in log if "status" in e and e["status"]} == {WEB_ADDRESS}
    addresses = {}
    for path in (tmp_path / "warc").glob("*.warc.gz"):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type in ("request", "response"):
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    addresses[uri] = record.rec_headers.get_header("WARC-IP-Address")
    mine = {uri: ip for uri, ip in addresses.items() if f"//{dual}" in uri}
    assert mine and set(mine.values()) == {WEB_ADDRESS}, mine


def test_a_fallback_address_waits_for_a_grant_of_its_own(
        web: WebProcess, tmp_path: Path) -> None:
    """Two hosts at a dead address then the live one, a third at the live one only, one
    request at a time and 0.3 s between starts at each address: the live address sees its
    limits held, the first two hosts' requests (each a fallback) included."""
    dual, other, plain = web.web.names[:3]
    gap, hold = 0.3, 0.05
    cfg = crawl_config(
        web, politeness={"min_delay": DELAY, "ip_concurrency": 1, "ip_min_delay": gap,
                         "ip_grant_hold": hold},
        dns={"resolve": [f"{dual}={DEAD},{WEB_ADDRESS}", f"{other}={DEAD},{WEB_ADDRESS}",
                         f"{plain}={WEB_ADDRESS}"],
             "allow_nets": [f"{WEB_ADDRESS}/32", f"{DEAD}/32"]},
    )
    started = time.time()
    worker = Worker(cfg, tmp_path / "store", warc_dir=tmp_path / "warc", log_dir=tmp_path)
    worker.add(web.seeds(), started)
    assert worker.run_until_idle(timeout=60)
    stats = worker.stats()
    worker.close()
    requests = sorted((r for r in web.requests if r.arrived is not None and r.arrived >= started),
                      key=lambda r: r.received)
    assert web.in_scope_urls() <= {r.url for r in requests if r.method == "GET"}
    assert stats["address/fallbacks"] >= 10
    # A start comes within its grant's hold of its time, so starts are gap - hold apart at
    # least (the server's stamps forgiven 0.02 s), and none before the one before ended.
    for before, after in zip(requests, requests[1:], strict=False):
        assert after.received - before.received >= gap - hold - 0.02, (before, after)
        assert after.received >= before.finished - 0.02, (before, after)
