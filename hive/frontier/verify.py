"""Consistency checks of a stopped worker's frontier store: what ``hive verify`` reports.

This module owns the rules that tie the databases of hive/storage/schema.py to
one another. :func:`verify_store` opens one worker directory read-only and
without the lock file (the worker must be stopped: its directory lock admits
one process), reads it in one transaction, never writes, and returns a
:class:`Report`; :func:`verify_data_dir` does so for every ``worker-NN`` of a
data directory. A store as the frontier commits it passes every check, after a
clean close and after a crash alike (the last committed turn). Checks:

- ``urls``: a 16-byte key; the state ``p`` (bare, or naming its live entry:
  by its kind and depth in a state of an earlier hive, by its level and seq
  with the URL's evidence since, hive.storage.schema ``Pending``), or
  ``d``/``r`` and a UTF-8 outcome or reason.
- ``front``: key level (1..255) and seq; the record decodes; its URL is in
  ``urls``: pending with this entry live, or else the entry is superseded
  (hive.frontier.seen: counted, not a problem).
- ``back``: key host hash, level (1..255) and seq; the record decodes and its
  host key hashes to the key's prefix; its URL is in ``urls``, as for front.
- ``retries``: key due time, then a back key (host hash, level 1..255, seq);
  the record decodes and its host key hashes to the key's host; its URL is in
  ``urls``, as for front; its host has a state.
- Every pending URL is in exactly one live queue entry, front, back or
  retries: no URL in no queue, none in two; a state that names its entry's
  level and seq names exactly one entry, so a URL its evidence moved (deleted
  at one level, put at another) is in one place, never two or none. Per
  host, the count and the sum of the url hashes of its pending URLs must
  equal those of its queue entries in state ``p``; a host whose tallies
  differ is read again to name the URLs. So memory is two integers per host
  with front entries, never a set of every URL.
- ``hosts``: the state decodes and its host key hashes to its key; every host
  with queued URLs has one; ``queued`` equals its back entries, ``listed`` its
  URLs pending as pages listed by another origin's sitemap, and its other
  pending plus done URLs are ``admitted`` at least and ``admitted`` plus its
  sitemap files at most (a done sitemap's state does not say it was one). A
  host with back entries is bound or parked, not both (bound hosts stay listed
  after a stop: the frontier parks them on the next open); ``parked_at`` >= 0 exactly when the entry
  ``parked_key(parked_at, host)`` exists.
- ``bound``: an 8-byte key, an empty value, a host with a state.
- ``parked``: a 16-byte key, an empty value, a host whose ``parked_at`` names
  this entry and that has back entries.
- ``leases``: the host is bound; the value is empty (robots.txt; the host has
  back entries) or an existing back key of that host.
- ``meta`` ``state``: absent only while the store holds nothing else (a worker
  that never owned a host); else a JSON object; ``back_queued`` equals the back entries;
  ``seq`` is at least every queue key's seq (new keys must not collide); the
  counters agree with the states: ``frontier/admitted`` = pending + done URLs,
  ``frontier/done/<o>`` = URLs in ``d<o>``, ``frontier/refused/<r>`` = URLs
  in ``r<r>``.
- ``outbox``: an 8-byte key; the value a records frame as hive.core.wire decodes
  it (u32 count, then per record a u32 length and ``UrlRecord`` bytes).
- ``damaged``: every entry is a problem (a queued record the frontier could not
  decode and set aside; its URL stays pending in ``urls`` with no queue entry).
- ``quarantine``: every entry is a problem (links never handed on), listed with
  its reason; ``hive verify --replay-quarantine`` puts those that decode back.
- ``domains`` (once ``meta`` ``domains`` says the rows are made): each row decodes
  and is the sum over its domain's host records (hive.frontier.domains): hosts,
  admitted plus listed, fetched; every domain of a host record has a row. Memory:
  one row per domain of the store.
- The ring, given ``owner`` and ``worker_id``: every host with pending URLs is
  this worker's. Across a data directory: no host has pending URLs in two
  workers.

Not checked: ``robots`` (the cache reads a corrupt entry as a miss) and bound
hosts with empty queues (the frontier releases them when it meets them).

Why one module: the checks above are one concept, the rules that tie the store's
databases to one another, and they run together in one read transaction (a rule
between two databases is checked where both are read, with two integers a host of
memory); splitting them by database would split each cross-database rule in two.
"""

