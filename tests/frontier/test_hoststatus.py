"""Hosts at a glance (hive/procs/hoststatus.py) over real frontiers: each worker's top hosts
by pending URLs and its slowest host, merged as ``hive status --hosts`` shows them."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hive.core.lease import LeaseKind
from hive.core.urls import host_hash
from hive.frontier.frontier import Frontier
from hive.outcome import Outcome
from hive.procs import hoststatus
from hive.procs.hoststatus import HostView, format_hosts, summary
from tests.frontier.conftest import Opener, rec

OK = Outcome("ok", 200)


def crawl(f: Frontier, now: float, delays: dict[str, float]) -> None:
    """Answer every lease ready at ``now``: robots.txt with the host's Crawl-delay, pages ok."""
    for _ in range(50):
        lease = f.pop_ready(now).lease
        if lease is None:
            return
        if lease.kind == LeaseKind.ROBOTS:
            outcome = Outcome("robots_ok", 200, crawl_delay=delays.get(lease.record.host_key, 0.0),
                              robots_until=1e9)
        else:
            outcome = OK
        f.done(lease, outcome, now, now + 0.01)
    f.commit(now)


def frontier_with(opener: Callable[..., Opener], counts: dict[str, int], **sections: dict
                  ) -> Frontier:
    f = opener(**sections).open()
    f.admit([rec(f"http://{host}/{i}") for host, n in counts.items() for i in range(n)], 0.0)
    return f


def rows(stats: dict[str, float]) -> dict[str, dict]:
    return {row["host"]: row for row in hoststatus.worker_hosts(0, stats, stats["hosts/time"])}


def test_a_worker_reports_its_top_hosts_by_pending_and_its_slowest(
    opener: Callable[..., Opener],
) -> None:
    counts = {"a.test": 6, "b.test": 4, "c.test": 2, "d.test": 1}
    f = frontier_with(opener, counts, politeness={"crawl_delay_cap": 100.0})
    crawl(f, 0.0, {"d.test": 50.0})
    pending = {h: f.back.host(host_hash(h)).queued for h in counts}
    everything = rows(HostView(f, 10).stats(1.0))
    assert {h: r["pending"] for h, r in everything.items()} == {
        h: n for h, n in pending.items() if n}
    assert sum(r["pending"] for r in everything.values()) + f.stats()["frontier/front"] == \
        f.pending
    top = rows(HostView(f, 1).stats(1.0))
    best = max(everything.values(), key=lambda r: r["pending"])["host"]
    # d.test has one URL left and a 50 s Crawl-delay: it bounds the batch, so it is reported
    # beside the top host though it is not among the top 1.
    assert set(top) == {best, "d.test"}
    # Its next fetch is beyond frontier.park_horizon: it gave its slot up.
    assert top["d.test"]["delay"] == 50.0 and top["d.test"]["state"] == "parked"
    assert top["d.test"]["drain"] >= 49.0 + 50.0
    assert top[best]["drain"] < top["d.test"]["drain"]


def test_the_view_is_refreshed_at_most_every_few_seconds_and_can_be_off(
    opener: Callable[..., Opener],
) -> None:
    f = frontier_with(opener, {"a.test": 3})
    crawl(f, 0.0, {})
    view = HostView(f, 5)
    first = view.stats(1.0)
    f.admit([rec("http://a.test/more")], 1.5)
    crawl(f, 1.5, {})
    assert view.stats(1.5) is first
    assert view.stats(1.0 + hoststatus.REFRESH)["hosts/time"] == 1.0 + hoststatus.REFRESH
    assert HostView(f, 0).stats(9.0) == {}


