"""Resizing a hive: moving hosts to the worker stores a new ring names, offline.

``hive start --procs M`` on a data directory whose ``hive.json`` records
another ring calls :func:`resize` (through :func:`resize_if_changed`, which
compares the rings) from the supervisor's ``open()``, before any child starts:
the supervisor holds the data directory's lock and the mover takes each worker
directory's lock, so no process writes a store meanwhile.
This module owns that move and its policy.

What moves. For every ``worker-NN`` store that exists, every host (a ``hosts``
record) whose owner under the new ring is another store moves whole to its
owner's store (hive/storage/schema.py has the layout):

- its state, as it is, except that a host with a lease (a fetch in flight when
  the hive stopped) waits its full delay from now, exactly as the frontier's
  recovery does on open: the move never makes a host look uncontacted;
- its queued URLs, from ``back`` (``host|level|seq``) and from ``front``
  (``level|seq``; one scan of the source's front groups them by host), all into
  the host's back queue at the destination, at their level and seq: a URL's
  state names its entry's place by level and seq (hive/storage/schema.py), which
  the move keeps, and no key can collide there (seqs are unique in their source
  store, the host's keys carry its hash, and the destination held none of it).
  Why the back queue and not the
  destination's front: the whole copy of a host is then its host-hash prefix
  plus one ``parked`` entry, so "does the destination hold this host?" is one
  look-up (see below), and a URL drawn from the front would have joined this
  same queue anyway, keeping its level;
- its URLs waiting for a retry (``retries``: due time and back key; one scan of
  the source's retries groups them by host), kept waiting until the same time at
  the destination, under the same key;
- its URL states (``urls``: the seen fingerprints, pending, done or refused,
  a pending one with its evidence, hive/frontier/evidence.py), copied as they
  are, and its ``robots`` entry;
- at the destination it is parked at its next-allowed time (neither bound nor
  leased), as the frontier's recovery parks the hosts that were bound.

The meta ``state`` of both stores moves with the data, in the same
transactions: ``frontier/admitted``, ``frontier/done/*``,
``frontier/refused/*`` and ``back_queued`` are adjusted by what left or
arrived, and the destination's ``seq`` passes every key it was given (so its
new keys never meet a moved one).

The protocol, per batch of hosts from store S to store D (at most
``BATCH_HOSTS`` hosts and, unless one host alone is larger, ``BATCH_ENTRIES``
records):

1. one write transaction on D copies each host of the batch that D does not
   hold yet, and commits (with fsync);
2. one write transaction on S deletes the batch's hosts — every key under their
   prefix, their front and retries entries and their ``bound``, ``leases``, ``parked`` and
   ``robots`` entries — and commits.

Why a crash (kill -9, power loss) at any moment loses and duplicates nothing:
LMDB commits a transaction whole or not at all, a host's copy is written in one
transaction, so a ``hosts`` record in D means all of the host is there; S
deletes a host, in one transaction, only once D's copy is durable. So each host
is whole in S, or whole in D, or whole in both; the next ``start`` scans every
store again, copies only where the owner lacks the host, and deletes the copy
that is not at the owner. The scan reads the new ring only, never the old one,
so an interrupted resize is finished even when the next ``start`` asks for yet
another size: the owner's copy is kept, any other deleted.

Its payload-index entries (``payloads``, hive/fetch/revisits.py) follow the host
of the URI they name, so a moved host's repeats are still revisits at its new
owner: after the hosts, each store's entries whose URI's host another worker owns
are copied there (never over an entry the destination has for the same payload:
the first archived stands) and then deleted, in batches, copy before delete, as
for the hosts. An entry whose value does not decode stays where it is.

A recrawl's plan (hive.procs.plan) is not moved: each store forgets how far its worker
read the plan, so every worker reads it again from its start under the new ring and
queues, and keeps the ``prior`` entries of, the URLs it now owns (admission is
idempotent; an entry left at a former owner is never read). A prior crawl's index
(``--dedup-from``, hive.procs.dedup) is read again so too, for a worker may have read
only part of it (a batch a turn) when the hive stopped: its entries already moved stand,
and it puts those of the lines it now owns that no worker had read yet.

A store beyond the new size is drained: its hosts as above; then the URL states
left in it — refusals of URLs whose host never had one admitted, so there is no
host record and no host key to place them by; they are only a memo — go to
worker ``host_hash % M``; then the batches in its ``outbox`` go to the
supervisor's outbox (``DATA/supervisor``), which resends them like seeds,
routed by the new ring. Each batch is copied there with a marker in the
supervisor's meta before it is deleted from the store, and the markers are
removed only once the store's outbox is empty, so a crash copies no batch
twice. The drained store (holding no host, queued URL, URL state or batch) is
renamed ``worker-NN.retired-<UTC time>``; its quarantine (poison batches, never
resent) stays in it. Only when every store is done is the new ring written to
``hive.json``: until then every ``start`` resizes again.

Where the stores are is a :class:`Layout`: a slot number names a store (on one machine
the worker id), and the layout says where its directory is, which slot a host of a given
owner goes to, where a drained store's outbox batches go and how a drained store is
retired. One machine's layout (:meth:`Layout.machine`) is the one described above; a
cluster resize (hive/procs/cluster_resize.py) gives each machine one whose slots are its
own workers' stores and a transfer store per other machine, and moves hosts with this
module's steps: one owner of the move, on every machine.

Cost: one pass over every store's hosts and front, plus the moved hosts' data.
Memory is a few integers per moved host, 9 bytes per moved front entry and 25
per moved retry,
never the URLs themselves.

Why one module: a resize is one offline operation, moving hosts whole between stores
so that a crash at any step loses nothing and moves nothing twice; what is copied, the
markers that record how far it got and the recovery that reads them must be read
together, since each marker means a step of the copy.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple

from hive.config import Config
from hive.core.keys import HOST, politeness_key
from hive.core.record import UrlRecord
from hive.core.ring import Ring
from hive.core.urls import host_hash, host_key
from hive.core.wire import decode_records
from hive.errors import HiveError, StoreError, URLError
from hive.fetch.revisits import decode as decode_payload
from hive.frontier import domains
from hive.frontier.hosts import HostState
from hive.procs.lifecycle import Lock
from hive.procs.outbox import Outbox
from hive.storage.datadir import DataDir
from hive.storage.modes import DurableStore, Txn
from hive.storage.schema import (
    HOST_LEVEL_SEQ,
    LEVEL_SEQ,
    META_DEDUP_FROM,
    META_RECRAWL_FROM,
    TIME_HOST_LEVEL_SEQ,
    U64,
    MetaState,
    back_key,
    parked_key,
    resize_marker,
    state_counters,
)
from hive.storage.store import Store

log = logging.getLogger(__name__)

BATCH_HOSTS = 512
BATCH_ENTRIES = 20_000
OUTBOX_CHUNK = 100
DRAINED = ("hosts", "front", "back", "urls", "outbox")

Checkpoint = Callable[[str], None]


@dataclass(frozen=True)
class Layout:
    """Where a resize's stores are, by slot: ``path(slot)`` is a store's directory,
    ``place(owner)`` the slot a host owned by worker ``owner`` goes to, ``outbox(owner)``
    the store whose outbox takes a drained store's unacknowledged records for that owner
    (``outboxes``: every store it may name), and ``retire(slot, path)`` puts a drained
    store away (its new name)."""

    path: Callable[[int], Path]
    place: Callable[[int], int]
    outbox: Callable[[int], Path]
    outboxes: tuple[Path, ...]
    retire: Callable[[int, Path], str]

    @classmethod
    def machine(cls, dd: DataDir) -> Layout:
        """One data directory's: slot = worker id, a drained store renamed retired."""

        def retire(worker_id: int, path: Path) -> str:
            target = dd.retired(worker_id)
            path.rename(target)
            return target.name

        return cls(dd.worker, lambda owner: owner, lambda owner: dd.supervisor,
                   (dd.supervisor,), retire)


