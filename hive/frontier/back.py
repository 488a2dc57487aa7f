"""BackQueues: Mercator's back end — one FIFO per host, a bounded host table, parking.

Each host's queue is the key range ``host_hash|level|seq`` of the ``back`` db,
so its best URL (lowest level, then oldest) is its first key. At most b hosts
are *bound* (hold a slot, have a heap entry, their state in memory); every
other host with queued URLs is *parked*: its URLs and state stay on disk and an
entry ``time|host`` in ``parked`` says when it is due. Memory is therefore
bounded by b, never by the number of pending URLs. ``bound`` mirrors the slot
table on disk so a restart can put every host back in play.
"""

from __future__ import annotations

import random

from hive.frontier.hosts import HostState
from hive.frontier.store import TIME_HOST, U64, Store, back_key, parked_key


class BackQueues:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.bound: dict[int, HostState] = {}
        self._slots: list[int] = []
        self._slot_of: dict[int, int] = {}
        self.queued = 0

    def host(self, host_hash: int) -> HostState | None:
        """A host's state: from the slot table when bound, else from disk."""
        state = self.bound.get(host_hash)
        if state is not None:
            return state
        data = self.store.get("hosts", U64.pack(host_hash))
        return HostState.decode(data) if data is not None else None

    def save(self, host_hash: int, state: HostState) -> None:
        self.store.put("hosts", U64.pack(host_hash), state.encode())

    def append(self, host_hash: int, state: HostState, level: int, seq: int, record: bytes) -> None:
        self.store.put("back", back_key(host_hash, level, seq), record)
        state.queued += 1
        self.queued += 1
        if state.head_level == 0 or level < state.head_level:
            state.head_level = level

    def head(self, host_hash: int) -> tuple[bytes, bytes] | None:
        """The host's best URL: (back key, record bytes), or None if its queue is empty."""
        prefix = U64.pack(host_hash)
        cursor = self.store.cursor("back")
        if not cursor.set_range(prefix):
            return None
        key = cursor.key()
        if key[:8] != prefix:
            return None
        return bytes(key), bytes(cursor.value())

    def remove(self, key: bytes, state: HostState) -> None:
        self.store.delete("back", key)
        state.queued -= 1
        self.queued -= 1

    def bind(self, host_hash: int, state: HostState) -> None:
        if state.parked_at >= 0:
            self.store.delete("parked", parked_key(state.parked_at, host_hash))
            state.parked_at = -1.0
        self.bound[host_hash] = state
        self._slot_of[host_hash] = len(self._slots)
        self._slots.append(host_hash)
        self.store.put("bound", U64.pack(host_hash), b"")

    def unbind(self, host_hash: int) -> None:
        del self.bound[host_hash]
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
            self.store.put("parked", parked_key(state.parked_at, host_hash), b"")
        state.head_level = 0

    def first_parked(self) -> tuple[float, int] | None:
        """The parked host due first: (time, host hash)."""
        cursor = self.store.cursor("parked")
        if not cursor.first():
            return None
        millis, host_hash = TIME_HOST.unpack(cursor.key())
        return millis / 1000.0, host_hash

    def sample(self, count: int, rng: random.Random) -> list[int]:
        """Up to ``count`` bound hosts drawn at random (for eviction)."""
        if len(self._slots) <= count:
            return list(self._slots)
        return rng.sample(self._slots, count)