def test_a_costly_view_is_refreshed_less_often(
    opener: Callable[..., Opener], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """However many hosts are bound, the view takes at most 1/COST_FACTOR of the time."""
    f = frontier_with(opener, {"a.test": 3})
    crawl(f, 0.0, {})
    monkeypatch.setattr(hoststatus, "COST_FACTOR", 1e12)
    view = HostView(f, 5)
    first = view.stats(1.0)
    assert view.stats(1.0 + 100 * hoststatus.REFRESH) is first


def test_parked_hosts_are_seen_and_the_front_is_counted_apart(
    opener: Callable[..., Opener],
) -> None:
    counts = {f"h{i}.test": i + 1 for i in range(6)}
    f = frontier_with(opener, counts, frontier={"min_bound_hosts": 1, "max_bound_hosts": 2,
                                                "draw_batch": 100})
    crawl(f, 0.0, {})
    stats = HostView(f, 100).stats(1.0)
    assert f.stats()["frontier/hosts/parked"] > 0
    states = {r["state"] for r in rows(stats).values()}
    assert "parked" in states
    assert stats["hosts/seen"] == f.stats()["frontier/hosts/bound"] + \
        f.stats()["frontier/hosts/parked"]
    assert stats["hosts/unseen"] == 0


def test_summary_merges_workers_and_ages_the_forecast(opener: Callable[..., Opener]) -> None:
    one = frontier_with(opener, {"a.test": 5}, politeness={"crawl_delay_cap": 100.0})
    two = frontier_with(opener, {"b.test": 3}, politeness={"crawl_delay_cap": 100.0})
    crawl(one, 0.0, {})
    crawl(two, 0.0, {"b.test": 40.0})
    reports = {0: {**one.stats(), **HostView(one, 5).stats(1.0)},
               1: {**two.stats(), **HostView(two, 5).stats(1.0)}}
    now = 11.0
    merged = summary(reports, now)
    assert [(r["host"], r["worker"]) for r in merged["top"]] == [("a.test", 0), ("b.test", 1)]
    forecast = merged["forecast"]
    assert forecast["worker"] == 1 and forecast["host"] == "b.test"
    assert forecast["seconds"] == reports[1]["hosts/drain"] - 10.0
    text = format_hosts(merged, 1, now)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["host", "worker", "pending"]
    assert lines[1].split()[:4] == ["a.test", "0", "5", "waiting"]
    assert len(lines) == 3 and lines[2].startswith("drain ≥ ") and "b.test, worker 1" in lines[2]
    assert summary({0: {}}, now) == {"top": [], "forecast": None, "front": 0, "unseen": 0,
                                     "addresses": []}


def test_hosts_waiting_on_their_address_are_shown_with_the_address(
        opener: Callable[..., Opener]) -> None:
    frontier = frontier_with(opener, {"a.test": 5, "b.test": 2})
    leased = frontier.pop_ready(0.0).lease
    assert leased is not None
    view = HostView(frontier, 5)
    view.on_address = lambda: {leased.host_hash: "192.0.2.7"}
    reports = {0: {**frontier.stats(), **view.stats(1.0), "address/waiting/192.0.2.7": 1},
               2: {"address/waiting/192.0.2.7": 3, "address/waiting/192.0.2.8": 1}}
    merged = summary(reports, 1.0)
    assert merged["addresses"] == [
        {"address": "192.0.2.7", "hosts": 4, "workers": [0, 2]},
        {"address": "192.0.2.8", "hosts": 1, "workers": [2]}]
    states = {row["host"]: row["state"] for row in merged["top"]}
    assert states[leased.record.host_key] == "address"
    text = format_hosts(merged, 5, 1.0)
    assert "held back by their address 192.0.2.7: 4 hosts (workers 0,2;" in text


def test_hosts_sharing_an_address_are_forecast_at_the_address_s_pace(
        opener: Callable[..., Opener]) -> None:
    """Twenty hosts of ten URLs each at one address (politeness 0.02 s a host): each host
    alone would drain in well under a second, but the address allows one start every 0.5 s,
    so the batch needs at least 200 × 0.5 s; a host at an address of its own is held to
    the address's pace too, one the DNS cache does not know keeps its own."""
    counts = {f"h{i}.test": 10 for i in range(20)} | {"own.test": 10, "unknown.test": 10}
    f = frontier_with(opener, counts, politeness={"min_delay": 0.02, "max_delay": 0.02})
    crawl(f, 0.0, {})
    view = HostView(f, 100)
    alone = rows(view.stats(1.0))
    assert max(row["drain"] for row in alone.values()) < 5.0
    where = {h: "192.0.2.1" for h in counts} | {"own.test": "192.0.2.2", "unknown.test": None}
    view = HostView(f, 100)
    view.pace = hoststatus.AddressPace(2, 0.5, lambda host, now: where[host])
    stats = view.stats(1.0)
    paced = rows(stats)
    pending = sum(f.back.host(host_hash(h)).pending for h in counts if h.startswith("h"))
    assert pending >= 180
    assert paced["h3.test"]["drain"] == pytest.approx(pending * 0.5)
    assert stats["hosts/drain"] == pytest.approx(pending * 0.5)
    assert paced["own.test"]["drain"] == pytest.approx(
        f.back.host(host_hash("own.test")).pending * 0.5)
    assert paced["unknown.test"]["drain"] == pytest.approx(alone["unknown.test"]["drain"])
