"""ReadyHeap: which bound host goes next.

Two heaps. Hosts wait in the first, ordered by next-allowed time. When their
time comes they move to the second, the ready set, ordered by the priority of
their head URL aged by how long they have been ready:

    rank = head_level - aging × (now - ready_since)

where ``ready_since`` is the later of its next-allowed time and when it was
scheduled (a host that was never contacted is not credited with years of
readiness). Aging is the same for every host, so the order is that of the
constant ``head_level + aging × ready_since`` and the heap never re-sorts.
Bound: a host that became ready at t is served before any host that became
ready after ``t + (levels - 1) / aging``, so no ready host waits forever and
the priority signal survives the back end. A host is in neither heap while its
fetch is in flight. Removal is lazy: each entry carries a token, and an entry
whose token is no longer the host's current one is skipped.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable


class ReadyHeap:
    def __init__(self, aging: float) -> None:
        self.aging = aging
        self._waiting: list[tuple[float, int, int, float]] = []
        self._ready: list[tuple[float, int, int]] = []
        self._token: dict[int, int] = {}
        self._where: dict[int, bool] = {}
        self._since: dict[int, float] = {}  # each ready host's readiness, for ``improve``
        self._seq = itertools.count()

    def schedule(self, host: int, when: float, now: float) -> None:
        """Put a host in the waiting heap for ``when`` (replacing any entry it had)."""
        token = next(self._seq)
        self._token[host] = token
        self._where[host] = False
        self._since.pop(host, None)
        heapq.heappush(self._waiting, (when, token, host, when if when > now else now))
        if len(self._waiting) + len(self._ready) > 2 * len(self._token) + 64:
            self.compact()

    def improve(self, host: int, head_level: int) -> None:
        """A ready host's head URL got better (it rose, hive.frontier.evidence): rank it
        again with the same readiness. Nothing for a host that is not ready."""
        since = self._since.get(host)
        if since is None:
            return
        token = next(self._seq)
        self._token[host] = token
        heapq.heappush(self._ready, (head_level + self.aging * since, token, host))
        if len(self._waiting) + len(self._ready) > 2 * len(self._token) + 64:
            self.compact()

    def discard(self, host: int) -> None:
        """Forget a host (released, parked, or leased); its entries become stale."""
        self._token.pop(host, None)
        self._where.pop(host, None)
        self._since.pop(host, None)

    def __len__(self) -> int:
        """Hosts in either heap."""
        return len(self._token)

    def __contains__(self, host: int) -> bool:
        return host in self._token

    def promote(self, now: float, head_level: Callable[[int], int]) -> None:
        """Move every host whose time has come into the ready set."""
        waiting, token = self._waiting, self._token
        while waiting and waiting[0][0] <= now:
            _, tok, host, since = heapq.heappop(waiting)
            if token.get(host) != tok:
                continue
            self._where[host] = True
            self._since[host] = since
            heapq.heappush(self._ready, (head_level(host) + self.aging * since, tok, host))

    def pop(self) -> int | None:
        """The best ready host (removed from the heaps), or None."""
        ready, token = self._ready, self._token
        while ready:
            _, tok, host = heapq.heappop(ready)
            if token.get(host) == tok:
                del token[host]
                del self._where[host]
                del self._since[host]
                return host
        return None

    def next_time(self) -> float | None:
        """When the earliest waiting host becomes ready (stale entries dropped)."""
        waiting, token = self._waiting, self._token
        while waiting and token.get(waiting[0][2]) != waiting[0][1]:
            heapq.heappop(waiting)
        return waiting[0][0] if waiting else None

    def next_waiting(self) -> tuple[float, int] | None:
        """The earliest waiting host and its time, or None (stale entries dropped)."""
        when = self.next_time()
        return (when, self._waiting[0][2]) if when is not None else None

    def counts(self) -> tuple[int, int]:
        """(ready, waiting) hosts."""
        ready = sum(1 for r in self._where.values() if r)
        return ready, len(self._where) - ready

    def compact(self) -> None:
        """Drop stale entries. ``schedule``, the only way entries are added, calls it once
        they outnumber live ones, so memory stays bounded by live hosts."""
        self._waiting = [e for e in self._waiting if self._token.get(e[2]) == e[1]]
        self._ready = [e for e in self._ready if self._token.get(e[2]) == e[1]]
        heapq.heapify(self._waiting)
        heapq.heapify(self._ready)
