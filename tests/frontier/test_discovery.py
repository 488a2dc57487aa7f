"""How a URL was first found never stops a stronger discovery of it (issue 27), on a real store.

Each case admits a URL one way, then finds it a stronger way, and serves the host:
the lease is the stronger record, the URL is fetched once, the store verifies, and
(``reopen``) all of it holds across a close and a crash.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hive.core.lease import Lease, LeaseKind
from hive.core.record import FEED, LISTED, PAGE, SITEMAP, UrlRecord
from hive.core.urls import host_hash
from hive.frontier.frontier import Frontier
from hive.frontier.hosts import HostState
from hive.frontier.verify import verify_store
from hive.outcome import Outcome
from tests.frontier.conftest import Opener, rec
from tests.frontier.test_frontier import OK, ROBOTS_OK

REFUSED = Outcome("refused", contacted=False)


def kind(url: str, of: str, depth: int = 1, via: str = "") -> UrlRecord:
    record = rec(url, depth)
    record.kind, record.via = of, via
    return record


def pages(f: Frontier, now: float, answer: Callable[[Lease], Outcome] = lambda _: OK
          ) -> list[UrlRecord]:
    """Serve every lease until none is left; the page leases' records, in order."""
    served = []
    for _ in range(100):
        ready = f.pop_ready(now)
        if ready.lease is None:
            if ready.wake_at is None:
                return served
            now = ready.wake_at
            continue
        lease = ready.lease
        if lease.kind == LeaseKind.ROBOTS:
            f.done(lease, ROBOTS_OK, now, now + 0.01)
        else:
            served.append(lease.record)
            f.done(lease, answer(lease), now, now + 0.01)
        now += 0.01
    raise AssertionError("the host never ran dry")


def settle(o: Opener, f: Frontier, reopen: str) -> Frontier:
    if reopen == "close":
        return o.reopen(0.0)
    if reopen == "crash":
        f.commit(0.0)
        return o.reopen(0.0, crash=True)
    return f


def verified(o: Opener, f: Frontier) -> None:
    f.close(100.0)
    report = verify_store(o.path)
    assert report.ok, report.summary()


REOPEN = ["none", "close", "crash"]


@pytest.mark.parametrize("reopen", REOPEN)
def test_a_link_takes_over_a_page_listed_by_a_foreign_sitemap(
    opener: Callable[..., Opener], reopen: str
) -> None:
    o = opener()
    f = o.open()
    url = "http://victim.test/secret"
    assert f.admit([kind(url, LISTED, via="http://lister.test/sitemap.xml")], 0.0) == 1
    assert f.admit([rec(url)], 0.0) == 0  # the URL was admitted: only its entry is new
    f = settle(o, f, reopen)
    # The listed entry comes first (it was queued first): it is dropped, not refused.
    served = pages(f, 0.0, lambda lease: REFUSED if lease.record.kind == LISTED else OK)
    assert [(r.url, r.kind) for r in served] == [(rec(url).url, PAGE)]
    stats = f.stats()
    assert stats["frontier/upgraded"] == 1 and stats["frontier/superseded"] == 1
    assert stats["frontier/done/ok"] == 1 and stats["frontier/admitted"] == 1
    verified(o, f)


def test_a_listed_page_refused_at_lease_time_leaves_the_seen_set(
    opener: Callable[..., Opener]
) -> None:
    o = opener()
    f = o.open()
    url = "http://victim.test/secret"
    f.admit([kind(url, LISTED, via="http://lister.test/sitemap.xml")], 0.0)
    assert [r.kind for r in pages(f, 0.0, lambda _: REFUSED)] == [LISTED]
    assert f.stats()["frontier/admitted"] == 0
    assert f.admit([rec(url)], 1.0) == 1
    assert [r.kind for r in pages(f, 1.0)] == [PAGE]
    verified(o, f)


@pytest.mark.parametrize("reopen", REOPEN)
@pytest.mark.parametrize("stronger", [FEED, SITEMAP])
def test_a_feed_or_sitemap_record_upgrades_a_queued_page(
    opener: Callable[..., Opener], reopen: str, stronger: str
) -> None:
    o = opener()
    f = o.open()
    url = "http://blog.test/feed.rss"
    f.admit([rec(url, depth=1)], 0.0)
    f.admit([kind(url, stronger, depth=1)], 0.0)
    f.admit([rec(url, depth=0)], 0.0)  # a weaker kind by a shorter path: no upgrade
    f = settle(o, f, reopen)
    served = pages(f, 0.0)
    assert [(r.kind, r.depth) for r in served] == [(stronger, 1)]
    verified(o, f)