from __future__ import annotations

import functools
import struct
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hive.core.keys import politeness_key
from hive.core.record import LISTED, UrlRecord
from hive.core.urls import SessionIds, fingerprint, host_hash
from hive.core.wire import decode_records
from hive.errors import StoreError
from hive.frontier import domains
from hive.frontier.hosts import HostState
from hive.frontier.seen import is_live
from hive.storage.datadir import DataDir
from hive.storage.modes import Txn, read_only
from hive.storage.schema import (
    ADDED_LATER,
    DONE,
    HOST_LEVEL_SEQ,
    LEVEL_SEQ,
    META_STATE,
    PENDING,
    REFUSED,
    TIME_HOST,
    TIME_HOST_LEVEL_SEQ,
    U64,
    URL_KEY,
    MetaState,
    parked_key,
    pending,
    url_key,
)

Owner = Callable[[str], int]
Items = Iterator[tuple[bytes, bytes]]

# What a store cannot hold without the frontier having committed its ``meta`` state.
NEEDS_META = frozenset({
    "urls/pending", "urls/done", "urls/refused", "front", "back", "hosts", "bound", "parked",
    "leases", "outbox", "retries",
})


@dataclass
class Report:
    """What verifying one store found: ``problems`` keeps the first ``limit``, ``omitted``
    counts the rest; ``counts`` has entries per database and URLs per state."""

    path: Path
    limit: int = 100
    problems: list[str] = field(default_factory=list)
    omitted: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, message: str) -> None:
        if len(self.problems) < self.limit:
            self.problems.append(message)
        else:
            self.omitted += 1

    @property
    def ok(self) -> bool:
        return not self.problems and not self.omitted

    def summary(self) -> str:
        counts = ", ".join(f"{name} {n}" for name, n in self.counts.items())
        if self.ok:
            return f"{self.path}: ok ({counts})"
        total = len(self.problems) + self.omitted
        lines = [f"{self.path}: {total} problem{'' if total == 1 else 's'} ({counts})"]
        lines += [f"  {problem}" for problem in self.problems]
        if self.omitted:
            lines.append(f"  ... and {self.omitted} more")
        return "\n".join(lines)


def verify_store(
    path: Path, *, worker_id: int | None = None, owner: Owner | None = None, limit: int = 100,
    session_ids: Sequence[str] = (),
) -> Report:
    """Check one stopped worker's store; StoreError if it cannot be opened.

    ``session_ids`` is the crawl's ``scope.session_ids``: the seen set's fingerprints
    leave them out."""
    return _verify(path, worker_id, owner, limit, SessionIds(session_ids))[0]


def verify_data_dir(
    data_dir: Path, owner: Owner | None = None, *, limit: int = 100, procs: int | None = None,
    session_ids: Sequence[str] = (), workers: range | None = None,
) -> dict[int, Report]:
    """Check every ``worker-NN`` store under ``data_dir``, by worker id.

    ``owner`` maps a host key to its worker id (the ring in force); with it each
    store's hosts are checked against the ring. Without it, a host with pending
    URLs in two workers is still reported, in the report of the later one.
    ``procs`` is the number of workers the data directory's ring names: a store
    of one of them that is missing (or has lost its ``data.mdb``) is reported,
    since the worker would start empty and fetch its hosts' pages again. ``workers``
    narrows that to the ids one machine of a cluster runs (its slice of the ring).
    """
    dd = DataDir(data_dir)
    found = dd.workers()
    reports: dict[int, Report] = {}
    present = {worker_id for worker_id, d in found if (d / "data.mdb").exists()}
    for worker_id in range(procs or 0) if workers is None else workers:
        if worker_id not in present:
            report = reports[worker_id] = Report(dd.worker(worker_id), limit)
            report.add(f"the store of worker {worker_id} is missing "
                       f"({report.path / 'data.mdb'}): its hosts' pages would be fetched again")
    found = [(worker_id, d) for worker_id, d in found if worker_id in present or not procs]
    first_owner: dict[int, int] = {}
    for worker_id, directory in found:
        try:
            report, pending = _verify(
                directory, worker_id, owner, limit, SessionIds(session_ids)
            )
        except StoreError as exc:
            report, pending = Report(directory, limit), {}
            report.add(str(exc))
        for hh, name in pending.items():
            other = first_owner.setdefault(hh, worker_id)
            if other != worker_id:
                report.add(f"host {name} has pending URLs in {dd.worker_name(other)} too")
        reports[worker_id] = report
    return reports


