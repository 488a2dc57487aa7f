"""Address politeness at a worker: its ledger as an owner, its stock as a holder, the asks
and grants between them, and the marker that makes a restarted owner wait.

Each IP address's owner is the ring owner of the address string; it alone grants
start slots there (hive/core/addressledger.py), and every worker holds the grants
its leases need (hive/core/addressstock.py). An ask or grant between two workers
is an ADDRASK or ADDRGRANT message (hive/core/wire.py) sent through the worker's
router (``send``); when the owner is the worker itself, nothing is sent: the ask
goes straight into its own ledger and the grant straight into its own stock in the
same frontier turn, so a web where every host has its own address costs a few
dictionary operations a fetch. With no ring (a worker alone) every address is its
own.

On the frontier thread (``start``): a screened lease's host is looked up in the DNS
cache without waiting (``resolved``); a host the cache does not know is looked up on
a fetch thread (``lookup``, answered by ``looked_up``), so the frontier thread never
waits on DNS. A lease whose host has an address waits in the stock for a grant
there; one whose host has none (a DNS failure) goes at once, to end without
contacting any server. The address granted (the first in ``happy_eyeballs`` order)
is the one its fetch connects to, so a host whose address changes (its DNS
entry expired) is polite at each. If connecting to it fails, the fetch hands the
host's other addresses back (``Fetched.fallbacks``, hive.fetch.pipeline) and its
lease waits again, for a grant at the next address it has not tried
(``fall_back``), up to ``fetch.connect_attempts`` addresses in all: a host's
fallback address is held to its own limits like any other.

A message is checked before it is believed: a sender outside the ring, an ask for an
address this worker does not own, a grant from a worker that does not own its
address, or a grant for another life of this worker is refused and counted
(``address/refused/<why>``), never raised.

Kill -9: a lease is on disk before its fetch (as every lease); a holder killed
mid-fetch leaves its grant to expire at the owner. An owner's ledger lives in
memory: the ``address_ledger`` meta marker (hive/storage/schema.py) is set while
it may have grants out and cleared by a clean close, so an owner that starts after
a life that did not close grants nothing for one grant's life.
"""

from __future__ import annotations

import contextlib
import queue
import time
from collections.abc import Callable

from hive.config import Config
from hive.core import wire
from hive.core.addressledger import AddressLedger
from hive.core.addressstock import AddressStock, Slot
from hive.core.lease import Lease
from hive.core.ring import Ring
from hive.fetch.dns import Resolution, happy_eyeballs
from hive.fetch.robots_rules import RobotsRules
from hive.storage.schema import META_ADDRESS_LEDGER
from hive.storage.store import Store

# Seconds after which a holder whose leases still wait with no grant in hand asks again
# (an ask or its grant was shed by a full router queue, or the owner restarted).
RESEND = 1.0
# Addresses named one by one in stats (the ones with the most leases waiting); the rest
# are counted in the totals only, so stats stay bounded.
NAMED_ADDRESSES = 20

Send = Callable[[int, list[bytes]], None]
# A lease screened to go, with its stale robots.txt rules (hive.fetch.gate.stale_rules).
Pending = tuple[Lease, RobotsRules | None]


