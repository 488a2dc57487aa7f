"""In-link evidence at the owner: a queued URL rises as links to it arrive, moved from
its level to the new one (front or back queue) in one place, never lost or doubled."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from hive.config import PriorityConfig
from hive.core.lease import LeaseKind
from hive.core.record import UrlRecord, quantize, unquantize
from hive.core.urls import fingerprint, host_hash
from hive.frontier.evidence import LevelRule, distinct, linker_bit
from hive.frontier.frontier import Frontier
from hive.frontier.heap import ReadyHeap
from hive.storage.schema import HOST_LEVEL_SEQ, LEVEL_SEQ, Pending, pending, url_key
from tests.frontier.conftest import Opener, rec
from tests.frontier.test_discovery import REOPEN, pages, settle, verified
from tests.frontier.test_frontier import OK, ROBOTS_OK

TARGET = "http://t.test/deep/page.html"
INLINKS = {"inlink_levels": 1.0}  # on: off by default (conf/default.toml)


def link(url: str, via: str, depth: int = 3, score: int = 0) -> UrlRecord:
    record = rec(url, depth)
    record.via, record.score = via, score
    return record


def state(f: Frontier, url: str) -> Pending:
    record = rec(url)
    found = f.seen.state(url_key(host_hash(record.host_key), fingerprint(record.url)))
    assert found is not None
    placed = pending(found)
    assert placed is not None, found
    return placed


def places(f: Frontier, url: str) -> list[str]:
    """Every queue entry of ``url``: where it is, by key."""
    found = []
    for key, value in f.store.range("front", b""):
        if UrlRecord.decode(value).url == url:
            found.append(f"front {LEVEL_SEQ.unpack(key)}")
    for key, value in f.store.range("back", b""):
        if UrlRecord.decode(value).url == url:
            found.append(f"back {HOST_LEVEL_SEQ.unpack(key)[1:]}")
    return found


def from_hosts(url: str, first: int, count: int) -> list[UrlRecord]:
    return [link(url, f"http://l{i}.test/") for i in range(first, first + count)]


def test_the_level_rule() -> None:
    rule = LevelRule(PriorityConfig(1.0, "", 1.0, 4.0), 8)
    assert [rule.level(6, (1 << n) - 1, 0) for n in (0, 1, 2, 4, 8)] == [6, 6, 5, 4, 3]
    assert rule.level(6, (1 << 64) - 1, 0) == 1, "clamped to 1"
    assert rule.level(4, 0, quantize(1.0)) == 2 and rule.level(4, 0, quantize(0.0)) == 6
    assert rule.level(4, 0, quantize(0.5)) == 4 and rule.level(4, 0, 0) == 4, "0: no score"
    assert rule.level(8, 0, quantize(0.0)) == 8, "clamped to the levels"
    off = LevelRule(PriorityConfig(0.0, "", 1.0, 0.0), 8)
    assert not off.enabled and off.level(5, (1 << 20) - 1, quantize(1.0)) == 5
    assert unquantize(quantize(0.25)) == pytest.approx(0.25, abs=1 / 254)
    assert unquantize(0) is None


def test_the_sketch_counts_distinct_hosts_within_ten_percent() -> None:
    """Linear counting over 64 bits: over 200 sets of n host names (seeded), the mean
    estimate is within 10 % of n up to 128 hosts; each one is never above ~266."""
    rng = random.Random(7)
    for n in (1, 4, 16, 64, 128):
        estimates = []
        for _ in range(200):
            sketch = 0
            for _ in range(n):
                sketch |= linker_bit(f"http://h{rng.getrandbits(40):x}.example/p.html")
            estimates.append(distinct(sketch))
        assert sum(estimates) / len(estimates) == pytest.approx(n, rel=0.1), n
        assert max(estimates) <= 64 * math.log(64)
    assert linker_bit("") == 0, "a seed has no linking page"
    assert linker_bit("http://a.test/x") == linker_bit("http://a.test/y/z"), "by host"
    assert linker_bit("http://a.test:8080") != 0


@pytest.mark.parametrize("reopen", REOPEN)
def test_a_url_in_the_front_rises_as_hosts_link_to_it(
    opener: Callable[..., Opener], reopen: str
) -> None:
    o = opener(robots={"enabled": False}, priority=INLINKS)
    f = o.open()
    f.admit([link(TARGET, "http://l0.test/")], 0.0)
    first = state(f, TARGET)
    assert (first.level, first.base) == (4, 4), "depth 3: the default prioritizer's level 4"
    f.admit(from_hosts(TARGET, 1, 7), 0.0)
    f = settle(o, f, reopen)
    risen = state(f, TARGET)
    assert risen.level < first.level and risen.base == first.base
    assert risen.linkers.bit_count() >= 6, "eight hosts, a collision or two at most"
    assert places(f, TARGET) == [f"front {(risen.level, risen.seq)}"], "moved, not copied"
    assert f.counts["priority/moved/front"] >= 1
    f.admit(from_hosts(TARGET, 1, 7), 0.0)
    assert state(f, TARGET) == risen, "the same hosts again add nothing"
    verified(o, f)


def test_a_url_in_its_hosts_back_queue_moves_ahead_of_its_host(
    opener: Callable[..., Opener],
) -> None:
    o = opener(robots={"enabled": False}, priority=INLINKS)
    f = o.open()
    others = [f"http://t.test/p/{i}.html" for i in range(6)]
    f.admit([link(url, "http://t.test/", depth=1) for url in others], 0.0)
    f.admit([link(TARGET, "http://t.test/")], 0.0)
    f.pop_ready(0.0)  # draws the front into t.test's back queue and leases its first URL
    lease = next(iter(f.leased.values()))
    assert places(f, TARGET)[0].startswith("back "), places(f, TARGET)
    f.admit(from_hosts(TARGET, 1, 40), 0.0)
    assert state(f, TARGET).level == 1 and f.counts["priority/moved/back"] >= 1
    assert places(f, TARGET) == [f"back {(1, state(f, TARGET).seq)}"]
    f.done(lease, OK, 0.0, 0.01)
    served = [record.url for record in pages(f, 10.0)]
    assert served[0] == TARGET, "its host's next fetch: from its last place to its first"
    assert sorted(served) == sorted([TARGET, *others[1:]]), "every URL once"
    verified(o, f)


def test_a_leased_url_stays_in_flight_and_keeps_its_evidence(
    opener: Callable[..., Opener],
) -> None:
    o = opener(robots={"enabled": True}, priority=INLINKS)
    f = o.open()
    f.admit([link(TARGET, "http://l0.test/")], 0.0)
    robots = f.pop_ready(0.0).lease
    assert robots is not None and robots.kind is LeaseKind.ROBOTS
    f.done(robots, ROBOTS_OK, 0.0, 0.01)
    lease = f.pop_ready(5.0).lease
    assert lease is not None and lease.record.url == TARGET
    f.admit(from_hosts(TARGET, 1, 20), 5.0)
    held = state(f, TARGET)
    assert held.level == 4 and held.linkers.bit_count() > 10, "not moved while in flight"
    f.done(lease, OK, 5.0, 5.01)
    assert pages(f, 10.0) == []
    verified(o, f)


def test_the_best_linking_score_lifts_and_a_worse_one_does_not_lower(
    opener: Callable[..., Opener],
) -> None:
    o = opener(robots={"enabled": False}, priority={"score_levels": 4.0, "inlink_levels": 0.0})
    f = o.open()
    f.admit([link(TARGET, "http://l0.test/", score=quantize(0.5))], 0.0)
    assert state(f, TARGET).level == 4
    f.admit([link(TARGET, "http://l0.test/", score=quantize(1.0))], 0.0)
    assert state(f, TARGET).level == 2 and state(f, TARGET).score == quantize(1.0)
    f.admit([link(TARGET, "http://l9.test/", score=quantize(0.0))], 0.0)
    assert state(f, TARGET).level == 2 and state(f, TARGET).score == quantize(1.0)
    verified(o, f)


def test_off_no_url_moves(opener: Callable[..., Opener]) -> None:
    o = opener(robots={"enabled": False}, priority={"inlink_levels": 0.0, "score_levels": 0.0})
    f = o.open()
    f.admit([link(TARGET, "http://l0.test/")], 0.0)
    f.admit(from_hosts(TARGET, 1, 40), 0.0)
    assert state(f, TARGET).level == 4 and state(f, TARGET).linkers == 0
    assert "priority/evidence" not in f.counts
    verified(o, f)


def test_a_ready_host_whose_head_rose_is_ranked_again() -> None:
    heap = ReadyHeap(aging=1.0)
    heap.schedule(1, 0.0, 0.0)
    heap.schedule(2, 0.0, 0.0)
    heap.promote(0.0, {1: 3, 2: 5}.__getitem__)
    heap.improve(2, 1)
    heap.improve(3, 1)  # not in the heap: nothing
    assert [heap.pop(), heap.pop(), heap.pop()] == [2, 1, None]
    heap.schedule(1, 5.0, 0.0)
    heap.improve(1, 1)  # waiting, not ready: it ranks when it becomes ready
    assert heap.pop() is None and len(heap) == 1


@pytest.mark.parametrize("queued", [10, 2000])
def test_a_link_costs_a_bounded_number_of_writes_however_long_the_queues(
    opener: Callable[..., Opener], queued: int
) -> None:
    """Evidence is a state write and, when the URL rises, one delete and one put: no scan,
    so the writes a link costs do not grow with what is queued before or after it."""
    o = opener(robots={"enabled": False}, priority=INLINKS)
    f = o.open()
    f.admit([link(f"http://t.test/q/{i}", "http://t.test/") for i in range(queued)], 0.0)
    f.admit([link(TARGET, "http://l0.test/")], 0.0)
    f.admit([link(f"http://t.test/r/{i}", "http://t.test/") for i in range(queued)], 0.0)
    f.commit(0.0)
    before = f.store.ops
    f.admit(from_hosts(TARGET, 1, 63), 0.0)
    assert state(f, TARGET).level == 1
    writes = f.store.ops - before
    moves = f.counts["priority/moved/front"]
    assert writes <= f.counts["priority/evidence"] + 2 * moves <= 63 + 2 * 3, (writes, moves)
    verified(o, f)
