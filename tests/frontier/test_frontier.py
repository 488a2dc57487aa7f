"""The frontier's behaviour on a real LMDB store, live and after close + reopen."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from hive.core.lease import Lease, LeaseKind
from hive.core.urls import host_hash
from hive.frontier.frontier import MAX_FAILURES, Frontier
from hive.frontier.refusals import MAX_PAIRS, STATS_HOSTS, describe
from hive.outcome import Outcome
from hive.storage.schema import url_key
from tests.frontier.conftest import Opener, rec

OK = Outcome("ok", 200)
ROBOTS_OK = Outcome("robots_ok", 200, robots_until=1e9)


def lease_now(f: Frontier, now: float) -> Lease:
    ready = f.pop_ready(now)
    assert ready.lease is not None, f"nothing ready at {now}: wake at {ready.wake_at}"
    return ready.lease


def serve(f: Frontier, now: float, download: float = 0.01) -> Lease | None:
    """Pop one lease, answer robots with allow-all and pages with ok."""
    ready = f.pop_ready(now)
    if ready.lease is None:
        return None
    outcome = ROBOTS_OK if ready.lease.kind == LeaseKind.ROBOTS else OK
    f.done(ready.lease, outcome, now, now + download)
    return ready.lease


@pytest.mark.parametrize("reopen", [False, True])
def test_admit_refuses_duplicates_depth_and_budget(
    opener: Callable[..., Opener], reopen: bool
) -> None:
    o = opener(frontier={"max_depth": 3, "max_urls_per_host": 3})
    f = o.open()
    urls = [rec(f"http://a.test/{i}") for i in range(5)] + [rec("http://b.test/", depth=4)]
    assert f.admit(urls, 0.0) == 3
    if reopen:
        f = o.reopen(0.0)
    assert f.admit([rec("http://a.test/0"), rec("HTTP://A.test:80/1#x")], 0.0) == 0
    stats = f.stats()
    assert stats["frontier/admitted"] == 3
    # Past the host's cap a URL is counted, not recorded (the cap never lifts); a URL too
    # deep is recorded as refused.
    assert stats["frontier/capped/max_urls_per_host"] == 2
    assert stats["frontier/refused/max_depth"] == 1
    assert stats["frontier/duplicates"] == 2
    assert stats["frontier/pending"] == 3
    assert f.seen.state(url_key(host_hash("a.test"), f.fingerprint("http://a.test/3"))) is None
    assert f.seen.state(url_key(host_hash("b.test"), f.fingerprint("http://b.test/")))


@pytest.mark.parametrize("reopen", [False, True])
def test_refusals_are_counted_by_reason_and_host_and_logged_up_to_a_bound(
    opener: Callable[..., Opener], reopen: bool
) -> None:
    """A site larger than its cap shows as such: each refusal is counted under its reason and
    host, and the first ``refusals_logged_per_host`` of each pair are handed out to be logged,
    the last saying so; the tally survives a reopen and keeps counting."""
    o = opener(frontier={"max_urls_per_host": 2, "max_depth": 3, "refusals_logged_per_host": 3})
    f = o.open()
    big = [rec(f"http://big.test/{i}") for i in range(6)]
    f.admit(big + [rec("http://deep.test/a", depth=4), rec("http://big.test/0")], 0.0)
    assert [(r.url, reason, message) for r, reason, message in f.refused] == [
        ("http://big.test/2", "max_urls_per_host", ""),
        ("http://big.test/3", "max_urls_per_host", ""),
        ("http://big.test/4", "max_urls_per_host",
         "max_urls_per_host: 3 refusals on big.test logged; later ones are only counted"),
        ("http://deep.test/a", "max_depth", ""),
    ]
    f.refused.clear()
    if reopen:
        f = o.reopen(0.0)
    f.admit([rec(f"http://big.test/{i}") for i in range(4, 9)], 0.0)
    assert f.refused == [], "the bound holds across a reopen"
    stats = f.stats()
    # big.test/4 and /5 refused again: past a cap a refusal is counted each time, with no
    # record that could make it a duplicate.
    assert stats["frontier/capped/max_urls_per_host"] == 9
    assert stats["refusals/max_urls_per_host"] == 9
    assert stats["refusals/max_urls_per_host/big.test"] == 9
    assert stats["refusals/max_depth/deep.test"] == 1
    assert stats["frontier/duplicates"] == 1, "big.test/0, admitted before"
    assert describe([stats]) == (
        "10 refused: max_urls_per_host 9 (big.test 9), max_depth 1 (deep.test 1)"
    )


def test_a_damaged_refusals_tally_is_a_lost_report_not_a_lost_crawl(
    opener: Callable[..., Opener],
) -> None:
    o = opener(frontier={"max_depth": 0})
    f = o.open()
    f.admit([rec("http://a.test/x")], 0.0)
    f.commit(0.0, final=True)
    f.store.put("meta", b"refusals", b'{"totals": {"max_depth": "many"}')
    f.commit(0.0)
    f = o.reopen(0.0)
    f.admit([rec("http://a.test/y")], 0.0)
    stats = f.stats()
    assert stats["frontier/refusals_damaged"] == 1
    assert stats["refusals/max_depth"] == 1 and stats["frontier/refused/max_depth"] == 2


def test_refusals_of_countless_hosts_stay_bounded(opener: Callable[..., Opener]) -> None:
    """Refusals on more hosts than are counted by host: the totals stay exact, the stats name a
    few hosts per reason, and the hosts beyond the bound share one logging bound."""
    f = opener(frontier={"max_depth": 0, "refusals_logged_per_host": 2}).open()
    hosts = MAX_PAIRS + 50
    f.admit([rec(f"http://h{i}.test/") for i in range(hosts)], 0.0)
    stats = f.stats()
    assert stats["refusals/max_depth"] == hosts
    named = [k for k in stats if k.startswith("refusals/max_depth/")]
    assert len(named) == STATS_HOSTS
    assert len(f.refused) == MAX_PAIRS + 2
    assert "beyond the" in f.refused[-1][2]
    assert len(f.refusals.encode()) < 64 * MAX_PAIRS


@pytest.mark.parametrize("reopen", [False, True])
def test_robots_first_then_pages_with_delay(opener: Callable[..., Opener], reopen: bool) -> None:
    o = opener()
    f = o.open()
    f.admit([rec("http://a.test/1"), rec("http://a.test/2")], 0.0)
    first = lease_now(f, 0.0)
    assert first.kind == LeaseKind.ROBOTS and first.record.url == "http://a.test/robots.txt"
    assert f.pop_ready(0.0).lease is None, "one fetch per host at a time"
    f.done(first, ROBOTS_OK, 0.4, 0.5)  # 0.1 s x factor 10: next at 1.5
    f.commit(0.5)
    if reopen:
        f = o.reopen(0.5)
    ready = f.pop_ready(1.0)
    assert ready.lease is None and ready.wake_at == pytest.approx(1.5)
    page = lease_now(f, 1.5)
    assert page.kind == LeaseKind.PAGE and page.record.url in {"http://a.test/1", "http://a.test/2"}
    f.done(page, OK, 1.6, 1.7)
    assert f.pop_ready(2.6).lease is None
    assert lease_now(f, 2.7).kind == LeaseKind.PAGE
    assert f.stats()["frontier/done/ok"] == 1


def test_download_scaled_delay_and_retry_after(opener: Callable[..., Opener]) -> None:
    f = opener().open()
    f.admit([rec(f"http://a.test/{i}") for i in range(3)], 0.0)
    f.done(lease_now(f, 0.0), ROBOTS_OK, 0.0, 0.0)
    page = lease_now(f, 1.0)
    f.done(page, OK, 1.0, 1.5)  # 0.5 s download x factor 10 = 5 s
    assert f.pop_ready(6.49).lease is None
    page = lease_now(f, 6.5)
    f.done(page, Outcome("http_503", 503, retry_after=8.0), 6.5, 6.5)
    assert f.pop_ready(14.4).lease is None
    again = lease_now(f, 14.5)
    assert again.record.url == page.record.url and again.record.attempts == 1


def test_retries_then_final(opener: Callable[..., Opener]) -> None:
    f = opener(frontier={"max_retries": 2}).open()
    f.admit([rec("http://a.test/x")], 0.0)
    f.done(lease_now(f, 0.0), ROBOTS_OK, 0.0, 0.0)
    now = 1.0
    for attempt in range(3):
        lease = lease_now(f, now)
        assert lease.record.attempts == attempt
        f.done(lease, Outcome("timeout"), now, now + 0.1)
        now += 100.0
    stats = f.stats()
    assert stats["frontier/retried"] == 2
    assert stats["frontier/done/timeout"] == 1
    assert stats["frontier/pending"] == 0
    assert f.pop_ready(now).wake_at is None


def waits_after(f: Frontier, now: float, outcomes: list[Outcome]) -> list[float]:
    """Answer the host's next lease with each outcome in turn; the waits the host was given."""
    waits = []
    for outcome in outcomes:
        f.done(lease_now(f, now), outcome, now, now)
        ready = f.pop_ready(now)
        assert ready.lease is None and ready.wake_at is not None
        waits.append(ready.wake_at - now)
        now = ready.wake_at
    return waits