def _verify(
    path: Path, worker_id: int | None, owner: Owner | None, limit: int, session_ids: SessionIds
) -> tuple[Report, dict[int, str]]:
    """The report and the hosts with pending URLs (hash → host key) of one store."""
    if owner is not None and worker_id is None:
        raise ValueError("the ring check needs this store's worker_id")
    report = Report(path, limit)
    with read_only(path) as txn:
        checker = _Checker(txn, report, owner, worker_id, session_ids)
        checker.run()
    return report, checker.pending_hosts


class _Run:
    """A cursor's items in key order, taken one host-hash prefix at a time."""

    def __init__(self, items: Items) -> None:
        self._items = items
        self.item = next(items, None)

    @property
    def prefix(self) -> bytes | None:
        return None if self.item is None else self.item[0][:8]

    def take(self, prefix: bytes) -> Items:
        while self.item is not None and self.item[0][:8] == prefix:
            yield self.item
            self.item = next(self._items, None)


def _back_name(key: bytes) -> str:
    hh, level, seq = HOST_LEVEL_SEQ.unpack(key)
    return f"back {hh:016x}/{level}/{seq}"


def _retry_name(key: bytes) -> str:
    millis, hh, level, seq = TIME_HOST_LEVEL_SEQ.unpack(key)
    return f"retry {hh:016x}/{level}/{seq} due {millis / 1000}"


def _describe(state: bytes | None) -> str:
    if state is None:
        return "not in urls"
    text = state[1:].decode("utf-8", "replace")
    if state[:1] == DONE:
        return f"done ({text})"
    if state[:1] == REFUSED:
        return f"refused ({text})"
    return f"in an invalid state {state!r}"


