"""Sitemaps and feeds crawled end to end: a worker against the sitemap hosts of the test web.

At the server: exactly the pages sitemaps and feeds allow are fetched (orphans
no link reaches, gzipped children of an index, a text sitemap, what parses of a
broken one, cross-submission only where robots.txt vouches, feed items),
politely; a host's listed pages come in the order their priority gives, and
those with a recent lastmod before the stale ones; the 50,001-URL sitemap is
read to the protocol's limit.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive.core.record import SITEMAP, UrlRecord
from hive.frontier.verify import verify_store
from hive.procs.worker import Worker
from hive.testweb import Web
from hive.testweb.requestlog import as_received, politeness_violations, received
from hive.testweb.server import WebServer, serve
from hive.testweb.sitemaps import FANOUT, MAX_URLS, SitemapWeb
from tests.conftest import WEB_ADDRESS, crawl_config

pytestmark = pytest.mark.slow

MIN_DELAY = 0.05


@pytest.fixture(scope="module")
def sitemap_web() -> Iterator[WebServer]:
    with serve(Web(seed=1, hosts=1, pages=1, hostile=False), WEB_ADDRESS, sitemaps=True) as web:
        yield web


def _config(web: WebServer, **sections: dict[str, object]) -> object:
    return crawl_config(web, politeness={"min_delay": MIN_DELAY}, **sections)  # type: ignore[arg-type]


def test_the_sitemap_server_is_off_by_default() -> None:
    with serve(Web(seed=1, hosts=1, pages=1, hostile=False), WEB_ADDRESS) as web:
        assert web.sitemaps is None


def test_a_crawl_fetches_what_sitemaps_and_feeds_allow_politely(
    sitemap_web: WebServer, tmp_path: Path
) -> None:
    sm: SitemapWeb | None = sitemap_web.sitemaps
    assert sm is not None
    sitemap_web.reset()
    seeded = ("orphans", "index", "text", "broken", "cross", "feeds")
    cfg = _config(sitemap_web)
    worker = Worker(cfg, tmp_path / "store", log_dir=tmp_path / "logs",  # type: ignore[arg-type]
                    rng=random.Random(7))
    try:
        worker.add([sm.url(kind, "/") for kind in seeded], time.time())
        assert worker.run_until_idle(timeout=20)
        stats = worker.stats()
    finally:
        worker.close()
    requests = [r for r in sitemap_web.requests if r.hostname.startswith("sm-")]
    got = {r.url for r in requests if r.path != "/robots.txt"}
    index_files = ["/sitemap_index.xml", "/sitemap-a.xml.gz", "/sitemap-b.xml.gz",
                   "/nested/index.xml", "/nested/c.xml", "/sub/sitemap.xml.gz"]
    allowed = {sm.url(kind, "/") for kind in seeded}
    allowed |= {sm.url(k, "/sitemap.xml") for k in ("orphans", "broken", "cross")}
    allowed |= {sm.url("index", path) for path in index_files}
    allowed |= {sm.url("text", "/sitemap.txt")}
    allowed |= {sm.url("feeds", "/feed.rss"), sm.url("feeds", "/feed.atom")}
    for kind in ("orphans", "text", "broken", "feeds"):
        allowed |= set(sm.listed(kind))
    allowed |= set(sm.listed("index")) - set(sm.refused_paths())
    allowed |= {u for u in sm.listed("cross") if "cross-named" in u}
    assert got == allowed
    assert not [r for r in requests if r.hostname == sm.host("cross-unnamed")
                and r.path != "/robots.txt"]
    violations = politeness_violations(
        as_received(requests, received(tmp_path / "logs")), MIN_DELAY, tolerance=0.005)
    assert violations == []
    # Status and the crawl log say what sitemaps gave and what they were refused.
    host = f"{sm.host('orphans')}:{sitemap_web.port}"
    assert stats[f"sitemaps/host/{host}/urls"] == 20
    assert stats[f"sitemaps/host/{host}/fetched"] == 1
    broken = f"{sm.host('broken')}:{sitemap_web.port}"
    assert stats[f"sitemaps/host/{broken}/errors"] == 1
    assert stats["sitemaps/fetched"] == 1 + 6 + 1 + 1 + 1
    assert stats["feeds/fetched"] == 2 and stats["feeds/urls"] == 8
    assert stats["links/refused/sitemap_origin"] == 3
    assert stats["links/refused/sitemap_path"] == 2
    log = "\n".join(p.read_text() for p in (tmp_path / "logs").glob("crawl-*.jsonl"))
    assert '"reason":"sitemap_origin"' in log.replace(" ", "")
    assert '"sitemap_error"' in log and '"sitemap_ok"' in log and '"feed_ok"' in log
    # The order at the server reflects the orphans' priorities (a sitemap priority of
    # 0.0-0.2 puts a page a level below the others): with the chooser stochastic, the
    # tolerance is that those pages come later on average by a third of the list.
    order = [r.path for r in sorted(requests, key=lambda r: r.start)
             if r.hostname == sm.host("orphans") and r.path.startswith("/orphan/")]
    low = [i for i, path in enumerate(order) if int(path.split("/")[2].split(".")[0]) % 10 < 3]
    high = [i for i, path in enumerate(order) if i not in low]
    assert statistics.mean(low) - statistics.mean(high) > len(order) / 3


def test_a_recent_lastmod_raises_a_pages_fetch_order(
    sitemap_web: WebServer, tmp_path: Path
) -> None:
    """The fresh host's sitemap lists its stale pages first, its fresh ones (lastmod an
    hour ago, within sitemaps.fresh_days) last, with no priority or changefreq: under the
    default config the fresh ones are a level up, so the server sees them first."""
    sm = sitemap_web.sitemaps
    assert sm is not None
    sitemap_web.reset()
    worker = Worker(_config(sitemap_web), tmp_path / "store",  # type: ignore[arg-type]
                    log_dir=tmp_path / "logs", rng=random.Random(7))
    try:
        worker.add([sm.url("fresh", "/")], time.time())
        assert worker.run_until_idle(timeout=20)
        stats = worker.stats()
    finally:
        worker.close()
    requests = sorted((r for r in sitemap_web.requests if r.hostname == sm.host("fresh")),
                      key=lambda r: r.start)
    order = [r.url for r in requests if r.path.startswith("/fresh/")]
    assert sorted(order) == sorted(sm.listed("fresh")), "each listed page once"
    assert stats["sitemaps/fetched"] == 1
    assert politeness_violations(as_received(requests, received(tmp_path / "logs")),
                                 MIN_DELAY, tolerance=0.005) == []
    # As for priority above, the chooser is stochastic: the tolerance is that the fresh
    # pages come earlier on average by a third of the list (the file's order would put
    # them later by half of it).
    fresh = set(sm.fresh())
    early = [i for i, url in enumerate(order) if url in fresh]
    late = [i for i, url in enumerate(order) if url not in fresh]
    assert statistics.mean(late) - statistics.mean(early) > len(order) / 3, order


def test_the_50001_url_sitemap_is_read_to_the_protocol_limit(
    sitemap_web: WebServer, tmp_path: Path
) -> None:
    """The worker's pipeline reads it (the pages are handed on, not crawled)."""
    sm = sitemap_web.sitemaps
    assert sm is not None
    handed: list[UrlRecord] = []
    cfg = _config(sitemap_web, fetch={"max_body_bytes": 8 << 20, "max_decoded_bytes": 16 << 20})
    worker = Worker(cfg, tmp_path / "store", log_dir=tmp_path,  # type: ignore[arg-type]
                    on_links=lambda links, now: handed.extend(links))
    try:
        worker.add(["sitemap:" + sm.url("oversize", "/sitemap.xml")], time.time())
        assert worker.run_until_idle(timeout=20)
        stats = worker.stats()
    finally:
        worker.close()
    pages = [r for r in handed if r.kind != SITEMAP]
    assert len(pages) == MAX_URLS
    assert {r.url for r in pages} == set(sm.listed("oversize")[:MAX_URLS])
    assert stats["worker/outcome/sitemap_truncated"] == 1
    assert stats["sitemaps/truncated"] == 1