def run_host(f: Frontier, now: float, outcomes: dict[str, Outcome]) -> list[tuple[float, str]]:
    """Lease until nothing is left, answering each URL by ``outcomes`` (ok if not named);
    returns (time, URL) of every lease, the clock jumping to each wake-up."""
    leased: list[tuple[float, str]] = []
    while True:
        ready = f.pop_ready(now)
        if ready.lease is None:
            if ready.wake_at is None:
                return leased
            now = ready.wake_at
            continue
        url = ready.lease.record.url
        leased.append((now, url))
        f.done(ready.lease, outcomes.get(url, OK), now, now)


@pytest.mark.parametrize("reopen", [False, True])
def test_a_broken_page_backs_off_itself_not_its_host(
    opener: Callable[..., Opener], reopen: bool
) -> None:
    """Three pages answering 500 for ever among five good ones (delay 1 s, back-off 2 s then
    4 s): each broken page's tries are its back-off apart while its host goes on with its
    other URLs at its ordinary delay, so the host is done after its 14 requests (13 s), not
    after the sum of the chains (before: 3 × (2 + 4 + 1) + 5 = 26 s). The retries wait on
    disk: a crash while they wait loses none."""
    o = opener(robots={"enabled": False}, frontier={"max_retries": 2})
    f = o.open()
    bad = [f"http://a.test/bad/{i}" for i in range(3)]
    good = [f"http://a.test/ok/{i}" for i in range(5)]
    f.admit([rec(u) for u in bad + good], 0.0)
    failing = dict.fromkeys(bad, Outcome("http_500", 500))
    first: list[tuple[float, str]] = []
    for _ in range(2):  # two leases, then (maybe) a crash with both retries waiting
        ready = f.pop_ready(float(len(first)))
        assert ready.lease is not None
        first.append((float(len(first)), ready.lease.record.url))
        f.done(ready.lease, failing[ready.lease.record.url], len(first) - 1.0, len(first) - 1.0)
    assert f.stats()["frontier/retrying"] == 2 and f.stats()["frontier/pending"] == 8
    f.commit(2.0)
    if reopen:
        f = o.reopen(2.0, crash=True)
        assert f.stats()["frontier/retrying"] == 2
    leased = first + run_host(f, 2.0, failing)
    times = [t for t, _ in leased]
    assert Counter(u for _, u in leased) == {**dict.fromkeys(bad, 3), **dict.fromkeys(good, 1)}
    for url in bad:
        tries = [t for t, u in leased if u == url]
        assert tries[1] - tries[0] >= 2.0 and tries[2] - tries[1] >= 4.0, (url, tries)
    # The host never idles: 14 requests, each a second after the one before.
    assert times == [float(t) for t in range(14)], leased
    stats = f.stats()
    assert stats["frontier/done/http_500"] == 3 and stats["frontier/done/ok"] == 5
    assert stats["frontier/retrying"] == 0 and stats["frontier/pending"] == 0


