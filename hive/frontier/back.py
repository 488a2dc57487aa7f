"""BackQueues: Mercator's back end — one FIFO per host, a bounded host table, parking.

Each host's queue is the key range ``host_hash|level|seq`` of the ``back`` db,
so its best URL (lowest level, then oldest) is its first key. At most b hosts
are *bound* (hold a slot, have a heap entry, their state in memory); every
other host with queued URLs is *parked*: its URLs and state stay on disk and an
entry ``time|host`` in ``parked`` says when it is due. Memory is therefore
bounded by b, never by the number of pending URLs. ``bound`` mirrors the slot
table on disk so a restart can put every host back in play.

A bound host carries its queue's head in memory (``HostState.head``): it is
read once when the host binds and then kept up to date by every change to the
queue, so leasing a URL reads nothing and finishing one reads its successor in
the same cursor step that deletes it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from hive.frontier.hosts import HostState
from hive.storage.schema import HOST_LEVEL_SEQ, TIME_HOST, U64, parked_key
from hive.storage.store import Store


class BackQueues:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._db = store.db["back"]
        self._hosts_db = store.db["hosts"]
        self.bound: dict[int, HostState] = {}
        self._slots: list[int] = []
        self._slot_of: dict[int, int] = {}
        self.queued = 0
        # The first ``parked`` key as (millis, host hash), or None when none is parked;
        # read from disk only when unknown, so a turn does not open a cursor to learn it.
        self._first_parked: tuple[int, int] | None = None
        self._first_parked_known = False

    def host(self, host_hash: int) -> HostState | None:
        """A host's state: from the slot table when bound, else from disk."""
        state = self.bound.get(host_hash)
        if state is not None:
            return state
        data = self.store.get("hosts", U64.pack(host_hash))
        return HostState.decode(data) if data is not None else None

    def save(self, host_hash: int, state: HostState) -> None:
        store = self.store
        store.txn.put(U64.pack(host_hash), state.encode(), db=self._hosts_db)
        store.ops += 1

    def append(
        self, host_hash: int, state: HostState, level: int, seq: int, record: bytes
    ) -> bytes:
        """Queue a record for the host; returns its back key."""
        key = HOST_LEVEL_SEQ.pack(host_hash, level, seq)
        store = self.store
        store.txn.put(key, record, db=self._db)
        store.ops += 1
        state.queued += 1
        self.queued += 1
        head = state.head
        if head is not None and key < head[0]:
            state.head = key, record
        return key

    def read_head(self, host_hash: int) -> tuple[bytes, bytes] | None:
        """The host's best URL read from disk: (back key, record bytes), or None if none."""
        prefix = U64.pack(host_hash)
        cursor = self.store.back_cursor
        if not cursor.set_range(prefix):
            return None
        key = bytes(cursor.key())
        if key[:8] != prefix:
            return None
        return key, bytes(cursor.value())

    def remove(self, key: bytes, state: HostState) -> None:
        """Delete a queued URL, advancing the host's head past it if it was the head."""
        cursor = self.store.back_cursor
        if not cursor.set_key(key):
            raise AssertionError(f"back key {key.hex()} is not queued")
        cursor.delete()
        self.store.ops += 1
        state.queued -= 1
        self.queued -= 1
        head = state.head
        if head is not None and head[0] == key:
            after = bytes(cursor.key())
            state.head = (after, bytes(cursor.value())) if after[:8] == key[:8] else None

    def move(self, key: bytes, state: HostState, level: int, seq: int, record: bytes) -> bytes:
        """Move a queued URL to ``level`` under ``seq`` (its evidence raised it,
        hive.frontier.evidence); returns its new back key. A bound host's head follows
        (the URL may have been its head, or become it)."""
        bound = state.head is not None
        self.remove(key, state)
        new = self.append(U64.unpack(key[:8])[0], state, level, seq, record)
        if bound and state.head is None:
            state.head = new, record
        return new

    def replace(self, key: bytes, state: HostState, record: bytes) -> None:
        """Rewrite a queued URL's record in place (a retry keeps its place in the queue)."""
        store = self.store
        store.txn.put(key, record, db=self._db)
        store.ops += 1
        head = state.head
        if head is not None and head[0] == key:
            state.head = key, record

    def bind(self, host_hash: int, state: HostState, head: tuple[bytes, bytes] | None) -> None:
        """Give the host a slot; ``head`` is its queue's head if known, else it is read."""
        if state.parked_at >= 0:
            self._unpark(host_hash, state)
        state.head = head if head is not None else self.read_head(host_hash)
        self.bound[host_hash] = state
        self._slot_of[host_hash] = len(self._slots)
        self._slots.append(host_hash)
        self.store.put("bound", U64.pack(host_hash), b"")

    def unbind(self, host_hash: int) -> None:
        self.bound.pop(host_hash).head = None
        index = self._slot_of.pop(host_hash)
        last = self._slots.pop()
        if last != host_hash:
            self._slots[index] = last
            self._slot_of[last] = index
        self.store.delete("bound", U64.pack(host_hash))

    def park(self, host_hash: int, state: HostState) -> None:
        """Give up the host's slot (if any); it rebinds when due."""
        if host_hash in self.bound:
            self.unbind(host_hash)
        if state.parked_at < 0:
            state.parked_at = state.next_allowed
            key = parked_key(state.parked_at, host_hash)
            self.store.put("parked", key, b"")
            entry: tuple[int, int] = TIME_HOST.unpack(key)
            first = self._first_parked
            if self._first_parked_known and (first is None or entry < first):
                self._first_parked = entry

    def _unpark(self, host_hash: int, state: HostState) -> None:
        key = parked_key(state.parked_at, host_hash)
        self.store.delete("parked", key)
        state.parked_at = -1.0
        if self._first_parked == TIME_HOST.unpack(key):
            self._first_parked_known = False

    def parked_hosts(self, limit: int) -> Iterator[int]:
        """The host hashes of at most ``limit`` parked hosts, due first first."""
        cursor = self.store.cursor("parked")
        if not cursor.first():
            return
        for count, key in enumerate(cursor.iternext(values=False)):
            if count >= limit:
                return
            yield TIME_HOST.unpack(key)[1]

    def parked_count(self) -> int:
        return self.store.entries("parked")

    def first_parked(self) -> tuple[float, int] | None:
        """The parked host due first: (time, host hash)."""
        if not self._first_parked_known:
            cursor = self.store.cursor("parked")
            self._first_parked = TIME_HOST.unpack(cursor.key()) if cursor.first() else None
            self._first_parked_known = True
        if self._first_parked is None:
            return None
        millis, host_hash = self._first_parked
        return millis / 1000.0, host_hash

    def sample(self, count: int, rng: random.Random) -> list[int]:
        """Up to ``count`` bound hosts drawn at random (for eviction)."""
        if len(self._slots) <= count:
            return list(self._slots)
        return rng.sample(self._slots, count)