@pytest.mark.parametrize("reopen", REOPEN)
def test_a_seed_takes_over_a_deep_link(opener: Callable[..., Opener], reopen: str) -> None:
    o = opener(frontier={"max_depth": 3})
    f = o.open()
    deep, refused = "http://a.test/deep", "http://a.test/too-deep"
    f.admit([rec(deep, depth=3), rec(refused, depth=4)], 0.0)
    assert f.stats()["frontier/refused/max_depth"] == 1
    f = settle(o, f, reopen)
    assert f.admit([rec(deep, depth=0, hint=1), rec(refused, depth=0, hint=1)], 0.0) == 1
    served = pages(f, 0.0)
    assert sorted((r.url, r.depth) for r in served) == [(rec(deep).url, 0), (rec(refused).url, 0)]
    stats = f.stats()
    assert stats["frontier/refused/max_depth"] == 0 and stats["frontier/overturned"] == 1
    verified(o, f)


def test_a_done_url_is_never_fetched_again(opener: Callable[..., Opener]) -> None:
    o = opener()
    f = o.open()
    url = "http://blog.test/feed.rss"
    f.admit([rec(url, depth=2)], 0.0)
    assert len(pages(f, 0.0)) == 1
    f.admit([kind(url, FEED), rec(url, depth=0, hint=1)], 1.0)
    assert pages(f, 1.0) == []
    assert f.stats()["frontier/duplicates"] == 2
    verified(o, f)


def test_an_entry_superseded_while_leased_is_fetched_once(opener: Callable[..., Opener]) -> None:
    """The page is in flight when its feed record comes: the fetch stands (a page's response
    that is a feed is read as one, hive.fetch.sniff) and the feed entry is dropped."""
    o = opener()
    f = o.open()
    url = "http://blog.test/feed.rss"
    f.admit([rec(url)], 0.0)
    robots = f.pop_ready(0.0).lease
    assert robots is not None and robots.kind == LeaseKind.ROBOTS
    f.done(robots, ROBOTS_OK, 0.0, 0.01)
    ready = f.pop_ready(5.0)
    assert ready.lease is not None and ready.lease.record.kind == PAGE
    f.admit([kind(url, FEED)], 5.0)
    f.done(ready.lease, OK, 5.0, 5.01)
    assert pages(f, 10.0) == []
    verified(o, f)


@pytest.mark.parametrize("reopen", REOPEN)
def test_a_foreign_listing_does_not_spend_a_hosts_budget(
    opener: Callable[..., Opener], reopen: str
) -> None:
    """The adversary's next move after break 1: a sitemap of another origin lists as many
    made-up pages of the victim as its budget allows before the victim's own links come.
    Listed pages the victim has not vouched for are held against the budget apart, so
    its links are admitted; the listed ones are bounded by the same budget."""
    budget = 10
    o = opener(frontier={"max_urls_per_host": budget})
    f = o.open()
    via = "http://lister.test/sitemap.xml"
    junk = [kind(f"http://victim.test/junk{i}", LISTED, via=via) for i in range(2 * budget)]
    assert f.admit(junk, 0.0) == budget
    assert f.stats()["frontier/capped/max_urls_per_host"] == budget  # counted, not stored
    f = settle(o, f, reopen)
    links = [rec(f"http://victim.test/page{i}") for i in range(budget)]
    assert f.admit(links, 0.0) == budget
    served = pages(f, 0.0, lambda lease: REFUSED if lease.record.kind == LISTED else OK)
    assert sorted(r.url for r in served if r.kind == PAGE) == sorted(r.url for r in links)
    assert sum(r.kind == LISTED for r in served) == budget
    verified(o, f)


def test_a_store_with_sitemaps_and_listings_verifies(opener: Callable[..., Opener]) -> None:
    """hive verify's host counts hold with sitemap files (not pages of the host's budget),
    pages listed by another origin's sitemap (held apart), and a page upgraded to a
    sitemap (counted in both), pending and done."""
    o = opener()
    f = o.open()
    f.admit([kind("http://a.test/sitemap.xml", SITEMAP, depth=0), rec("http://a.test/x"),
             rec("http://a.test/map"), kind("http://a.test/map", SITEMAP, depth=0),
             kind("http://a.test/l", LISTED, via="http://b.test/sitemap.xml")], 0.0)
    f.close(0.0)
    report = verify_store(o.path)
    assert report.ok, report.summary()
    f = o.open()
    pages(f, 0.0)
    verified(o, f)


