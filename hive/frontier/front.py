"""FrontQueues: Mercator's front end — k priority FIFOs and a biased random chooser.

Level 1 is the highest priority. The chooser picks among the non-empty levels
at random with weight ``ratio ** (level - 1)`` (default ratio 0.5: each level
half as often as the one above), so no level starves and bursts of one host's
URLs are spread out. It is stochastic on purpose: tests check its distribution,
never an exact order. The queues live on disk (``front`` db, key level|seq);
only their sizes are in memory.
"""

from __future__ import annotations

import random
from collections import Counter
from operator import itemgetter

from hive.storage.schema import LEVEL_SEQ
from hive.storage.store import Store

_LEVEL_PREFIX = [bytes([level]) for level in range(256)]


class FrontQueues:
    def __init__(self, store: Store, levels: int, ratio: float, rng: random.Random) -> None:
        self.store = store
        self._db = store.db["front"]
        self.levels = levels
        self.weights = [ratio ** i for i in range(levels)]
        self.rng = rng
        self.sizes = [0] * levels
        self._recount()

    def _recount(self) -> None:
        cursor = self.store.cursor("front")
        for level in range(1, self.levels + 1):
            count = 0
            if cursor.set_range(bytes([level])):
                for key in cursor.iternext(values=False):
                    if key[0] != level:
                        break
                    count += 1
            self.sizes[level - 1] = count
        self._reweigh()

    def __len__(self) -> int:
        return self._total

    def _reweigh(self) -> None:
        """Cumulative weights of the non-empty levels; redone only when one empties or fills."""
        self._live: list[tuple[float, int]] = []
        total = 0.0
        for i, size in enumerate(self.sizes):
            if size:
                total += self.weights[i]
                self._live.append((total, i + 1))
        self._total = sum(self.sizes)

    def extend(self, entries: list[tuple[int, int, bytes]]) -> None:
        """Append (level, seq, record bytes) entries to their levels, in one LMDB call."""
        pack = LEVEL_SEQ.pack
        store = self.store
        store.front_cursor.putmulti([(pack(level, seq), record) for level, seq, record in entries])
        store.ops += len(entries)
        sizes = self.sizes
        empty = sizes.count(0)
        for level, count in Counter(map(itemgetter(0), entries)).items():
            sizes[level - 1] += count
        self._total += len(entries)
        if sizes.count(0) != empty:
            self._reweigh()

    def choose(self) -> int | None:
        """A non-empty level drawn with the bias, or None when all are empty."""
        live = self._live
        if not live:
            return None
        point = self.rng.random() * live[-1][0]
        for cumulative, level in live:
            if point < cumulative:
                return level
        return live[-1][1]

    def pop(self) -> tuple[int, int, bytes] | None:
        """Take the oldest URL of a chosen level: (level, seq, record bytes)."""
        level = self.choose()
        if level is None:
            return None
        store = self.store
        cursor = store.front_cursor
        prefix = _LEVEL_PREFIX[level]
        cursor.set_range(prefix)
        key, value = cursor.item()
        if key[:1] != prefix:
            raise AssertionError(f"front level {level} counted non-empty but has no keys")
        cursor.delete()
        store.ops += 1
        sizes = self.sizes
        sizes[level - 1] -= 1
        self._total -= 1
        if not sizes[level - 1]:
            self._reweigh()
        return level, LEVEL_SEQ.unpack(key)[1], bytes(value)

    def move(self, key: bytes, level: int, seq: int, record: bytes) -> None:
        """Move the queued entry at ``key`` to ``level`` under ``seq`` (a URL whose
        evidence raised it, hive.frontier.evidence): one delete and one put."""
        store = self.store
        txn = store.txn
        if not txn.delete(key, db=self._db):
            raise AssertionError(f"front key {key.hex()} is not queued")
        txn.put(LEVEL_SEQ.pack(level, seq), record, db=self._db)
        store.ops += 2
        sizes = self.sizes
        sizes[key[0] - 1] -= 1
        sizes[level - 1] += 1
        if not sizes[key[0] - 1] or sizes[level - 1] == 1:
            self._reweigh()
