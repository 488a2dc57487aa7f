"""The address stock: a worker's side of address politeness, its grants and waiting leases.

A worker's lease for a host at an IP address may start only with a grant of
that address's owner (hive/core/addressledger.py). The stock keeps, per
address: the leases waiting for a grant (in the order they came), the grants
in hand and not yet used, how many are in use (their fetch running), and what
to tell the owner next: the grants to give back and how many it wants to hold
(``want``: in use plus waiting, at most the address's concurrency). A grant
in hand is usable from its ``not_before`` to its ``start_by`` (the holder's
clock: the owner sends durations); one past its ``start_by`` is given back
unused, and a lease that could not start in time (``spoiled``) waits again at
the head of its queue. An ask goes out when an address's want or returns
changed, and again every ``resend`` seconds while leases wait with nothing in
hand (wants are absolute, so a repeated ask is harmless; a lost one only
delays). A fetch's end gives its grant back and asks for the next in the same
ask, so an address with more leases waiting has its next grant coming while
the last fetch's host waits out its own delay. At an address another worker
owns, a fetch's end also keeps a grant in *reserve* for ``reserve`` seconds (the
want is at least one): the next lease there, often the same host after its
delay, finds a grant in hand instead of waiting a round trip; a reserve nobody
used goes back unused at its ``start_by``. At its own addresses a worker needs
no reserve: its ledger answers in the same turn. A want that only fell is not
sent unless the owner may still owe grants for it (a want met is forgotten there).

A *window* (a grant with ``every`` above 0, given to a lone holder that has seen
one host at the address: hive/core/addressledger.py) is not given back when its
fetch ends: it goes back in hand, usable again ``every`` after that fetch's start,
until its ``start_by``; so a host with an address of its own costs one ask and one
grant a window, not a fetch. The stock says, with each ask, whether it has seen
one host at the address (``single``) since the address was last forgotten.

Pure: every method takes ``now``; memory is bounded by the leases waiting and
the grants held (an address with neither is forgotten). A turn's work is bounded
by the addresses that changed or have leases waiting: a grant held with nothing
waiting is looked at again only when its ``start_by`` passes (a heap of them).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

Job = TypeVar("Job")


@dataclass(frozen=True, slots=True)
class Slot:
    """A grant in a holder's hand."""

    owner: int
    owner_epoch: int
    address: str
    grant_id: int
    not_before: float
    start_by: float
    every: float = 0.0  # a window's least time from one start to the next; 0: one start
    used: bool = False


@dataclass(frozen=True, slots=True)
class Ask:
    """What a holder tells one address's owner: grants given back, and its want."""

    owner: int
    address: str
    want: int
    owner_epoch: int
    returned: tuple[int, ...]
    single: bool = False  # one host seen at the address: a window would do


@dataclass(slots=True)
class _Address(Generic[Job]):
    owner: int
    waiting: deque[Job] = field(default_factory=deque)
    hand: list[Slot] = field(default_factory=list)
    in_use: int = 0
    returned: list[int] = field(default_factory=list)
    owner_epoch: int = 0
    asked: float = float("-inf")
    sent_want: int = 0
    reserve_until: float = float("-inf")
    host: object = None  # the first host seen here
    hosts: int = 0  # hosts seen here: 0, 1, or 2 for more than one