def test_a_hosts_listed_count_survives_its_state_round_trip() -> None:
    host = HostState("a.test")
    host.sitemaps, host.listed = 0, 7
    assert HostState.decode(host.encode()).listed == 7
    host.listed = 0
    assert len(HostState.decode(host.encode()).encode()) == len(host.encode())


@pytest.mark.parametrize("first", ["listed", "too_deep", "deep"])
def test_a_redirect_target_is_a_discovery_like_any(
    opener: Callable[..., Opener], first: str
) -> None:
    """A redirect's target (hops + 1, the hop R, its source's depth) found after the URL
    was listed by a foreign sitemap, refused as too deep, or queued as a deeper link:
    the redirect wins each time, and the URL is fetched once, as the redirect's target."""
    o = opener(frontier={"max_depth": 3})
    f = o.open()
    url = "http://a.test/target"
    before = {"listed": kind(url, LISTED, via="http://b.test/sitemap.xml"),
              "too_deep": rec(url, depth=4), "deep": rec(url, depth=3)}[first]
    f.admit([before], 0.0)
    target = rec(url, depth=1)
    target.hops, target.path = 1, "LR"
    assert f.admit([target], 0.0) == (1 if first == "too_deep" else 0)
    served = pages(f, 0.0, lambda lease: REFUSED if lease.record.kind == LISTED else OK)
    assert [(r.url, r.hops, r.path) for r in served] == [(target.url, 1, "LR")]
    verified(o, f)


def test_a_url_found_ever_closer_is_queued_a_bounded_number_of_times(
    opener: Callable[..., Opener]
) -> None:
    """The bound on upgrades: found as a listing, then as a page and as a feed at every
    depth from max_depth down, a URL holds 2 x (max_depth + 1) + 1 entries, and is
    fetched once, as the last and strongest."""
    max_depth = 5
    o = opener(frontier={"max_depth": max_depth})
    f = o.open()
    url = "http://a.test/feed"
    f.admit([kind(url, LISTED, depth=max_depth, via="http://b.test/s.xml")], 0.0)
    for of in (PAGE, FEED):
        for depth in range(max_depth, -1, -1):
            f.admit([kind(url, of, depth), kind(url, of, depth + 1)], 0.0)  # the 2nd: no stronger
    f.admit([rec(url, 0)], 0.0)  # a page is weaker than a feed at any depth
    assert f.pending == 2 * (max_depth + 1) + 1
    served = pages(f, 0.0)
    assert [(r.kind, r.depth) for r in served] == [(FEED, 0)]
    assert f.stats()["frontier/superseded"] == 2 * (max_depth + 1)
    verified(o, f)


@pytest.mark.parametrize("reopen", REOPEN)
def test_a_hosts_pending_count_leaves_out_the_entries_a_stronger_find_replaced(
    opener: Callable[..., Opener], reopen: str
) -> None:
    """Pages found again nearer their seed keep their first entries queued until they come
    up: the host's ``pending`` (what the drain forecast and status count) leaves those
    out, so a forecast never says more than the URLs to fetch (it said 58 s for a host
    whose 8 pages at a 4 s delay could take at most 45 s), and it is kept across a restart."""
    o = opener()
    f = o.open()
    urls = [f"http://a.test/p{i}" for i in range(5)]
    assert f.admit([rec(url, depth=3) for url in urls], 0.0) == 5
    assert f.admit([rec(url, depth=1) for url in urls[:3]], 0.0) == 0  # upgrades
    f.commit(0.0)
    f = settle(o, f, reopen)
    served = pages(f, 1.0)
    assert sorted(r.url for r in served) == urls  # each once
    assert f.counts.get("frontier/superseded") == 3
    host = f.back.host(host_hash("a.test"))
    assert host is not None and host.stale == 0 and host.pending == 0


def test_the_pending_count_while_stale_entries_wait(opener: Callable[..., Opener]) -> None:
    o = opener()
    f = o.open()
    urls = [f"http://a.test/p{i}" for i in range(8)]
    f.admit([rec(url, depth=3) for url in urls], 0.0)
    f.admit([rec(url, depth=1) for url in urls], 0.0)
    f.commit(0.0)
    f.pop_ready(0.0)  # the front drawn into the host's queue: 16 entries, 8 URLs
    f.commit(0.0)
    [hh] = list(f.back.bound)
    host = f.back.bound[hh]
    assert host.queued == 16 and host.stale == 8 and host.pending == 8
    assert HostState.decode(host.encode()).stale == 8
    plain = HostState("b.test")
    assert HostState.decode(plain.encode()).stale == 0
