"""RecentLinks remembers the last half of its budget and stays within its memory budget."""

from __future__ import annotations

import sys
import tracemalloc

import pytest

from hive.core.recentlinks import RecentLinks


def _two_url_budget(urls: list[str]) -> int:
    """A budget whose generations take exactly two of these (equally long) URLs."""
    return 2 * (sys.getsizeof(set()) + 2 * sys.getsizeof(urls[0]))


def test_recent_links_remember_between_half_and_all_of_their_budget() -> None:
    urls = [f"http://a.test/{i}" for i in range(6)]
    recent = RecentLinks(_two_url_budget(urls))
    for url in urls:
        recent.add(url)
    assert not any(url in recent for url in urls[:4]), "forgotten after two generations"
    assert all(url in recent for url in urls[4:]), "the last half of the budget is always there"


def test_recent_links_keep_what_is_touched() -> None:
    urls = [f"http://a.test/{i}" for i in range(4)]
    recent = RecentLinks(_two_url_budget(urls))
    recent.add(urls[0])
    recent.add(urls[1])
    assert urls[0] in recent, "a hit in the old generation moves it to the young one"
    recent.add(urls[2])
    recent.add(urls[3])
    assert urls[0] in recent
    assert urls[1] not in recent


@pytest.mark.parametrize("budget_kb", [64, 300, 1024])
@pytest.mark.parametrize("host_length", [1, 40])
def test_recent_links_stay_within_their_memory_budget(budget_kb: int, host_length: int) -> None:
    """What the cache counts is what tracemalloc sees (strings and set tables), and the
    count stays within 1.5 x the budget (a filling generation's last table growth)."""
    budget = budget_kb << 10
    tracemalloc.start()
    try:
        recent = RecentLinks(budget)
        start = tracemalloc.get_traced_memory()[0]
        worst = 0.0
        for i in range(budget // 40):
            recent.add(f"http://{'h' * host_length}.test/{i}")  # the cache its only holder
            worst = max(worst, recent.held_bytes / budget)
            if i % 500 == 0:
                traced = tracemalloc.get_traced_memory()[0] - start
                assert abs(traced - recent.held_bytes) <= 0.1 * budget, (traced, recent.held_bytes)
    finally:
        tracemalloc.stop()
    assert recent.held_bytes >= budget / 2, "at least half the budget stays in use"
    assert worst <= 1.5, f"{worst:.2f} x the budget at worst"
