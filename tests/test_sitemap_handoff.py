"""A sitemap on another host goes to that host's owner, end to end: ``hive start --procs 2``.

Host A (``sm-cross-named``) names in its robots.txt a sitemap on host B
(``sm-cross``), and the ring seed is chosen so that A and B belong to different
workers. A's owner reads A's robots.txt and hands the sitemap on; the splitter
must bring it to B's owner, which fetches it (after B's robots.txt, politely,
once, though B's robots.txt names it too) and hands on what it lists: A's pages
(allowed, A's robots.txt vouches for the sitemap) back to A's owner, and
``sm-cross-unnamed``'s (refused: its robots.txt names nothing) to theirs. At the
server: exactly those fetches, politely; in the crawl logs: who fetched what.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hive.core.ring import Ring
from hive.testweb import Web, WebProcess, as_received, duplicates, politeness_violations, received
from tests.conftest import WEB_ADDRESS, crawl_config
from tests.test_hive import DELAY, STAMP_SKEW, Hive, finish

pytestmark = pytest.mark.slow
PROCS = 2


@pytest.fixture
def web(tmp_path: Path) -> Iterator[WebProcess]:
    with WebProcess(Web(seed=5, hosts=1, pages=1, hostile=False), tmp_path / "requests.jsonl",
                    host=WEB_ADDRESS, sitemaps=True) as server:
        yield server


def split_seed(a: str, b: str, vnodes: int) -> int:
    """The first ring seed under which host keys a and b have different owners."""
    return next(seed for seed in range(1000) if Ring(PROCS, vnodes, seed).owner(a)
                != Ring(PROCS, vnodes, seed).owner(b))


def crawl_log(data: Path, worker: int) -> list[dict[str, Any]]:
    path = data / "logs" / f"crawl-{worker:02d}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_sitemap_on_another_host_goes_to_its_owner(tmp_path: Path, web: WebProcess) -> None:
    sm = web.sitemaps
    assert sm is not None
    a, b, c = (f"{sm.host(kind)}:{web.port}" for kind in ("cross-named", "cross", "cross-unnamed"))
    sitemap = sm.url("cross", "/sitemap.xml")
    assert sm.robots_sitemaps("cross-named") == [sitemap] == sm.robots_sitemaps("cross")
    vnodes = crawl_config(web).hive.vnodes
    seed = split_seed(a, b, vnodes)
    ring = Ring(PROCS, vnodes, seed)
    owner_a, owner_b, owner_c = ring.owner(a), ring.owner(b), ring.owner(c)
    assert owner_a != owner_b
    hive = Hive(tmp_path, web, hive={"ring_seed": seed, "vnodes": vnodes})
    hive.seeds.write_text(sm.url("cross-named", "/") + "\n")
    finish(hive.start(PROCS), timeout=60)

    requests = [r for r in web.requests if r.hostname.startswith("sm-")]
    allowed = [u for u in sm.listed("cross") if "cross-named" in u]
    assert {r.url for r in requests} == {
        sm.url("cross-named", "/robots.txt"), sm.url("cross-named", "/"), *allowed,
        sm.url("cross", "/robots.txt"), sitemap, sm.url("cross-unnamed", "/robots.txt"),
    }
    assert [r.url for r in requests].count(sitemap) == 1
    assert duplicates(requests) == {}
    timed = as_received(requests, received(hive.data / "logs"))
    assert politeness_violations(timed, DELAY, tolerance=STAMP_SKEW) == []
    # Who fetched what: B's sitemap at B's owner, the pages it lists at their hosts' owners.
    logs = {w: crawl_log(hive.data, w) for w in range(PROCS)}
    where = {(line["url"], line["outcome"]): w for w, lines in logs.items() for line in lines}
    assert where.get((sitemap, "sitemap_ok")) == owner_b, logs
    assert all(where.get((url, "ok")) == owner_a for url in allowed), logs
    refused = [line for line in logs[owner_c] if line["outcome"] == "refused"]
    assert sorted(line["url"] for line in refused) == sorted(
        u for u in sm.listed("cross") if "cross-unnamed" in u)
    assert {line.get("reason") for line in refused} == {"sitemap_origin"}