def test_robots_default_mode_guesses_sitemap_xml_and_files_per_host_are_capped(
    sitemap_web: WebServer, tmp_path: Path
) -> None:
    """robots+default asks /sitemap.xml of an origin whose robots.txt names none; with
    sitemaps.max_files_per_host = 2 the index host gets its index and one child only."""
    sm = sitemap_web.sitemaps
    assert sm is not None
    sitemap_web.reset()
    handed: list[UrlRecord] = []
    cfg = _config(sitemap_web, sitemaps={"mode": "robots+default", "max_files_per_host": 2})
    worker = Worker(cfg, tmp_path / "store", log_dir=tmp_path)  # type: ignore[arg-type]
    worker.on_links = lambda links, now: (handed.extend(links), worker.frontier.admit(
        [r for r in links if r.kind == SITEMAP], now))[1]
    try:
        worker.add([sm.url("cross-unnamed", "/"), sm.url("index", "/")], time.time())
        assert worker.run_until_idle(timeout=20)
        stats = worker.stats()
    finally:
        worker.close()
    paths = {(r.hostname, r.path) for r in sitemap_web.requests}
    assert (sm.host("cross-unnamed"), "/sitemap.xml") in paths
    index_files = [p for h, p in paths if h == sm.host("index") and "sitemap" in p]
    assert len(index_files) == 2
    # The index lists 4 children: 2 handed on (1 admitted, 1 over the host's 2 files),
    # the other 2 dropped by the pipeline; each counted, none recorded.
    assert stats["refusals/max_sitemaps_per_host"] == 3
    assert stats["frontier/capped/max_sitemaps_per_host"] == 1
    assert stats["links/refused/max_sitemaps_per_host"] == 2