@dataclass(slots=True)
class Flow:
    """What moved from one store to another: hosts, queued URLs, URL states."""

    hosts: int = 0
    queued: int = 0
    urls: int = 0
    payloads: int = 0


@dataclass
class Resize:
    """What a resize did: per (source, destination) flows, retired stores, time taken."""

    old_procs: int | None
    procs: int
    flows: dict[tuple[int, int], Flow] = field(default_factory=dict)
    outbox_batches: int = 0
    retired: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def flow(self, source: int, dest: int) -> Flow:
        return self.flows.setdefault((source, dest), Flow())

    def total(self) -> Flow:
        out = Flow()
        for flow in self.flows.values():
            out.hosts += flow.hosts
            out.queued += flow.queued
            out.urls += flow.urls
            out.payloads += flow.payloads
        return out

    def summary(self) -> str:
        t = self.total()
        return (
            f"resized from {self.old_procs or '?'} to {self.procs} workers in "
            f"{self.seconds:.1f}s: {t.hosts:,} hosts, {t.queued:,} queued URLs, {t.urls:,} "
            f"URL states and {t.payloads:,} payload-index entries moved, "
            f"{self.outbox_batches} outbox batches handed to the supervisor, "
            f"{len(self.retired)} stores retired"
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, for ``hive status``."""
        t = self.total()
        return {
            "from": self.old_procs, "to": self.procs, "seconds": round(self.seconds, 3),
            "hosts": t.hosts, "queued": t.queued, "urls": t.urls, "payloads": t.payloads,
            "moves": [
                {"from": source, "to": dest, "hosts": f.hosts, "queued": f.queued, "urls": f.urls,
                 "payloads": f.payloads}
                for (source, dest), f in sorted(self.flows.items())
            ],
            "outbox_batches": self.outbox_batches, "retired": list(self.retired),
        }


class Move(NamedTuple):
    """A host to move: its hash, its destination store, and its size in records."""

    host_hash: int
    dest: int
    size: int


@dataclass(slots=True)
class Tally:
    """What one transaction moved: queue entries (back entries among them), URL states,
    and the meta counters they change."""

    queued: int = 0
    back: int = 0
    urls: int = 0
    counts: Counter[str] = field(default_factory=Counter)


def batches(
    moves: Iterable[Move], max_hosts: int = BATCH_HOSTS, max_entries: int = BATCH_ENTRIES
) -> Iterator[list[Move]]:
    """Moves grouped by destination, in host-hash order, into batches of at most
    ``max_hosts`` hosts and ``max_entries`` records (a larger host is a batch alone)."""
    batch: list[Move] = []
    size = 0
    for move in sorted(moves, key=lambda m: (m.dest, m.host_hash)):
        if batch and (
            move.dest != batch[0].dest or len(batch) >= max_hosts
            or size + move.size > max_entries
        ):
            yield batch
            batch, size = [], 0
        batch.append(move)
        size += move.size
    if batch:
        yield batch


def start_ring(cfg: Config, procs: int, previous: Mapping[str, Any] | None) -> Ring:
    """The ring a start of ``procs`` workers runs with: the config's vnodes and seed, and
    the ring-key scheme (hive.core.keys) the data directory was made with: the one the
    previous ``hive.json`` records, ``"host"`` if it records none (a directory made before
    the scheme was), ``hive.ring_key`` for a fresh directory. A scheme is never changed
    after: it places every host."""
    recorded = previous.get("ring") if previous is not None else None
    if previous is None:
        key = cfg.hive.ring_key
    elif isinstance(recorded, Mapping):
        key = recorded.get("key", HOST)
    else:
        raise StoreError("hive.json is damaged: it names no ring")
    try:
        return Ring(procs, cfg.hive.vnodes, cfg.hive.ring_seed, key)
    except ValueError as exc:
        raise StoreError(f"hive.json is damaged: {exc}") from exc


def resize_if_changed(data_dir: Path, cfg: Config, procs: int,
                      previous: Mapping[str, Any] | None) -> Resize | None:
    """Resize before a start whose ring (``procs``, vnodes, seed) differs from the one the
    previous ``hive.json`` records; None on a fresh data directory or the same ring."""
    if previous is None:
        return None
    ring = start_ring(cfg, procs, previous)
    try:
        if Ring.from_params(previous["ring"]) == ring:
            return None
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{DataDir(data_dir).state_file} is damaged: {exc}") from exc
    return resize(data_dir, cfg, procs)


def resize(
    data_dir: Path, cfg: Config, procs: int, *, now: float | None = None,
    checkpoint: Checkpoint | None = None,
) -> Resize:
    """Move every host to the store its owner has under the ring of ``procs`` workers,
    retire the stores beyond it, then record the ring in ``hive.json``.

    ``now`` is the time leased hosts wait their delay from (default: the clock).
    ``checkpoint`` is called with ``"copied"`` after each commit at a destination and
    ``"deleted"`` after each at a source: an exception it raises stops the move there,
    as a crash would.
    """
    dd = DataDir(data_dir)
    state = dd.read_state()
    ring = start_ring(cfg, procs, state)
    previous = (state or {}).get("ring")
    old = previous.get("procs") if isinstance(previous, dict) else None
    result = Resize(old if isinstance(old, int) else None, procs)
    started = time.monotonic()
    log.info("resize: moving hosts from ring %s to %s", previous, ring.params)
    mover = Mover(Layout.machine(dd), cfg, ring, time.time() if now is None else now,
                  checkpoint or (lambda step: None), result)
    try:
        for worker_id, _ in dd.workers():
            mover.move_out(worker_id, drain=worker_id >= ring.procs)
    finally:
        mover.close()
    dd.update_state(ring=ring.params, procs=ring.procs)
    result.seconds = time.monotonic() - started
    return result


class _Store(NamedTuple):
    """A worker store opened for the move, and its lock."""

    store: DurableStore
    lock: Lock

    @classmethod
    def open(cls, path: Path, map_size_mb: int) -> _Store:
        path.mkdir(parents=True, exist_ok=True)
        lock = Lock(DataDir.store_lock(path), f"the store {path.name}")
        try:
            return cls(DurableStore(path, map_size_mb), lock)
        except BaseException:
            lock.release()
            raise

    def close(self) -> None:
        self.store.close()
        self.lock.release()


class Mover:
    """Moves hosts between the stores of a :class:`Layout`, each held open (and locked)
    from its first use to :meth:`close`."""

    def __init__(
        self, layout: Layout, cfg: Config, ring: Ring, now: float, checkpoint: Checkpoint,
        result: Resize,
    ) -> None:
        self.layout = layout
        self.cfg = cfg
        self.ring = ring
        self.now = now
        self.checkpoint = checkpoint
        self.result = result
        self.min_delay = cfg.politeness.min_delay
        self.stores: dict[int, _Store] = {}

    def store(self, slot: int) -> DurableStore:
        opened = self.stores.get(slot)
        if opened is None:
            opened = _Store.open(self.layout.path(slot), self.cfg.frontier.map_size_mb)
            opened.store.write(_domain_rows)
            self.stores[slot] = opened
        return opened.store

    def close(self) -> None:
        for store in self.stores.values():
            store.close()
        self.stores.clear()

    def move_out(self, worker_id: int, drain: bool) -> None:
        """Move out of one store every host the layout places elsewhere; with ``drain``
        (a store the new ring has no place for), empty it and retire it."""
        src = self.store(worker_id)
        with src.read() as txn:
            moves, front, retries = scan(txn, worker_id, self.ring, self.layout.place)
        for batch in batches(moves):
            dest = self.store(batch[0].dest)
            with src.read() as txn:
                dest.write(copy_hosts, txn, batch, front, retries, self.now, self.min_delay)
            self.checkpoint("copied")
            tally = src.write(delete_hosts, batch, front, retries)
            self._count(worker_id, batch[0].dest, len(batch), tally)
            self.checkpoint("deleted")
        self._payloads(worker_id, src)
        # A recrawl's plan and a prior crawl's index are read again from their start by every
        # worker under the new ring (hive.procs.plan, hive.procs.dedup): the lines one worker
        # read as another's may now be its own.
        src.write(delete_keys, "meta", [META_RECRAWL_FROM, META_DEDUP_FROM])
        if drain:
            self._orphans(worker_id, src)
            self._outbox(src)
            self._retire(worker_id, src)
        for (source, target), flow in sorted(self.result.flows.items()):
            if source == worker_id:
                log.info("resize: worker-%02d -> worker-%02d: %d hosts, %d queued URLs, "
                         "%d URL states, %d payload-index entries", source, target, flow.hosts,
                         flow.queued, flow.urls, flow.payloads)

    def _count(self, source: int, dest: int, hosts: int, tally: Tally) -> None:
        flow = self.result.flow(source, dest)
        flow.hosts += hosts
        flow.queued += tally.queued
        flow.urls += tally.urls

    def _payloads(self, worker_id: int, src: DurableStore) -> None:
        """Move the payload-index entries whose URI's host another worker owns."""
        start = b""
        while True:
            with src.read() as txn:
                chunk = list(islice(txn.items("payloads", start), BATCH_ENTRIES))
            if not chunk:
                return
            start = chunk[-1][0] + b"\0"
            by_dest: dict[int, list[tuple[bytes, bytes]]] = {}
            for key, value in chunk:
                owner = payload_owner(value, self.ring)
                dest = None if owner is None else self.layout.place(owner)
                if dest is not None and dest != worker_id:
                    by_dest.setdefault(dest, []).append((key, value))
            for dest, items in sorted(by_dest.items()):
                self.store(dest).write(copy_payloads, items)
                self.checkpoint("copied")
                src.write(delete_keys, "payloads", [key for key, _ in items])
                self.result.flow(worker_id, dest).payloads += len(items)
                self.checkpoint("deleted")

    def _orphans(self, worker_id: int, src: DurableStore) -> None:
        """URL states left once every host has gone (refusals with no host record)."""
        while True:
            with src.read() as txn:
                chunk = list(islice(txn.items("urls"), BATCH_ENTRIES))
            if not chunk:
                return
            by_dest: dict[int, list[tuple[bytes, bytes]]] = {}
            for key, value in chunk:
                owner = U64.unpack_from(key)[0] % self.ring.procs
                by_dest.setdefault(self.layout.place(owner), []).append((key, value))
            for dest, items in sorted(by_dest.items()):
                self.store(dest).write(copy_urls, items)
                self.checkpoint("copied")
            src.write(delete_urls, [key for key, _ in chunk])
            for dest, items in by_dest.items():
                self._count(worker_id, dest, 0, Tally(urls=len(items)))
            self.checkpoint("deleted")

    def drain_outbox(self, path: Path) -> None:
        """Hand the unacknowledged batches of the store at ``path``, one that is no slot of
        the layout (a supervisor's, on a machine leaving a cluster), to the layout's outbox."""
        opened = _Store.open(path, self.cfg.frontier.map_size_mb)
        try:
            self._outbox(opened.store)
        finally:
            opened.close()

    def _outbox(self, src: DurableStore) -> None:
        """Hand the store's unacknowledged batches to the layout's outboxes, each record to
        the outbox that takes its owner's, once each: a marker in each target, committed
        with the copy, says the batch is there, until the source's outbox is empty."""
        marker = resize_marker(src.path.name)
        targets: dict[Path, tuple[Store, Outbox]] = {}
        try:
            for path in self.layout.outboxes:
                if DataDir.store_data(path).exists():
                    self._open_outbox(targets, path)
            while True:
                with src.read() as txn:
                    chunk = list(islice(txn.items("outbox"), OUTBOX_CHUNK))
                if not chunk:
                    break
                for key, data in chunk:
                    try:
                        records = decode_records(data)
                    except ValueError as exc:
                        raise HiveError(
                            f"{src.path}: outbox batch {U64.unpack(key)[0]} is undecodable "
                            f"({exc}); see hive verify"
                        ) from exc
                    by_target: dict[Path, list[UrlRecord]] = {}
                    for record in records:
                        path = self.layout.outbox(self.ring.owner(record.host_key))
                        by_target.setdefault(path, []).append(record)
                    for path, part in by_target.items():
                        store, outbox = self._open_outbox(targets, path)
                        if store.get("meta", marker + key) is None:
                            outbox.put(part, self.now)
                            store.put("meta", marker + key, b"")
                    self.result.outbox_batches += 1
                for store, _ in targets.values():
                    store.commit(self.now)
                self.checkpoint("copied")
                src.write(delete_keys, "outbox", [key for key, _ in chunk])
                self.checkpoint("deleted")
            for store, _ in targets.values():
                for key in [key for key, _ in store.range("meta", marker)]:
                    store.delete("meta", key)
        except BaseException:
            for store, _ in targets.values():
                store.abandon()
            raise
        for store, _ in targets.values():
            store.close(self.now)

    def _open_outbox(self, targets: dict[Path, tuple[Store, Outbox]],
                     path: Path) -> tuple[Store, Outbox]:
        opened = targets.get(path)
        if opened is None:
            for slot, held in list(self.stores.items()):  # one environment per file
                if held.store.path == path:
                    self.stores.pop(slot).close()
            store = Store(path, sync_interval=0.0)
            hive = self.cfg.hive
            opened = targets[path] = store, Outbox(store, resend_after=hive.resend_after,
                                                   max_tries=hive.max_tries)
        return opened

    def _retire(self, worker_id: int, src: DurableStore) -> None:
        left = {name: n for name in DRAINED if (n := src.entries(name))}
        if left:
            raise HiveError(
                f"{src.path} still holds {left} after moving every host out; it is not "
                "retired: see hive verify"
            )
        self.stores.pop(worker_id).close()
        name = self.layout.retire(worker_id, src.path)
        self.result.retired.append(name)
        log.info("resize: %s is drained and retired as %s", src.path.name, name)


# -- the steps: pure functions of store transactions ------------------------------------


def scan(
    txn: Txn, worker_id: int, ring: Ring, place: Callable[[int], int] = lambda owner: owner,
) -> tuple[list[Move], dict[int, bytearray], dict[int, bytearray]]:
    """The hosts of store ``worker_id`` that ``ring`` gives to an owner ``place`` puts in
    another store, their front keys (9 bytes each, concatenated per host) from one pass over
    the front, and their retries keys (25 bytes each) from one pass over the retries."""
    sizes: dict[int, tuple[int, int]] = {}
    for key, value in txn.items("hosts"):
        state = HostState.decode(value)
        owner = place(ring.owner(state.host_key))  # by its ring key (hive.core.keys)
        if owner != worker_id:
            sizes[U64.unpack(key)[0]] = owner, 1 + state.queued + state.admitted
    front: dict[int, bytearray] = {}
    if sizes:
        last_key, last_hash = "", 0
        for key, value in txn.items("front"):
            hk = UrlRecord.host_key_of(value)
            if hk != last_key:
                last_key, last_hash = hk, host_hash(politeness_key(hk))
            if last_hash in sizes:
                front.setdefault(last_hash, bytearray()).extend(key)
    retries: dict[int, bytearray] = {}
    if sizes:
        for key, _ in txn.items("retries"):
            hh = U64.unpack_from(key, 8)[0]
            if hh in sizes:
                retries.setdefault(hh, bytearray()).extend(key)
    moves = [
        Move(hh, owner, size + len(front.get(hh, b"")) // LEVEL_SEQ.size
             + len(retries.get(hh, b"")) // TIME_HOST_LEVEL_SEQ.size)
        for hh, (owner, size) in sizes.items()
    ]
    return moves, front, retries


def _keys(joined: bytes | bytearray, size: int) -> Iterator[bytes]:
    """The keys of ``size`` bytes concatenated in ``joined``."""
    for i in range(0, len(joined), size):
        yield bytes(joined[i : i + size])


def _queue(txn: Txn, prefix: bytes, fronts: bytes | bytearray) -> Iterator[tuple[int, int, bytes]]:
    """A host's queued URLs, back and front merged: (level, seq, record) in that order."""

    def back() -> Iterator[tuple[int, int, bytes]]:
        for key, value in txn.range("back", prefix):
            _, level, seq = HOST_LEVEL_SEQ.unpack(key)
            yield level, seq, value

    def front() -> Iterator[tuple[int, int, bytes]]:
        for i in range(0, len(fronts), LEVEL_SEQ.size):
            key = bytes(fronts[i : i + LEVEL_SEQ.size])
            level, seq = LEVEL_SEQ.unpack(key)
            yield level, seq, txn.get("front", key) or b""

    return heapq.merge(back(), front())


def _meta(txn: Txn, tally: Tally, sign: int, seq: int | None) -> None:
    """Apply a tally to the store's meta state (added, or taken away with sign -1)."""
    state = MetaState.load(txn)
    state.add(tally.counts, sign)
    state.back_queued += sign * tally.back
    state.seq = max(state.seq, seq or 0)
    state.save(txn)


def _put_urls(txn: Txn, items: Iterable[tuple[bytes, bytes]], tally: Tally) -> None:
    """Copy URL states, overwriting (so that a second copy changes no counter)."""
    for key, value in items:
        old = txn.replace("urls", key, value)
        tally.urls += 1
        tally.counts.update(state_counters(value))
        if old is not None:
            tally.counts.subtract(state_counters(old))


def _domain_rows(txn: Txn) -> None:
    """A store made before the ``domains`` rows gets them before any host moves."""
    domains.ensure(txn, lambda: (HostState.decode(v) for _, v in txn.items("hosts")))


def copy_hosts(
    txn: Txn, src: Txn, batch: list[Move], front: dict[int, bytearray],
    retries: dict[int, bytearray], now: float, min_delay: float,
) -> Tally:
    """Step 1 at the destination: copy each host of the batch it does not hold yet."""
    tally = Tally()
    seq = first = MetaState.load(txn).seq
    for move in batch:
        hh = move.host_hash
        prefix = U64.pack(hh)
        if txn.get("hosts", prefix) is not None:
            continue
        state = HostState.decode(src.get("hosts", prefix) or b"")
        if src.get("leases", prefix) is not None:
            state.next_allowed = max(state.next_allowed, now + max(state.delay, min_delay))
        queued = 0
        for level, kept, value in _queue(src, prefix, front.get(hh, b"")):
            queued += 1
            seq = max(seq, kept)
            txn.put("back", back_key(hh, level, kept), value)
        for key in _keys(retries.get(hh, b""), TIME_HOST_LEVEL_SEQ.size):
            seq = max(seq, TIME_HOST_LEVEL_SEQ.unpack(key)[3])
            txn.put("retries", key, src.get("retries", key) or b"")
            tally.queued += 1
        state.queued = queued
        state.parked_at = state.next_allowed if queued else -1.0
        if queued:
            txn.put("parked", parked_key(state.parked_at, hh), b"")
        txn.put("hosts", prefix, state.encode())
        domains.add_host(txn, state)
        _put_urls(txn, src.range("urls", prefix), tally)
        robots = src.get("robots", state.host_key.encode())
        if robots is not None:
            txn.put("robots", state.host_key.encode(), robots)
        tally.queued += queued
        tally.back += queued
    _meta(txn, tally, 1, seq if seq > first else None)
    return tally


def delete_hosts(
    txn: Txn, batch: list[Move], front: dict[int, bytearray], retries: dict[int, bytearray]
) -> Tally:
    """Step 2 at the source: delete the batch's hosts, every trace of them."""
    tally = Tally()
    for move in batch:
        hh = move.host_hash
        prefix = U64.pack(hh)
        held = txn.get("hosts", prefix)
        state = HostState.decode(held or b"")
        if held is not None:
            domains.add_host(txn, state, -1)
        tally.back += sum(1 for _ in txn.delete_range("back", prefix))
        for value in txn.delete_range("urls", prefix):
            tally.urls += 1
            tally.counts.update(state_counters(value))
        fronts = front.get(hh, b"")
        for i in range(0, len(fronts), LEVEL_SEQ.size):
            txn.delete("front", bytes(fronts[i : i + LEVEL_SEQ.size]))
        tally.queued += len(fronts) // LEVEL_SEQ.size
        for key in _keys(retries.get(hh, b""), TIME_HOST_LEVEL_SEQ.size):
            tally.queued += txn.delete("retries", key)
        for name in ("hosts", "bound", "leases"):
            txn.delete(name, prefix)
        if state.parked_at >= 0:
            txn.delete("parked", parked_key(state.parked_at, hh))
        txn.delete("robots", state.host_key.encode())
    tally.queued += tally.back
    _meta(txn, tally, -1, None)
    return tally


def payload_owner(value: bytes, ring: Ring) -> int | None:
    """The worker that owns the host of the URI a ``payloads`` value names; None if the
    value does not decode."""
    original = decode_payload(value)
    if original is None:
        return None
    try:
        return ring.owner(host_key(original.uri))
    except URLError:
        return None


def copy_payloads(txn: Txn, items: list[tuple[bytes, bytes]]) -> None:
    for key, value in items:
        txn.put("payloads", key, value, overwrite=False)


def copy_urls(txn: Txn, items: list[tuple[bytes, bytes]]) -> Tally:
    """Copy URL states that have no host record (overwriting: a second copy is a no-op)."""
    tally = Tally()
    _put_urls(txn, items, tally)
    _meta(txn, tally, 1, None)
    return tally


def delete_urls(txn: Txn, keys: list[bytes]) -> Tally:
    tally = Tally()
    for key in keys:
        value = txn.pop("urls", key)
        if value is not None:
            tally.urls += 1
            tally.counts.update(state_counters(value))
    _meta(txn, tally, -1, None)
    return tally


def delete_keys(txn: Txn, name: str, keys: list[bytes]) -> None:
    for key in keys:
        txn.delete(name, key)