class _Checker:
    """One pass per database over a read transaction; see the module docstring."""

    def __init__(
        self, txn: Txn, report: Report, owner: Owner | None, worker_id: int | None,
        session_ids: SessionIds,
    ) -> None:
        self.txn = txn
        self.fingerprint = functools.partial(fingerprint, session_ids=session_ids)
        self.report = report
        self.owner = owner
        self.worker_id = worker_id
        for name in txn.missing:
            if name not in ADDED_LATER:
                report.add(f"database {name} is missing")
        self.n: Counter[str] = Counter()
        self.states: Counter[bytes] = Counter()
        self.bound: set[bytes] = set()
        self.front: dict[bytes, list[int]] = {}
        self.suspects: list[bytes] = []
        self.pending_hosts: dict[int, str] = {}
        self.max_seq = 0
        self._last_host = ""
        self._last_hash = 0

    def run(self) -> None:
        self._bound()
        self._front()
        self._retries()
        self._hosts()
        self._diagnose()
        self._leases()
        self._parked()
        self._outbox()
        self._quarantine()
        self._damaged()
        self._domains()
        self._meta(self._by_state())
        n = self.n
        self.report.counts = {
            "urls": n["urls/pending"] + n["urls/done"] + n["urls/refused"],
            "urls/pending": n["urls/pending"], "urls/done": n["urls/done"],
            "urls/refused": n["urls/refused"], "front": n["front"], "back": n["back"],
            "superseded": n["superseded"], "hosts": n["hosts"], "bound": n["bound"],
            "parked": n["parked"], "leases": n["leases"], "retries": n["retries"],
            "outbox": n["outbox"], "outbox/records": n["outbox/records"],
            "quarantine": n["quarantine"], "damaged": n["damaged"], "domains": n["domains"],
        }

    # -- reading -----------------------------------------------------------------

    def _items(self, name: str) -> Items:
        return self.txn.items(name)

    def _range(self, name: str, prefix: bytes) -> Items:
        return self.txn.range(name, prefix)

    def _get(self, name: str, key: bytes) -> bytes | None:
        return self.txn.get(name, key)

    def _host(self, prefix: bytes) -> HostState | None:
        data = self._get("hosts", prefix)
        if data is None:
            return None
        try:
            return HostState.decode(data)
        except (ValueError, struct.error):
            return None

    def _name(self, prefix: bytes) -> str:
        host = self._host(prefix)
        return host.host_key if host is not None else f"hash {prefix.hex()}"

    # -- queues and URLs -------------------------------------------------------------

    def _queued(
        self, data: bytes, prefix: bytes | None, level: int, seq: int
    ) -> tuple[bytes, int] | str | None:
        """A queue entry's host prefix and url hash if it is its pending URL's live entry
        (the one its state places at ``level`` and ``seq``), None if it is superseded
        (hive.frontier.seen), else what is wrong.

        ``prefix`` is the host hash its record must have (back entries), or None (front).
        """
        try:
            record = UrlRecord.decode(data)
        except ValueError as exc:
            return f"undecodable record ({exc}): {data[:60]!r}"
        if record.host_key != self._last_host:
            self._last_host = record.host_key
            self._last_hash = host_hash(politeness_key(record.host_key))
        hh = self._last_hash
        own = U64.pack(hh)
        if prefix is not None and own != prefix:
            return (
                f"record of {record.url} (host {record.host_key}, hash {own.hex()})"
                " is queued under another host"
            )
        uh = self.fingerprint(record.url)
        state = self._get("urls", url_key(hh, uh))
        if state is None:
            return f"{record.url} is {_describe(state)}, yet queued"
        if not is_live(state, record, level, seq):
            self.n["superseded"] += 1
            return None
        return own, uh

    def _front(self) -> None:
        front = self.front
        entries = max_seq = 0
        for key, value in self._items("front"):
            entries += 1
            if len(key) != LEVEL_SEQ.size or key[0] == 0:
                self.report.add(f"front key {key.hex()} is not level (1..255) and seq")
                continue
            level, seq = LEVEL_SEQ.unpack(key)
            if seq > max_seq:
                max_seq = seq
            placed = self._queued(value, None, level, seq)
            if placed is None:
                continue
            if isinstance(placed, str):
                self.report.add(f"front {level}/{seq}: {placed}")
                continue
            tally = front.get(placed[0])
            if tally is None:
                front[placed[0]] = [1, placed[1]]
            else:
                tally[0] += 1
                tally[1] += placed[1]
        self.n["front"] = entries
        self.max_seq = max(self.max_seq, max_seq)

    def _retries(self) -> None:
        """Retries are tallied with the front's entries: pending URLs outside ``back``."""
        front = self.front
        for key, value in self._items("retries"):
            self.n["retries"] += 1
            if len(key) != TIME_HOST_LEVEL_SEQ.size or key[16] == 0:
                self.report.add(
                    f"retries key {key.hex()} is not due time, host hash, level (1..255), seq"
                )
                continue
            prefix = key[8:16]
            _, _, level, seq = TIME_HOST_LEVEL_SEQ.unpack(key)
            self.max_seq = max(self.max_seq, seq)
            placed = self._queued(value, prefix, level, seq)
            if placed is None:
                continue
            if isinstance(placed, str):
                self.report.add(f"{_retry_name(key)}: {placed}")
                continue
            if self._get("hosts", prefix) is None:
                self.report.add(f"{_retry_name(key)}: its host has no state")
            tally = front.setdefault(prefix, [0, 0])
            tally[0] += 1
            tally[1] += placed[1]

    def _hosts(self) -> None:
        """Merge urls, back and hosts (all sorted by host hash): one host at a time."""
        urls, back, hosts = (_Run(self._items(name)) for name in ("urls", "back", "hosts"))
        while True:
            prefixes = [r.prefix for r in (urls, back, hosts) if r.prefix is not None]
            if not prefixes:
                return
            prefix = min(prefixes)
            pending, pending_sum, done, apart = self._url_group(urls.take(prefix))
            entries, queued, queued_sum = self._back_group(prefix, back.take(prefix))
            state = self._host_state(prefix, hosts.take(prefix))
            if len(prefix) != 8:
                continue
            in_front, front_sum = self.front.pop(prefix, (0, 0))
            if (pending, pending_sum) != (queued + in_front, queued_sum + front_sum):
                self.suspects.append(prefix)
            if state is None:
                if entries or in_front:
                    self.report.add(
                        f"host hash {prefix.hex()} has {entries} back and {in_front} front"
                        " entries but no host state"
                    )
                continue
            self._host_checks(prefix, state, entries, pending + done, apart)
            if entries or in_front:
                self.pending_hosts[U64.unpack(prefix)[0]] = state.host_key
                self._ring(state.host_key)

    def _url_group(self, items: Items) -> tuple[int, int, int, Counter[str]]:
        """One host's URLs: (pending, sum of pending url hashes, done, the pending ones whose
        state names a listed page, by kind)."""
        pending_urls = pending_sum = done = 0
        apart: Counter[str] = Counter()
        states = self.states
        for key, state in items:
            if len(key) != URL_KEY.size:
                self.report.add(f"urls key {key.hex()} is not 16 bytes")
            elif state == PENDING or (entry := pending(state)) is not None:
                pending_urls += 1
                pending_sum += int.from_bytes(key[8:], "big")
                if state != PENDING and entry is not None:
                    if entry.level and not entry.base:
                        self.report.add(f"urls {key.hex()}: pending at level {entry.level} "
                                        "with no prioritizer's level (base 0)")
                    if entry.kind == LISTED:
                        apart[LISTED] += 1
                    if entry.seq > self.max_seq:  # the place it names: a seq the meta passed
                        self.max_seq = entry.seq
            elif state[:1] in (DONE, REFUSED) and len(state) > 1:
                states[state] += 1
                done += state[:1] == DONE
            else:
                self.report.add(f"urls {key.hex()}: invalid state {state!r}")
        self.n["urls/pending"] += pending_urls
        return pending_urls, pending_sum, done, apart

    def _back_group(self, prefix: bytes, items: Items) -> tuple[int, int, int]:
        """One host's back entries: (entries, entries of pending URLs, their url hash sum)."""
        entries = queued = queued_sum = 0
        for key, value in items:
            entries += 1
            if len(key) != HOST_LEVEL_SEQ.size or key[8] == 0:
                self.report.add(f"back key {key.hex()} is not host hash, level (1..255) and seq")
                continue
            _, level, seq = HOST_LEVEL_SEQ.unpack(key)
            self.max_seq = max(self.max_seq, seq)
            placed = self._queued(value, prefix, level, seq)
            if placed is None:
                continue
            if isinstance(placed, str):
                self.report.add(f"{_back_name(key)}: {placed}")
                continue
            queued += 1
            queued_sum += placed[1]
        self.n["back"] += entries
        return entries, queued, queued_sum

    def _host_state(self, prefix: bytes, items: Items) -> HostState | None:
        state = None
        for key, value in items:
            self.n["hosts"] += 1
            if len(key) != 8:
                self.report.add(f"hosts key {key.hex()} is not 8 bytes")
                continue
            try:
                state = HostState.decode(value)
            except (ValueError, struct.error) as exc:
                self.report.add(f"hosts {key.hex()}: undecodable state ({exc}): {value[:60]!r}")
                continue
            own = U64.pack(host_hash(state.host_key))
            if own != prefix:
                self.report.add(
                    f"hosts {key.hex()}: state of {state.host_key}, whose hash is {own.hex()}"
                )
        return state

    def _host_checks(
        self, prefix: bytes, host: HostState, entries: int, urls: int, apart: Counter[str]
    ) -> None:
        name = host.host_key
        if host.queued != entries:
            self.report.add(f"host {name}: queued is {host.queued}, back entries {entries}")
        if host.listed != apart[LISTED]:
            self.report.add(
                f"host {name}: listed is {host.listed} but {apart[LISTED]} of its URLs are"
                " pending as pages listed by another origin's sitemap"
            )
        # A sitemap file is not one of the host's admitted pages (a page upgraded to one is
        # both), and once done its state no longer says it was one: so the host's URLs
        # other than listings are its pages and at most its sitemap files more.
        own = urls - apart[LISTED]
        if not host.admitted <= own <= host.admitted + host.sitemaps:
            self.report.add(
                f"host {name}: admitted is {host.admitted} (and {host.sitemaps} sitemap"
                f" files) but {own} of its URLs are pending or done, listings aside"
            )
        bound = prefix in self.bound
        parked = host.parked_at >= 0
        entry = parked_key(host.parked_at, U64.unpack(prefix)[0])
        if parked and self._get("parked", entry) is None:
            self.report.add(f"host {name}: parked at {host.parked_at} but has no parked entry")
        if parked and bound:
            self.report.add(f"host {name} is both bound and parked")
        elif entries and not (parked or bound):
            self.report.add(f"host {name} has {entries} queued URLs, is neither bound nor parked")

    def _ring(self, host_key: str) -> None:
        if self.owner is None:
            return
        owner = self.owner(host_key)
        if owner != self.worker_id:
            self.report.add(
                f"host {host_key} has pending URLs here (worker {self.worker_id})"
                f" but is owned by worker {owner}"
            )

    def _diagnose(self) -> None:
        """Name the URLs of hosts whose pending URLs and queue entries do not match."""
        if not self.suspects:
            return
        suspects = set(self.suspects)
        places: dict[bytes, tuple[str, list[str]]] = {}

        def place(where: str, data: bytes, level: int, seq: int) -> None:
            try:
                record = UrlRecord.decode(data)
            except ValueError:
                return
            hh = host_hash(politeness_key(record.host_key))
            if U64.pack(hh) in suspects:
                uk = url_key(hh, self.fingerprint(record.url))
                state = self._get("urls", uk)
                if state is None or is_live(state, record, level, seq):
                    places.setdefault(uk, (record.url, []))[1].append(where)

        for key, value in self._items("front"):
            if len(key) == LEVEL_SEQ.size:
                level, seq = LEVEL_SEQ.unpack(key)
                place(f"front {level}/{seq}", value, level, seq)
        for key, value in self._items("retries"):
            if len(key) == TIME_HOST_LEVEL_SEQ.size:
                _, _, level, seq = TIME_HOST_LEVEL_SEQ.unpack(key)
                place(_retry_name(key), value, level, seq)
        for prefix in self.suspects:
            for key, value in self._range("back", prefix):
                if len(key) == HOST_LEVEL_SEQ.size:
                    _, level, seq = HOST_LEVEL_SEQ.unpack(key)
                    place(_back_name(key), value, level, seq)
            for key, state in self._range("urls", prefix):
                if state[:1] != PENDING:
                    continue
                url, where = places.get(key, ("", []))
                if not where:
                    self.report.add(
                        f"pending URL {key.hex()} of host {self._name(prefix)} is in no queue"
                    )
                elif len(where) > 1:
                    self.report.add(f"{url} is in {len(where)} queues: {', '.join(where)}")

    # -- host tables, leases, outbox, meta ---------------------------------------------

    def _bound(self) -> None:
        for key, value in self._items("bound"):
            self.n["bound"] += 1
            if len(key) != 8 or value:
                self.report.add(f"bound entry {key.hex()}={value[:60]!r} is not host hash, empty")
                continue
            self.bound.add(key)
            if self._get("hosts", key) is None:
                self.report.add(f"bound host {key.hex()} has no host state")

    def _has_back(self, prefix: bytes) -> bool:
        return next(self._range("back", prefix), None) is not None

    def _leases(self) -> None:
        for key, value in self._items("leases"):
            self.n["leases"] += 1
            if len(key) != 8:
                self.report.add(f"leases key {key.hex()} is not 8 bytes")
                continue
            name = self._name(key)
            if key not in self.bound:
                self.report.add(f"lease of host {name}: the host is not bound")
            if not value:
                if not self._has_back(key):
                    self.report.add(f"robots lease of host {name}: the host has nothing queued")
            elif len(value) != HOST_LEVEL_SEQ.size or value[:8] != key:
                self.report.add(f"lease of host {name} names {value.hex()}, not a back key of it")
            elif self._get("back", value) is None:
                self.report.add(f"lease of host {name} names {_back_name(value)}: not there")

    def _parked(self) -> None:
        for key, value in self._items("parked"):
            self.n["parked"] += 1
            if len(key) != TIME_HOST.size or value:
                self.report.add(f"parked entry {key.hex()}={value[:60]!r} is not time|host, empty")
                continue
            millis, hh = TIME_HOST.unpack(key)
            where = f"parked {millis / 1000}|{hh:016x}"
            prefix = key[8:]
            host = self._host(prefix)
            if host is None:
                self.report.add(f"{where}: the host has no (decodable) state")
                continue
            if host.parked_at < 0 or parked_key(host.parked_at, hh) != key:
                self.report.add(f"{where}: host {host.host_key} says parked_at {host.parked_at}")
            if not self._has_back(prefix):
                self.report.add(f"{where}: host {host.host_key} has nothing queued")

    def _quarantine(self) -> None:
        for key, value in self._items("quarantine"):
            self.n["quarantine"] += 1
            reason, _, data = value.partition(b"\0")
            seq = U64.unpack(key)[0] if len(key) == 8 else key.hex()
            self.report.add(
                f"quarantine {seq}: a batch of {len(data)} bytes never handed on "
                f"({reason.decode('utf-8', 'replace')}); hive verify --replay-quarantine "
                "sends it again if it decodes"
            )

    def _domains(self) -> None:
        """Each ``domains`` row is the sum over its domain's host records
        (hive.frontier.domains), once the rows are made."""
        if self.txn.get("meta", domains.META_DOMAINS) is None:
            return
        hosts = []
        for _, value in self._items("hosts"):
            try:
                hosts.append(HostState.decode(value))
            except (struct.error, UnicodeDecodeError):
                continue  # reported by _hosts
        expected = domains.expected(hosts)
        for key, value in self._items("domains"):
            self.n["domains"] += 1
            name = key.decode("utf-8", "surrogatepass")
            try:
                row = domains.decode(value)
            except struct.error:
                self.report.add(f"domain {name}: its row ({len(value)} bytes) does not decode")
                continue
            made = expected.pop(name, domains.Domain())
            if row != made:
                self.report.add(
                    f"domain {name}: its row says {row.hosts} hosts, {row.pages} pages, "
                    f"{row.fetched} fetched but its host records make {made.hosts}, "
                    f"{made.pages}, {made.fetched}"
                )
        for name, made in sorted(expected.items())[: self.report.limit]:
            self.report.add(f"domain {name}: {made.hosts} host records but no row")

    def _damaged(self) -> None:
        for key, value in self._items("damaged"):
            self.n["damaged"] += 1
            where, _, at = key.partition(b"\0")
            reason, _, data = value.partition(b"\0")
            self.report.add(
                f"damaged: a {where.decode('ascii', 'replace')} record (key {at.hex()}, "
                f"{len(data)} bytes) did not decode and was set aside "
                f"({reason.decode('utf-8', 'replace')})"
            )

    def _outbox(self) -> None:
        for key, value in self._items("outbox"):
            self.n["outbox"] += 1
            if len(key) != 8:
                self.report.add(f"outbox key {key.hex()} is not 8 bytes")
                continue
            try:
                self.n["outbox/records"] += len(decode_records(value))
            except ValueError as exc:
                self.report.add(f"outbox {U64.unpack(key)[0]}: undecodable batch ({exc})")

    def _by_state(self) -> dict[str, int]:
        """Done and refused URLs counted as the frontier's counters name them."""
        observed: dict[str, int] = {}
        for raw, n in self.states.items():
            try:
                text = raw[1:].decode("utf-8")
            except UnicodeDecodeError:
                self.report.add(f"urls: {n} URLs in a state that is not UTF-8: {raw!r}")
                continue
            kind = "done" if raw[:1] == DONE else "refused"
            self.n[f"urls/{kind}"] += n
            observed[f"frontier/{kind}/{text}"] = n
        return observed

    def _meta(self, observed: dict[str, int]) -> None:
        raw = self._get("meta", META_STATE)
        if raw is None:
            # The frontier writes its state with the first commit that has anything to
            # record: a worker that never owned a host (nor was told of one) has none.
            held = {name: n for name, n in self.n.items() if n and name in NEEDS_META}
            if held:
                found = ", ".join(f"{name} {n}" for name, n in sorted(held.items()))
                self.report.add(f"meta has no state, yet the store holds {found}")
            return
        where = self.report.path / "data.mdb"
        try:
            state = MetaState.decode(raw, where)
        except StoreError as exc:
            self.report.add(str(exc).removeprefix(f"{where}: "))
            return
        if state.missing:
            self.report.add(f"meta state lacks {', '.join(sorted(state.missing))}: {raw[:120]!r}")
            return
        counts = state.counts
        if state.back_queued != self.n["back"]:
            self.report.add(
                f"meta back_queued is {state.back_queued} but back has {self.n['back']} entries"
            )
        if state.seq < self.max_seq:
            self.report.add(f"meta seq is {state.seq} but a queue key has seq {self.max_seq}")
        admitted = counts.get("frontier/admitted", 0)
        expected = self.n["urls/pending"] + self.n["urls/done"]
        if admitted != expected:
            self.report.add(
                f"meta frontier/admitted is {admitted} but {expected} URLs are pending or done"
            )
        names = {n for n in counts if n.startswith(("frontier/done/", "frontier/refused/"))}
        for name in sorted(names | observed.keys()):
            if counts.get(name, 0) != observed.get(name, 0):
                self.report.add(
                    f"meta {name} is {counts.get(name, 0)} but {observed.get(name, 0)} URLs"
                    " are in that state"
                )
