"""RecentLinks: the URLs a sender handed on a moment ago, kept within a memory budget.

A page repeats its neighbours' links; a worker drops those it sent a moment
ago before they cost a hop to the splitter and an outbox write
(hive.procs.outbox). The owner's seen set is what makes admission exact: this
cache only saves work, so forgetting is always safe.

With in-link evidence on (``priority.inlink_levels``, hive.frontier.evidence),
each link is also evidence for its owner of one host linking to the URL: the
cache then holds a link by the host of the page it was found on too
(``recent_key``'s ``linker``), so it drops the repeats one host makes, which
are no new evidence (a site's navigation on every page), and lets a link from
another host through.
"""

from __future__ import annotations

import sys

# Bound once: every link handed on is measured.
_sizeof = sys.getsizeof


def recent_key(url: str, kind: str, linker: str = "") -> str:
    """What the cache holds for a URL handed on as a record of ``kind``: the URL for a
    page, else the kind and the URL, so that a URL handed on as one kind does not hide
    it handed on as another (a feed a page also links, a listed page a link reaches:
    hive.frontier.seen says which discovery wins); and before it the host key of the
    page it was found on, ``linker``, when in-links are evidence (the module docstring)."""
    key = f"{kind}\0{url}" if kind else url
    return f"{linker}\0{key}" if linker else key


class RecentLinks:
    """Links handed on a moment ago, by canonical URL (a page repeats its neighbours' links).

    The fetch threads consult it before a link costs a scope check, a record, a
    hop to the splitter and an outbox write. It is sized by memory, not by
    count: two generations of sets, each taking URLs until its strings and its
    hash table (``sys.getsizeof``) reach half of ``budget`` bytes. A hit in the
    old generation moves to the young one, and a full young generation
    replaces the old one, so it keeps at least the last ``budget / 2`` bytes
    of URLs and holds about ``budget``: the add that fills a generation may
    have grown its table (CPython quadruples a small set's), which can take
    the cache past its budget by a third for short URLs, whose table weighs
    most; ``tests/frontier/test_recentlinks.py`` holds it under 1.5 x ``budget``.

    Every step is one set operation, atomic under the GIL, so fetch threads
    share it without a lock; a race at worst lets a repeat through (the owner's
    seen set drops it) or miscounts a URL's bytes until the next generation.
    """

    def __init__(self, budget: int) -> None:
        self._half = budget // 2
        self._young: set[str] = set()
        self._young_bytes = 0
        self._old: set[str] = set()
        self._old_bytes = 0

    def __contains__(self, url: str) -> bool:
        if url in self._young:
            return True
        if url in self._old:
            self.add(url)
            return True
        return False

    def add(self, url: str) -> None:
        """Keep url in the young generation, which replaces the old one once full."""
        young = self._young
        young.add(url)
        self._young_bytes += _sizeof(url)
        held = self._young_bytes + _sizeof(young)
        if held >= self._half:
            self._old, self._old_bytes = young, held
            self._young, self._young_bytes = set(), 0

    def forget(self, url: str) -> None:
        """Drop a URL that was not handed on after all (its bytes stay counted until
        its generation goes)."""
        self._young.discard(url)
        self._old.discard(url)

    @property
    def held_bytes(self) -> int:
        """The bytes both generations hold, as the budget counts them."""
        return self._young_bytes + sys.getsizeof(self._young) + self._old_bytes