def test_a_feed_or_sitemap_found_as_a_link_is_read_as_one(
    sitemap_web: WebServer, tmp_path: Path
) -> None:
    """Issue 27's fifth break and its kin, at the server. feedlink's / links its feed with
    <a href> before announcing it, and serves it as text/plain: the feed record upgrades
    the page record (its discovery says what it is). sniffed's / only links its feed and
    its sitemap: their Content-Type and root element say what they are. Every item of
    both is fetched, and every URL once."""
    sm = sitemap_web.sitemaps
    assert sm is not None
    sitemap_web.reset()
    worker = Worker(_config(sitemap_web), tmp_path / "store",  # type: ignore[arg-type]
                    log_dir=tmp_path / "logs", rng=random.Random(7))
    try:
        worker.add([sm.url("feedlink", "/"), sm.url("sniffed", "/")], time.time())
        assert worker.run_until_idle(timeout=20)
        stats = worker.stats()
    finally:
        worker.close()
    requests = [r for r in sitemap_web.requests if r.hostname.startswith("sm-")]
    got = [r.url for r in requests if r.path != "/robots.txt"]
    assert sorted(got) == sorted({
        sm.url("feedlink", "/"), sm.url("feedlink", "/feed.rss"), *sm.listed("feedlink"),
        sm.url("sniffed", "/"), sm.url("sniffed", "/feed.xml"), sm.url("sniffed", "/map.xml"),
        *sm.listed("sniffed"),
    }), "each once"
    assert stats["feeds/fetched"] == 2 and stats["feeds/urls"] == 6
    assert stats["sitemaps/fetched"] == 1 and stats["sitemaps/urls"] == 3
    assert stats["frontier/upgraded"] == 1 and stats["frontier/superseded"] == 1



def test_a_fan_out_sitemap_index_costs_its_files_not_a_record_per_child(
    sitemap_web: WebServer, tmp_path: Path
) -> None:
    """Issue 27, break 3: an index of 50,000 child indexes, each listing 50,000 more. The
    host's files stop at sitemaps.max_files_per_host (20: the index and its first 19
    children), and every child listed past that, 999,981 of them, is counted as refused
    and never recorded: the store holds the 20 files' states, not a refused state each."""
    sm = sitemap_web.sitemaps
    assert sm is not None
    sitemap_web.reset()
    cap = 20
    cfg = _config(sitemap_web, sitemaps={"max_files_per_host": cap, "max_index_depth": 2},
                  fetch={"max_body_bytes": 10 << 20, "max_decoded_bytes": 20 << 20})
    worker = Worker(cfg, tmp_path / "store", log_dir=tmp_path)  # type: ignore[arg-type]
    try:
        worker.add(["sitemap:" + sm.url("fanout", "/sitemap_index.xml")], time.time())
        assert worker.run_until_idle(timeout=120)
        stats = worker.stats()
    finally:
        worker.close()
    got = [r.url for r in sitemap_web.requests
           if r.hostname == sm.host("fanout") and r.path != "/robots.txt"]
    assert sorted(got) == sorted(sm.fanout_files(cap)), "each of the first 20 files once"
    past = cap * FANOUT - (cap - 1)
    assert stats["refusals/max_sitemaps_per_host"] == past
    assert (stats["links/refused/max_sitemaps_per_host"]
            + stats["frontier/capped/max_sitemaps_per_host"]) == past
    report = verify_store(tmp_path / "store")
    assert report.ok, report.summary()
    assert report.counts["urls"] == cap and report.counts["urls/refused"] == 0


def test_listed_pages_past_the_hosts_cap_are_counted_not_recorded(
    sitemap_web: WebServer, tmp_path: Path
) -> None:
    """The 50,001-URL sitemap on a host capped at 5 URLs: 5 pages fetched, the other
    49,995 listed (to the protocol's limit) counted as refused, no state stored for them."""
    sm = sitemap_web.sitemaps
    assert sm is not None
    sitemap_web.reset()
    cfg = _config(sitemap_web, frontier={"max_urls_per_host": 5},
                  fetch={"max_body_bytes": 8 << 20, "max_decoded_bytes": 16 << 20})
    worker = Worker(cfg, tmp_path / "store", log_dir=tmp_path)  # type: ignore[arg-type]
    try:
        worker.add(["sitemap:" + sm.url("oversize", "/sitemap.xml")], time.time())
        assert worker.run_until_idle(timeout=60)
        stats = worker.stats()
    finally:
        worker.close()
    pages = [r for r in sitemap_web.requests
             if r.hostname == sm.host("oversize") and r.path.startswith("/o/")]
    assert len({r.path for r in pages}) == 5
    assert stats["refusals/max_urls_per_host"] == MAX_URLS - 5
    report = verify_store(tmp_path / "store")
    assert report.ok, report.summary()
    assert report.counts["urls"] == 1 + 5 and report.counts["urls/refused"] == 0