def test_a_lone_retry_frees_its_host_and_rebinds_it_when_due(
    opener: Callable[..., Opener],
) -> None:
    """A host whose only URL waits for its retry gives its slot up; the retry brings it back."""
    f = opener(robots={"enabled": False}).open()
    f.admit([rec("http://a.test/x")], 0.0)
    f.done(lease_now(f, 0.0), Outcome("http_500", 500), 0.0, 0.0)
    stats = f.stats()
    assert stats["frontier/hosts/bound"] == 0 and stats["frontier/hosts/parked"] == 0
    assert stats["frontier/pending"] == 1 and f.pop_ready(1.9).wake_at == 2.0
    due = f.next_due()
    assert due is not None and due[0] == 2.0 and due[1].host_key == "a.test"
    assert lease_now(f, 2.0).record.attempts == 1


def test_retries_due_at_once_go_back_a_batch_a_turn(opener: Callable[..., Opener]) -> None:
    """However many retries come due together, a turn moves at most ``draw_batch`` of them
    back to their queues (their host's politeness then applies), and
    every one comes back."""
    f = opener(robots={"enabled": False}, frontier={"draw_batch": 8, "min_bound_hosts": 200},
               politeness={"min_delay": 0.0, "max_delay": 0.0}).open()
    urls = [f"http://h{i}.test/x" for i in range(50)]
    f.admit([rec(u) for u in urls], 0.0)
    for i in range(50):
        lease = lease_now(f, 0.0)
        f.done(lease, Outcome("http_500", 500), 0.0, 0.001 * i)
    assert f.stats()["frontier/retrying"] == 50 and f.pop_ready(1.0).lease is None
    first = f.pop_ready(10.0)
    assert first.lease is not None and f.stats()["frontier/retrying"] == 50 - 8
    back = [first.lease.record.url]
    while (lease := f.pop_ready(10.0).lease) is not None:
        back.append(lease.record.url)
    assert sorted(back) == sorted(urls) and f.stats()["frontier/retrying"] == 0