class Addresses:
    """A worker's address politeness (see the module docstring)."""

    def __init__(self, cfg: Config, store: Store, worker_id: int, ring: Ring | None,
                 resolved: Callable[[str, float], Resolution | None],
                 lookup: Callable[[str], None], now: float) -> None:
        """``resolved``: a host's addresses if the DNS cache knows them; ``lookup``: have a
        host looked up off the frontier thread (answered by ``looked_up``)."""
        politeness = cfg.politeness
        self.resolved = resolved
        self.lookup = lookup
        self._resolving: dict[str, list[Pending]] = {}  # hosts looked up, their leases
        self._slots: dict[int, tuple[Pending, Slot]] = {}  # a started lease and its grant
        self._tried: dict[int, list[str]] = {}  # addresses a lease could not connect to
        self.connect_attempts = cfg.fetch.connect_attempts
        # From the fetch threads: hosts looked up, and leases too late for their grant.
        self.looked: queue.SimpleQueue[tuple[str, Resolution]] = queue.SimpleQueue()
        self.late: queue.SimpleQueue[Pending] = queue.SimpleQueue()
        self.worker_id = worker_id
        self.ring = ring
        self.owner_of: Callable[[str], int] = (
            ring.owner if ring is not None else lambda _address: worker_id)
        self.epoch = time.time_ns()
        self.send: Send | None = None
        self.store = store
        self.ledger = AddressLedger(
            concurrency=politeness.ip_concurrency, min_delay=politeness.ip_min_delay,
            hold=politeness.ip_grant_hold,
            # the longest a fetch holds its address: its request's total timeout, twice
            # when a page sets a cookie and redirects to itself (asked again, once)
            fetch_life=2 * cfg.fetch.total_timeout + 1.0,
            epoch=self.epoch, now=now)
        if store.get("meta", META_ADDRESS_LEDGER) is None:
            self.ledger.quiet_until = now  # the last life closed with no grant out
        store.put("meta", META_ADDRESS_LEDGER, b"")
        self.stock: AddressStock[Pending] = AddressStock(
            concurrency=politeness.ip_concurrency, resend=RESEND, me=worker_id,
            reserve=politeness.ip_grant_hold)
        self.counts: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    def owner(self, address: str) -> int:
        return self.worker_id if self.ring is None else self.owner_of(address)

    def reown(self, owner_of: Callable[[str], int]) -> None:
        """Take ``owner_of`` as the addresses' owners from now on (a cluster dropped a
        machine: hive/procs/fence.py), and point the waiting leases at them."""
        self.owner_of = owner_of
        moved = self.stock.reown(self.owner)
        if moved:
            self.counts["address/reowned"] = self.counts.get("address/reowned", 0) + moved

    def start(self, pending: Pending, now: float) -> bool:
        """A screened lease, to wait for its address's grant; True if it goes at once
        (its host has no address)."""
        host = pending[0].record.host_key
        resolution = self.resolved(host, now)
        if resolution is not None:
            return self._place(pending, resolution, now)
        waiting = self._resolving.setdefault(host, [])
        if not waiting:
            self.lookup(host)
        waiting.append(pending)
        return False

    def aside(self, job: str | tuple[Lease, RobotsRules | None, Slot | None],
              lookup: Callable[[str], Resolution]) -> None:
        """On a fetch thread: look a host up (``job`` a host name) or send back a lease
        that reached the thread after its grant's ``start_by``; ``news`` takes them."""
        if isinstance(job, str):
            self.looked.put((job, lookup(job)))
        else:
            self.late.put((job[0], job[1]))

    def news(self, now: float) -> tuple[list[Pending], int]:
        """What the fetch threads sent back: the leases that go at once (their host looked up
        has no address), and how many leases came back too late for their grant (each waits
        again, first in line)."""
        go: list[Pending] = []
        with contextlib.suppress(queue.Empty):
            while True:
                host, resolution = self.looked.get_nowait()
                go += self.looked_up(host, resolution, now)
        late = 0
        with contextlib.suppress(queue.Empty):
            while True:
                self.spoiled(self.late.get_nowait(), now)
                late += 1
        return go, late

    def looked_up(self, host: str, resolution: Resolution, now: float) -> list[Pending]:
        """A host looked up for its waiting leases: those that go at once (no address)."""
        return [pending for pending in self._resolving.pop(host, [])
                if self._place(pending, resolution, now)]

    def address_of(self, host: str, now: float) -> str | None:
        """The address a host's fetch would wait for, if the DNS cache knows it now."""
        resolution = self.resolved(host, now)
        if resolution is None or not resolution.ok:
            return None
        return happy_eyeballs(resolution.addresses)[0]

    def _place(self, pending: Pending, resolution: Resolution, now: float) -> bool:
        if not resolution.ok:
            return True
        address = happy_eyeballs(resolution.addresses)[0]  # the one the fetch tries first
        self.stock.wait(address, self.owner(address), pending, now,
                        host=pending[0].host_hash)
        return False

    def turn(self, now: float) -> list[tuple[Pending, Slot]]:
        """Send the asks due, grant what the ledger may, and take the leases that may start."""
        remote: dict[int, list[wire.AddressAsk]] = {}
        for ask in self.stock.asks(now):
            if ask.owner == self.worker_id:
                self.ledger.ask(ask.address, self.worker_id, self.epoch, ask.want,
                                list(ask.returned), ask.owner_epoch, now, single=ask.single)
            else:
                remote.setdefault(ask.owner, []).append(wire.AddressAsk(
                    ask.address, ask.want, ask.owner_epoch, ask.returned, ask.single))
        if self.send is not None:
            for owner, asks in remote.items():
                self.send(owner, wire.encode_address_asks(self.worker_id, self.epoch, asks))
        grants: dict[int, list[wire.AddressGrant]] = {}
        for granted in self.ledger.grant(now):
            if granted.holder == self.worker_id:
                if granted.holder_epoch == self.epoch:
                    self.stock.granted(self.worker_id, self.epoch, granted.address,
                                       granted.grant_id, granted.wait, granted.hold, now,
                                       granted.every)
                continue
            grants.setdefault(granted.holder, []).append(wire.AddressGrant(
                granted.address, granted.holder_epoch, granted.grant_id, granted.wait,
                granted.hold, granted.every))
        if self.send is not None:
            for holder, batch in grants.items():
                self.send(holder, wire.encode_address_grants(self.worker_id, self.epoch, batch))
        taken = self.stock.take(now)
        for pending, slot in taken:
            self._slots[pending[0].host_hash] = pending, slot
        return taken

    def receive(self, message: wire.AddressAsks | wire.AddressGrants, now: float) -> None:
        """An ask from a holder or a grant from an owner; what cannot be believed is refused
        and counted."""
        ring = self.ring
        if ring is None or not 0 <= message.sender < ring.procs:
            self._count("address/refused/unknown_sender")
            return
        if isinstance(message, wire.AddressAsks):
            for ask in message.asks:
                if self.owner_of(ask.address) != self.worker_id:
                    self._count("address/refused/not_owner")
                elif not self.ledger.ask(ask.address, message.sender, message.epoch, ask.want,
                                         list(ask.returned), ask.owner_epoch, now,
                                         single=ask.single):
                    self._count("address/refused/stale_sender")
            return
        for grant in message.grants:
            if self.owner_of(grant.address) != message.sender:
                self._count("address/refused/not_owner")
            elif grant.holder_epoch != self.epoch:
                self._count("address/refused/stale_grant")
            else:
                self.stock.granted(message.sender, message.epoch, grant.address,
                                   grant.grant_id, grant.wait, grant.hold, now, grant.every)

    def waiting_count(self) -> int:
        """Leases waiting for a grant or for their host's address."""
        return self.stock.waiting_count + sum(map(len, self._resolving.values()))

    def waiting_hosts(self) -> dict[int, str]:
        """The hosts (by hash) whose lease waits for a grant, and at which address."""
        return {pending[0].host_hash: address for address, pending in self.stock.waiting_jobs()}

    def finished(self, lease: Lease, started: float, now: float) -> None:
        """A lease's fetch (started at ``started``) ended: its grant goes back, or back in
        hand if it is a window still open."""
        self._tried.pop(lease.host_hash, None)
        taken = self._slots.pop(lease.host_hash, None)
        if taken is not None:
            self.stock.done(taken[1], now, started)

    def fall_back(self, lease: Lease, fallbacks: tuple[str, ...], started: float,
                  now: float) -> bool:
        """A lease's fetch could not connect to the address granted: its grant goes back,
        and True if it waits for a grant at the next of ``fallbacks`` it has not tried
        (within ``fetch.connect_attempts``); False if it has none left, its outcome stands."""
        host = lease.host_hash
        taken, tried = self._slots.get(host), self._tried.get(host, [])
        self.finished(lease, started, now)
        if taken is None:
            return False
        tried.append(taken[1].address)
        untried = [a for a in fallbacks if a not in tried]
        if not untried or len(tried) >= self.connect_attempts:
            return False
        self._tried[host] = tried
        self._count("address/fallbacks")
        self.stock.wait(untried[0], self.owner(untried[0]), taken[0], now, host=host)
        return True

    def spoiled(self, pending: Pending, now: float) -> None:
        """A lease that reached a fetch thread after its grant's ``start_by``: it waits for
        another."""
        taken = self._slots.pop(pending[0].host_hash, None)
        if taken is not None:
            self.stock.spoiled(pending, taken[1], now)

    def next_due(self, now: float) -> float | None:
        times = [t for t in (self.stock.next_due(now), self.ledger.next_due(now))
                 if t is not None]
        return min(times) if times else None

    def close(self) -> None:
        """A clean close: every fetch has ended, so no grant of this life is in use here;
        the next life need not wait out this one's grants given to others only if they
        are over too, which a whole hive's stop ensures (a worker alone stops with its
        hive)."""
        self.store.delete("meta", META_ADDRESS_LEDGER)

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = dict(self.counts)
        out.update(self.ledger.counts)
        out.update(self.stock.counts)
        waiting = self.stock.waiting()
        out["address/waiting_hosts"] = sum(waiting.values())
        out["address/waiting_addresses"] = len(waiting)
        out["address/owned"] = len(self.ledger)
        out["address/resolving_hosts"] = len(self._resolving)
        for address, n in sorted(waiting.items(), key=lambda kv: (-kv[1], kv[0]))[
                :NAMED_ADDRESSES]:
            out[f"address/waiting/{address}"] = n
        return out
