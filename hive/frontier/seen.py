"""SeenSet: every admitted URL's fingerprint and its one state.

A fingerprint is ``host_hash | url_hash`` (two 64-bit mmh3 hashes), so a host's
fingerprints are one key range and move with the host. Insertion refuses
duplicates in the same LMDB put that records the URL as pending; the state is
later overwritten with ``d<outcome>`` (done) or was written as ``r<reason>``
(refused at admission). A leased URL is pending here and named in ``leases``.
"""

from __future__ import annotations

from hive.storage.schema import DONE, PENDING, REFUSED
from hive.storage.store import Store


class SeenSet:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._db = store.db["urls"]

    def add(self, key: bytes) -> bool:
        """Record a new URL as pending; False if it was seen before."""
        store = self.store
        store.ops += 1
        return bool(store.txn.put(key, PENDING, overwrite=False, db=self._db))

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