def test_a_failure_of_the_server_slows_the_host_and_the_url(
    opener: Callable[..., Opener],
) -> None:
    """A 503 speaks of the server: the host waits its back-off (2 s, not its 1 s delay), and
    the URL its own before its retry."""
    f = opener(robots={"enabled": False}).open()
    f.admit([rec("http://a.test/x"), rec("http://a.test/y"), rec("http://a.test/z")], 0.0)
    f.done(lease_now(f, 0.0), Outcome("http_503", 503), 0.0, 0.0)
    assert f.pop_ready(1.5).lease is None
    again = lease_now(f, 2.0)
    assert again.record.url == "http://a.test/x" and again.record.attempts == 1


def test_the_host_backs_off_for_its_own_failures_until_a_success(
    opener: Callable[..., Opener],
) -> None:
    """429, 503, refused connections and timeouts in a row, on different URLs, double the
    host's wait up to backoff_max (20 s); a 500 neither grows nor resets it; a success does."""
    f = opener(robots={"enabled": False}, frontier={"max_retries": 0}).open()
    f.admit([rec(f"http://a.test/{i}") for i in range(10)], 0.0)
    outcomes = [
        Outcome("http_503", 503), Outcome("timeout"), Outcome("http_500", 500),
        Outcome("connect"), Outcome("http_429", 429), Outcome("http_503", 503),
        Outcome("timeout"), OK, Outcome("http_503", 503),
    ]
    assert waits_after(f, 0.0, outcomes) == [2.0, 4.0, 4.0, 8.0, 16.0, 20.0, 20.0, 1.0, 2.0]


def test_a_host_failing_for_ever_waits_at_the_cap(opener: Callable[..., Opener]) -> None:
    """However long a host fails, its count stays bounded (it is stored as a u32) and its
    wait at backoff_max."""
    f = opener(robots={"enabled": False}, frontier={"max_retries": 0}).open()
    f.admit([rec(f"http://a.test/{i}") for i in range(MAX_FAILURES + 10)], 0.0)
    waits = waits_after(f, 0.0, [Outcome("timeout")] * (MAX_FAILURES + 5))
    assert waits[-1] == 20.0
    assert f.back.bound[host_hash("a.test")].failures == MAX_FAILURES


def test_not_contacted_outcome_keeps_the_clock(opener: Callable[..., Opener]) -> None:
    f = opener().open()
    f.admit([rec("http://a.test/private/1"), rec("http://a.test/2")], 0.0)
    f.done(lease_now(f, 0.0), ROBOTS_OK, 0.0, 0.0)
    first = lease_now(f, 1.0)
    f.done(first, Outcome("robots", contacted=False), 1.0, 1.0)
    assert lease_now(f, 1.0).kind == LeaseKind.PAGE, (
        "a URL refused by robots costs the host no delay")


