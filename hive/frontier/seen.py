"""SeenSet: every admitted URL's fingerprint and its one state, and which discovery wins.

A fingerprint is ``host_hash | url_hash`` (two 64-bit mmh3 hashes), so a host's
fingerprints are one key range and move with the host. Insertion refuses
duplicates in the same LMDB put that records the URL as pending; the state is
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
  entry (``upgrade``); the entry queued before is superseded and dropped when
  it comes up (``live``), so nothing is fetched twice.
- a URL refused at admission (too deep, over a host's sitemap files) was
  refused for how it was found: a later discovery that passes admission
  overturns the refusal (``overturn``).
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
    pending_entry,
    pending_state,
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

    def add(self, key: bytes, record: UrlRecord) -> bool:
        """Record a new URL as pending, ``record`` its live entry; False if it was seen before."""
        store = self.store
        store.ops += 1
        return bool(store.txn.put(
            key, pending_state(record.kind, record.depth), overwrite=False, db=self._db))

    def upgrade(self, key: bytes, record: UrlRecord) -> None:
        """Make ``record`` the live entry of a pending or refused URL (see the docstring)."""
        store = self.store
        store.txn.put(key, pending_state(record.kind, record.depth), db=self._db)
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

    def live(self, key: bytes, record: UrlRecord) -> bool:
        """Whether a queued ``record`` is its URL's live entry (else it is superseded: a
        stronger discovery took its place, or the URL is done). A bare ``p`` names
        whichever entry there is."""
        state = self.store.get("urls", key)
        return state is not None and is_live(state, record)


def is_live(state: bytes, record: UrlRecord) -> bool:
    """Whether ``record`` is the live entry of a URL in ``state`` (see ``SeenSet.live``)."""
    return state == PENDING or state == pending_state(record.kind, record.depth)