class AddressStock(Generic[Job]):
    """One worker's grants and the leases waiting for them (see the module docstring)."""

    def __init__(self, *, concurrency: int, resend: float, me: int = -1,
                 reserve: float = 0.0) -> None:
        self.concurrency = concurrency
        self.resend = resend
        self.me = me
        self.reserve = reserve
        self._addresses: dict[str, _Address[Job]] = {}
        self._changed: set[str] = set()  # addresses changed or with leases waiting
        self._ends: list[tuple[float, str]] = []  # (start_by, address) of grants in hand
        self.counts: dict[str, int] = {
            "address/waited": 0, "address/unused": 0, "address/spoiled": 0,
            "address/stale_grants": 0,
        }

    def waiting(self) -> dict[str, int]:
        """Leases waiting for a grant, by address (those that have any)."""
        return {a: len(e.waiting) for a, e in self._addresses.items() if e.waiting}

    @property
    def waiting_count(self) -> int:
        return sum(len(entry.waiting) for entry in self._addresses.values())

    def waiting_jobs(self) -> list[tuple[str, Job]]:
        """Every lease waiting for a grant, with its address."""
        return [(a, job) for a, e in self._addresses.items() for job in e.waiting]

    def held(self, address: str) -> int:
        entry = self._addresses.get(address)
        return len(entry.hand) + entry.in_use if entry is not None else 0

    def wait(self, address: str, owner: int, job: Job, now: float, *, host: object,
             first: bool = False) -> None:
        """Queue a lease of ``host`` for a grant at ``address`` (``first``: at the head, a
        spoiled one)."""
        entry = self._addresses.get(address)
        if entry is None:
            entry = self._addresses[address] = _Address(owner)
        if entry.hosts == 0:
            entry.host, entry.hosts = host, 1
        elif entry.hosts == 1 and host != entry.host:
            entry.hosts = 2
        if first:
            entry.waiting.appendleft(job)
        else:
            entry.waiting.append(job)
        self.counts["address/waited"] += 1
        self._changed.add(address)

    def reown(self, owner_of: Callable[[str], int]) -> int:
        """Point each address at its owner by ``owner_of`` (a dropped machine's worker's
        addresses pass to a live one): one whose owner changed forgets the old owner's grants
        in hand and asks the new one afresh. How many changed."""
        moved = 0
        for address, entry in self._addresses.items():
            owner = owner_of(address)
            if owner != entry.owner:
                entry.owner, entry.owner_epoch, entry.hand, entry.returned = owner, 0, [], []
                entry.sent_want, entry.asked = 0, float("-inf")
                self._changed.add(address)
                moved += 1
        return moved

    def granted(self, owner: int, owner_epoch: int, address: str, grant_id: int, wait: float,
                hold: float, now: float, every: float = 0.0) -> None:
        """A grant arrived (``every`` above 0: a window). One for an address nobody waits at
        any more is given back at its ``start_by``."""
        entry = self._addresses.get(address)
        if entry is None:
            entry = self._addresses[address] = _Address(owner)
        if owner_epoch != entry.owner_epoch:
            entry.owner_epoch = owner_epoch
            entry.returned.clear()  # the owner's earlier life forgot those grants
        start = now + max(wait, 0.0)
        entry.hand.append(Slot(owner, owner_epoch, address, grant_id, start, start + hold, every))
        heapq.heappush(self._ends, (start + hold, address))
        self._changed.add(address)

    def take(self, now: float) -> list[tuple[Job, Slot]]:
        """The waiting leases that may start now, each with its grant; grants past their
        start time are given back."""
        out: list[tuple[Job, Slot]] = []
        ends = self._ends
        while ends and ends[0][0] < now:  # grants past their start_by, waited for or not
            self._changed.add(heapq.heappop(ends)[1])
        for address in list(self._changed):
            entry = self._addresses.get(address)
            if entry is None:
                self._changed.discard(address)
                continue
            keep: list[Slot] = []
            for slot in entry.hand:
                if now > slot.start_by:
                    self._give_back(entry, slot)
                    self.counts["address/unused"] += not slot.used
                elif entry.waiting and slot.not_before <= now:
                    out.append((entry.waiting.popleft(), slot))
                    entry.in_use += 1
                else:
                    keep.append(slot)
            entry.hand = keep
        return out

    def _give_back(self, entry: _Address[Job], slot: Slot) -> None:
        if slot.owner_epoch == entry.owner_epoch:
            entry.returned.append(slot.grant_id)

    def done(self, slot: Slot, now: float, started: float | None = None) -> None:
        """A fetch started with ``slot`` (at ``started``, else taken as ``now``) ended: its
        grant goes back, or, a window still open, back in hand for the next start."""
        entry = self._addresses.get(slot.address)
        if entry is None:
            return
        entry.in_use = max(entry.in_use - 1, 0)
        if slot.every > 0 and now < slot.start_by and slot.owner_epoch == entry.owner_epoch:
            began = now if started is None else min(started, now)
            entry.hand.append(replace(slot, not_before=began + slot.every, used=True))
            heapq.heappush(self._ends, (slot.start_by, slot.address))
        else:
            self._give_back(entry, slot)
        if entry.owner != self.me:
            entry.reserve_until = now + self.reserve
        self._changed.add(slot.address)

    def spoiled(self, job: Job, slot: Slot, now: float) -> None:
        """A lease that could not start before its grant's ``start_by``: the grant goes back,
        the lease waits again first in line."""
        self.counts["address/spoiled"] += 1
        self.done(slot, now)
        entry = self._addresses[slot.address]
        entry.waiting.appendleft(job)

    def asks(self, now: float) -> list[Ask]:
        """What to tell the owners now: for each address whose want or returns changed (or
        whose leases still wait with nothing in hand after ``resend``)."""
        out: list[Ask] = []
        for address in list(self._changed):
            entry = self._addresses.get(address)
            if entry is None:
                self._changed.discard(address)
                continue
            reserve = 1 if now < entry.reserve_until else 0
            want = min(self.concurrency, max(entry.in_use + len(entry.waiting), reserve))
            held = len(entry.hand) + entry.in_use
            due = (entry.returned
                   or (want > held and (want != entry.sent_want
                                        or now >= entry.asked + self.resend))
                   or want < entry.sent_want > held)  # fell while grants may still come
            if due:
                out.append(Ask(entry.owner, address, want, entry.owner_epoch,
                               tuple(entry.returned), entry.hosts == 1))
                entry.returned = []
                entry.sent_want, entry.asked = want, now
            if not entry.waiting:  # its grants in hand are looked at again at their end
                self._changed.discard(address)
                if not entry.hand and not entry.in_use:
                    del self._addresses[address]
        return out

    def next_due(self, now: float) -> float | None:
        """When ``take`` or ``asks`` may next have something to do."""
        due: float | None = self._ends[0][0] if self._ends else None
        for address in self._changed:
            entry = self._addresses.get(address)
            if entry is None:
                continue
            times = [slot.not_before if slot.not_before > now else slot.start_by
                     for slot in entry.hand]
            if entry.waiting and not entry.hand:
                times.append(entry.asked + self.resend)
            if times:
                first = min(times)
                due = first if due is None else min(due, first)
        return due