def test_robots_unreachable_holds_its_origin_then_tries_again(
    opener: Callable[..., Opener]
) -> None:
    """An unreachable robots.txt no longer blocks the host for the rest of the crawl: its
    origin's robots.txt is leased again when ``robots_until`` comes (the worker ends the
    origin's URLs meanwhile), with its tries counted from the start again."""
    f = opener().open()
    f.admit([rec(f"http://bad.test/{i}") for i in range(4)], 0.0)
    lease = lease_now(f, 0.0)
    f.done(lease, Outcome("robots_retry", 503, retry_after=5.0), 0.0, 0.0)
    assert f.pop_ready(4.0).lease is None
    lease = lease_now(f, 5.0)
    assert lease.kind == LeaseKind.ROBOTS and lease.record.attempts == 1
    f.done(lease, Outcome("robots_unreachable", 503, robots_until=1000.0), 5.0, 5.0)
    page = lease_now(f, 100.0)
    assert page.kind == LeaseKind.PAGE, "the worker ends the origin's pages against its rules"
    f.done(page, Outcome("robots_unreachable", contacted=False), 100.0, 100.0)
    page = lease_now(f, 100.0)
    assert page.kind == LeaseKind.PAGE
    f.done(page, Outcome("robots_unreachable", contacted=False), 100.0, 100.0)
    f.admit([rec("http://bad.test/late")], 100.0)
    assert f.stats().get("frontier/refused/robots_unreachable", 0) == 0
    f.commit(100.0)
    retry = lease_now(f, 1000.0)
    assert retry.kind == LeaseKind.ROBOTS and retry.record.attempts == 0
    assert f.stats()["frontier/done/robots_unreachable"] == 2


def test_robots_txt_is_leased_per_scheme(opener: Callable[..., Opener]) -> None:
    """RFC 9309 section 2.3: http and https of one host each have their robots.txt."""
    o = opener()
    f = o.open()
    f.admit([rec("https://a.test/1")], 0.0)
    lease = lease_now(f, 0.0)
    assert (lease.kind, lease.record.url) == (LeaseKind.ROBOTS, "https://a.test/robots.txt")
    f.done(lease, ROBOTS_OK, 0.0, 0.0)
    f.done(lease_now(f, 10.0), Outcome("ok", 200), 10.0, 10.0)
    f.admit([rec("http://a.test/2")], 20.0)
    lease = lease_now(f, 20.0)
    assert (lease.kind, lease.record.url) == (LeaseKind.ROBOTS, "http://a.test/robots.txt")
    f.done(lease, ROBOTS_OK, 20.0, 20.0)
    f = o.reopen(20.0)
    f.admit([rec("http://a.test/3"), rec("https://a.test/4")], 30.0)
    for now in (40.0, 50.0):
        page = lease_now(f, now)
        assert page.kind == LeaseKind.PAGE, "each origin's robots.txt state survived the reopen"
        f.done(page, OK, now, now)


def test_priority_survives_the_back_end(opener: Callable[..., Opener]) -> None:
    o = opener(robots={"enabled": False})
    f = o.open()
    f.admit([rec(f"http://h{i}.test/", hint=level) for i, level in enumerate([5, 2, 8, 1, 3])], 0.0)
    order = [lease_now(f, 0.0).record.url for _ in range(5)]
    assert order == [f"http://h{i}.test/" for i in (3, 1, 4, 0, 2)]


def test_aging_lets_an_old_ready_host_go_first(opener: Callable[..., Opener]) -> None:
    f = opener(robots={"enabled": False}, frontier={"aging": 1.0}).open()
    f.admit([rec("http://low.test/a", hint=4), rec("http://low.test/b", hint=4)], 0.0)
    f.done(lease_now(f, 0.0), OK, 0.0, 0.0)  # low.test ready again at 1.0
    f.admit([rec("http://high.test/a", hint=1)], 0.0)
    f.pop_ready(0.5)  # binds high.test, ready at 0.5 (scheduled then)
    f.leased.clear()
    # low.test: 4 + 1.0 x 1.0 = 5.0 ; high.test: 1 + 0.5 = 1.5 -> high first at t=2
    assert f.pop_ready(2.0).lease is not None


