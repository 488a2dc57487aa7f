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
from hive.testweb.sitemaps import SECRETS, SLOW_ROBOTS
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


def test_a_neighbours_sitemap_does_not_erase_a_hosts_linked_pages(
    tmp_path: Path, web: WebProcess
) -> None:
    """Issue 27's first break: lister's sitemap lists victim's pages, victim's robots.txt
    does not vouch for it and is slow, so the listed records reach victim's owner (another
    worker) before victim's ``/`` links the same pages. The links win: every page is
    fetched once, and no listed one is refused for where it was listed."""
    sm = web.sitemaps
    assert sm is not None
    lister, victim = (f"{sm.host(kind)}:{web.port}" for kind in ("lister", "victim"))
    vnodes = crawl_config(web).hive.vnodes
    seed = split_seed(lister, victim, vnodes)
    owner_victim = Ring(PROCS, vnodes, seed).owner(victim)
    slow = SLOW_ROBOTS + 2.0
    hive = Hive(tmp_path, web, hive={"ring_seed": seed, "vnodes": vnodes},
                politeness={"min_delay": 0.02},
                fetch={"read_timeout": slow, "total_timeout": slow},
                frontier={"max_urls_per_host": 4 * SECRETS})
    hive.seeds.write_text(f"{sm.url('lister', '/')}\n{sm.url('victim', '/')}\n")
    finish(hive.start(PROCS), timeout=90)

    requests = [r for r in web.requests if r.hostname == sm.host("victim")]
    secrets = set(sm.listed("lister"))
    fetched = [r.url for r in requests if r.url in secrets]
    assert set(fetched) == secrets, f"{len(set(fetched))} of {len(secrets)} fetched"
    assert duplicates(requests) == {}
    # The order the break needs: lister's sitemap was read while victim's robots.txt was
    # still answering (so before victim's / was fetched), and on another worker.
    robots = next(r for r in requests if r.path == "/robots.txt")
    listing = next(r for r in web.requests if r.url == sm.url("lister", "/sitemap.xml"))
    assert listing.end < robots.end - SLOW_ROBOTS / 2
    home = next(r for r in requests if r.path == "/")
    assert home.start > robots.end
    where = {line["url"]: w for w in range(PROCS) for line in crawl_log(hive.data, w)}
    assert where[listing.url] != owner_victim == where[home.url]
    logs = crawl_log(hive.data, owner_victim)
    assert not [line for line in logs if line.get("reason") == "sitemap_origin"]
    timed = as_received(requests, received(hive.data / "logs"))
    assert politeness_violations(timed, 0.02, tolerance=STAMP_SKEW) == []
