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

from hive.frontier.store import Store, front_key


class FrontQueues:
    def __init__(self, store: Store, levels: int, ratio: float, rng: random.Random) -> None:
        self.store = store
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

    def push(self, level: int, seq: int, record: bytes) -> None:
        self.store.put("front", front_key(level, seq), record)
        self.sizes[level - 1] += 1
        self._total += 1
        if self.sizes[level - 1] == 1:
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

    def pop(self) -> tuple[int, bytes] | None:
        """Take the oldest URL of a chosen level: (level, record bytes)."""
        level = self.choose()
        if level is None:
            return None
        cursor = self.store.cursor("front")
        if not cursor.set_range(bytes([level])) or cursor.key()[0] != level:
            raise AssertionError(f"front level {level} counted non-empty but has no keys")
        value = bytes(cursor.value())
        cursor.delete()
        self.store.ops += 1
        self.sizes[level - 1] -= 1
        self._total -= 1
        if not self.sizes[level - 1]:
            self._reweigh()
        return level, value