def test_release_keeps_next_allowed(opener: Callable[..., Opener]) -> None:
    f = opener(robots={"enabled": False}).open()
    f.admit([rec("http://a.test/1")], 0.0)
    f.done(lease_now(f, 0.0), OK, 0.0, 0.5)  # queue empties: host released, next at 5.5
    assert f.stats()["frontier/hosts/bound"] == 0
    f.admit([rec("http://a.test/2")], 1.0)
    ready = f.pop_ready(1.0)
    assert ready.lease is None and ready.wake_at == pytest.approx(5.5)
    assert lease_now(f, 5.5).record.url == "http://a.test/2"


def test_long_backoff_parks_the_host(opener: Callable[..., Opener]) -> None:
    f = opener(
        robots={"enabled": False}, frontier={"park_horizon": 10.0},
        politeness={"retry_after_cap": 100.0},
    ).open()
    f.admit([rec("http://a.test/1"), rec("http://a.test/2")], 0.0)
    f.done(lease_now(f, 0.0), Outcome("http_429", 429, retry_after=60.0), 0.0, 0.0)
    stats = f.stats()
    assert stats["frontier/hosts/bound"] == 0 and stats["frontier/hosts/parked"] == 1
    assert f.pop_ready(49.0).lease is None
    assert f.pop_ready(59.9).lease is None
    assert lease_now(f, 60.0).record.attempts == 1


@pytest.mark.parametrize("reopen", [False, True])
def test_next_due_is_the_waiting_or_parked_host_that_goes_first(
    opener: Callable[..., Opener], reopen: bool
) -> None:
    o = opener(
        robots={"enabled": False}, frontier={"park_horizon": 10.0},
        politeness={"retry_after_cap": 100.0},
    )
    f = o.open()
    assert f.next_due() is None
    f.admit([rec("http://a.test/1"), rec("http://a.test/2"), rec("http://b.test/1"),
             rec("http://b.test/2")], 0.0)
    first, second = lease_now(f, 0.0), lease_now(f, 0.0)
    slow, fast = (first, second) if first.record.host_key == "a.test" else (second, first)
    f.done(slow, Outcome("http_429", 429, retry_after=60.0), 0.0, 0.0)
    f.done(fast, OK, 0.0, 0.01)
    f.commit(0.01)
    if reopen:
        f = o.reopen(0.01)
    due = f.next_due()
    assert due is not None and due[1].host_key == "b.test"
    serve(f, due[0])
    due = f.next_due()
    assert due is not None and due[1].host_key == "a.test" and due[0] == pytest.approx(60.0)
    assert due[1].failures == 1


def test_eviction_when_every_slot_waits(opener: Callable[..., Opener]) -> None:
    f = opener(
        robots={"enabled": False},
        frontier={"min_bound_hosts": 2, "max_bound_hosts": 2, "park_horizon": 1000.0},
        politeness={"min_delay": 50.0, "max_delay": 50.0},
    ).open()
    f.admit([rec(f"http://h{i}.test/{j}") for i in range(2) for j in range(3)], 0.0)
    for _ in range(2):
        serve(f, 0.0)
    f.admit([rec("http://new.test/1")], 1.0)
    lease = lease_now(f, 1.0)
    assert lease.record.url == "http://new.test/1"
    stats = f.stats()
    assert stats["frontier/evicted"] == 1 and stats["frontier/hosts/parked"] == 1
    f.done(lease, OK, 1.0, 1.0)
    assert f.pop_ready(49.9).lease is None, "an evicted host keeps its next-allowed time"
    assert sum(serve(f, 51.0) is not None for _ in range(3)) == 2


def test_block_drains_a_host(opener: Callable[..., Opener]) -> None:
    f = opener(robots={"enabled": False}).open()
    f.admit([rec(f"http://a.test/{i}") for i in range(3)] + [rec("http://b.test/")], 0.0)
    f.pop_ready(0.0)
    f.leased.clear()
    f.block("a.test", "denied", 0.0)
    f.block("b.test", "denied", 0.0)
    f.admit([rec("http://a.test/later")], 0.0)
    stats = f.stats()
    assert stats.get("frontier/done/denied", 0) + stats.get("frontier/refused/denied", 0) >= 2


