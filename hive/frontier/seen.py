"""SeenSet: every admitted URL's fingerprint and its one state, and which discovery wins.

A fingerprint is ``host_hash | url_hash`` (two 64-bit mmh3 hashes), so a host's
fingerprints are one key range and move with the host. A new URL is recorded as
pending (``place``: hive.storage.schema ``Pending``, which names the level and seq
of its queue entry and keeps its evidence, hive.frontier.evidence); the state is
later overwritten with ``d<outcome>`` (done) or was written as ``r<reason>``
(refused at admission). A leased URL is pending here and named in ``leases``.

**How a URL was first found never stops a stronger discovery of it.** A
pending state names its *live* queue entry by the record's kind and depth
(hive.storage.schema), so a URL found again is compared with how it is queued:

- a discovery is *stronger* when its kind reads more of the URL (``RANK``: a
  page listed by a sitemap of another origin, which that origin's robots.txt
  must vouch for, < a page < a feed or a sitemap), or when it is the same kind
  found by a shorter path (a smaller depth: a seed, a sitemap entry, a shorter
  chain of links). A stronger discovery of a pending URL becomes its live
  entry (its state names the new entry's place, its evidence kept); the entry
  queued before is superseded and dropped when it comes up (``live``), so
  nothing is fetched twice.
- a URL refused at admission (too deep, over a host's sitemap files) was
  refused for how it was found: a later discovery that passes admission
  overturns the refusal.
- a page listed by a sitemap its origin does not vouch for leaves the seen
  set when refused at lease time (``forget``), unless a stronger discovery
  has taken its place meanwhile.

A done URL is never fetched again, however it is found later. Each upgrade is
stronger than the last (the rank never falls, the depth falls within a kind), so a
URL has at most 2 x (``max_depth`` + 1) + 1 queue entries: a listing, then a
page and a feed (or sitemap) at each depth from ``max_depth`` to 0.
"""

from __future__ import annotations

from hive.core.record import FEED, LISTED, PAGE, SITEMAP, UrlRecord
from hive.storage.schema import (
    DONE,
    PENDING,
    REFUSED,
    Pending,
    pending,
    pending_entry,
)
from hive.storage.store import Store

# How much of a URL a kind of discovery reads: a listed page needs its origin's word.
RANK = {LISTED: 0, PAGE: 1, FEED: 2, SITEMAP: 2}


def stronger(record: UrlRecord, state: bytes) -> bool:
    """True if ``record`` is a stronger discovery than the live entry ``state`` names
    (False for a state that names none: done, refused, or a bare ``p``)."""
    entry = pending_entry(state)
    if entry is None:
        return False
    kind, depth = entry
    rank, old = RANK[record.kind], RANK.get(kind, RANK[SITEMAP])
    # Two listings of one page by sitemaps of other origins are not ranked (which one its
    # origin vouches for is known at lease time): the first stays, so a URL whose listed
    # entry is live has no other entry, and a refusal at lease time can forget it.
    return rank > old or (record.kind == kind != LISTED and record.depth < depth)


class SeenSet:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._db = store.db["urls"]

    def place(self, key: bytes, state: Pending) -> None:
        """Record a URL as pending, its live entry and evidence ``state`` (a new URL, a
        stronger discovery, an overturned refusal, new evidence, a move)."""
        store = self.store
        store.txn.put(key, state.encode(), db=self._db)
        store.ops += 1

    def refuse(self, key: bytes, reason: str) -> bool:
        """Record a new URL as refused; False if it was seen before."""
        return self.store.put("urls", key, REFUSED + reason.encode(), overwrite=False)

    def finish(self, key: bytes, outcome: str) -> None:
        store = self.store
        store.txn.put(key, DONE + outcome.encode(), db=self._db)
        store.ops += 1

    def forget(self, key: bytes) -> None:
        """Drop a URL refused after its lease: it may be admitted again."""
        store = self.store
        store.txn.delete(key, db=self._db)
        store.ops += 1

    def state(self, key: bytes) -> bytes | None:
        return self.store.get("urls", key)

    def live(self, key: bytes, record: UrlRecord, level: int, seq: int) -> bool:
        """Whether ``record``, queued at ``level`` and ``seq``, is its URL's live entry
        (else it is superseded: a stronger discovery took its place, or the URL is done)."""
        state = self.store.get("urls", key)
        return state is not None and is_live(state, record, level, seq)


def is_live(state: bytes, record: UrlRecord, level: int, seq: int) -> bool:
    """Whether ``record`` queued at ``level`` and ``seq`` is the live entry of a URL in
    ``state``: the entry the state names by its place; a state written before states named
    it names it by the record's kind and depth, a bare ``p`` names whichever there is."""
    if state == PENDING:
        return True
    entry = pending(state)
    if entry is None:
        return False
    if entry.level:
        return entry.seq == seq and entry.level == level
    return entry.kind == record.kind and entry.depth == min(record.depth, 0xFFFF)
