"""Retries: URLs waiting out their retry's back-off, on disk, out of their host's queue.

A URL whose fetch failed in a way that is retried (``frontier.retry_outcomes``)
leaves its host's back queue for the ``retries`` db, keyed by when it is due
and by the back key it left (``due_ms|host|level|seq``, hive/storage/schema.py),
in the transaction that records its outcome: so its host goes on with its other
URLs at its ordinary delay, a crash loses no retry (the move is committed whole
or not at all), and the URL is in exactly one place, never leased twice. When
due, the frontier puts it back under the same back key, in its old place in the
queue, and its host's politeness applies as to any URL.

Memory: the count and the first key, never the entries (a server can fail any
number of pages); the first key is read from disk only when it is unknown.
"""

from __future__ import annotations

from hive.storage.schema import U64, retry_key
from hive.storage.store import Store


class Retries:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._db = store.db["retries"]
        self.count = store.entries("retries")
        # The first key (due millis, back key), or None when none waits; read when unknown.
        self._first: tuple[int, bytes] | None = None
        self._first_known = False

    def __len__(self) -> int:
        return self.count

    def wait(self, back: bytes, record: bytes, due: float) -> None:
        """Keep a URL that left the back key ``back`` until ``due``."""
        key = retry_key(due, back)
        store = self.store
        store.txn.put(key, record, db=self._db)
        store.ops += 1
        self.count += 1
        entry = U64.unpack_from(key)[0], back
        if self._first_known and (self._first is None or entry < self._first):
            self._first = entry

    def first_due(self) -> float | None:
        """When the first waiting URL is due (None: none waits)."""
        if not self._first_known:
            cursor = self.store.txn.cursor(self._db)
            if cursor.first():
                key = bytes(cursor.key())
                self._first = U64.unpack_from(key)[0], key[8:]
            else:
                self._first = None
            self._first_known = True
        return None if self._first is None else self._first[0] / 1000.0

    def first_host(self) -> int | None:
        """The host hash of the first waiting URL (None: none waits)."""
        if self.first_due() is None or self._first is None:
            return None
        return int(U64.unpack_from(self._first[1])[0])

    def take_due(self, now: float, limit: int) -> list[tuple[bytes, bytes]]:
        """Remove up to ``limit`` URLs due by ``now`` and return them, due first first:
        (back key, record)."""
        first = self.first_due()
        if first is None or first > now:
            return []
        store = self.store
        cursor = store.txn.cursor(self._db)
        cursor.first()
        due_ms = now * 1000
        taken: list[tuple[bytes, bytes]] = []
        while len(taken) < limit:
            key = bytes(cursor.key())
            if not key or U64.unpack_from(key)[0] > due_ms:
                break
            taken.append((key[8:], bytes(cursor.value())))
            cursor.delete()  # and the cursor moves on to the next entry
        store.ops += len(taken)
        self.count -= len(taken)
        self._first_known = False
        return taken