def test_counters_survive_reopen_and_crash(opener: Callable[..., Opener]) -> None:
    o = opener(robots={"enabled": False})
    f = o.open()
    f.admit([rec(f"http://h{i}.test/{j}") for i in range(3) for j in range(4)], 0.0)
    for step in range(4):
        serve(f, step * 2.0)
    f.commit(10.0)
    before = f.stats()
    f.admit([rec("http://h0.test/uncommitted")], 10.0)
    f = o.reopen(10.0, crash=True)
    after = f.stats()
    for key in ("frontier/admitted", "frontier/pending", "frontier/done/ok"):
        assert after[key] == before[key], key


def test_chooser_distribution(opener: Callable[..., Opener]) -> None:
    """100,000 draws over 4 non-empty levels match weights 1, 1/2, 1/4, 1/8 within 2%."""
    f = opener(frontier={"levels": 4}).open(seed=42)
    f.front.sizes = [1, 1, 1, 1]
    f.front._reweigh()
    draws = Counter(f.front.choose() for _ in range(100_000))
    weights = [1, 0.5, 0.25, 0.125]
    for level, weight in enumerate(weights, 1):
        expected = weight / sum(weights)
        assert abs(draws[level] / 100_000 - expected) < 0.02 * expected + 0.002, (level, draws)
    f.front.sizes = [0, 1, 0, 1]
    f.front._reweigh()
    draws = Counter(f.front.choose() for _ in range(20_000))
    assert set(draws) == {2, 4}
    assert abs(draws[2] / 20_000 - 0.8) < 0.02
    f.front.sizes = [0, 0, 0, 0]
    f.front._reweigh()


def test_no_ready_host_starves(opener: Callable[..., Opener]) -> None:
    """More ready hosts than the caller serves: each is served within the stated bound.

    Bound: a host ready at t goes before any host that became ready after
    t + (levels - 1) / aging. With 40 hosts, levels 1..8, aging 1/s, one fetch
    served every 0.1 s and a 1 s delay, every host is served within
    (levels - 1) / aging + hosts × 0.1 s of becoming ready.
    """
    f = opener(
        robots={"enabled": False}, frontier={"aging": 1.0, "min_bound_hosts": 64},
        politeness={"min_delay": 1.0, "max_delay": 1.0},
    ).open()
    f.admit(
        [rec(f"http://h{i}.test/{j}", hint=1 + i % 8) for i in range(40) for j in range(50)], 0.0
    )
    ready_since: dict[int, float] = {}
    worst = 0.0
    now = 0.0
    for _ in range(1200):
        f.heap.promote(now, f._head_level)
        for hh, is_ready in f.heap._where.items():
            if is_ready:
                ready_since.setdefault(hh, now)
        lease = serve(f, now, download=0.0)
        if lease is not None:
            worst = max(worst, now - ready_since.pop(lease.host_hash, now))
        now += 0.1
    assert worst <= 7.0 + 40 * 0.1, worst


def test_a_host_state_keeps_its_sitemap_count_and_reads_one_from_before() -> None:
    from hive.frontier.hosts import HostState

    state = HostState("a.test")
    old = state.encode()
    state.sitemaps = 3
    assert HostState.decode(state.encode()).sitemaps == 3
    assert HostState.decode(old).sitemaps == 0 and len(old) < len(state.encode())


def test_hosts_held_back_at_their_address_do_not_take_the_other_hosts_slots(
        opener: Callable[..., Opener]) -> None:
    """Leased hosts waiting for a start slot at a shared address (Frontier.held_back) are
    added to the bound-host target, up to frontier.max_bound_hosts, so hosts at other
    addresses are still bound and leased meanwhile."""
    f = opener(politeness={"min_delay": 0.0, "delay_factor": 0.0},
               fetch={"threads": 1},
               frontier={"min_bound_hosts": 2, "max_bound_hosts": 5}).open()
    f.admit([rec(f"http://h{i}.test/") for i in range(8)], 0.0)
    assert f.target_bound() == 2
    leased = [f.pop_ready(0.0).lease for _ in range(2)]
    assert all(leased) and f.pop_ready(0.0).lease is None
    f.held_back = 2  # both wait for their address
    f.commit(0.0)
    assert f.target_bound() == 4 and f.pop_ready(0.0).lease is not None
    f.held_back = 100
    f.commit(0.0)
    assert f.target_bound() == 5
