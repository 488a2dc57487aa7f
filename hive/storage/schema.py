"""The on-disk schema of a hive store: its databases, key layouts, values and meta state.

Internal format — read by ``hive verify``, never by users. One LMDB environment
per worker directory (``DATA/worker-NN``) and one for the supervisor's outbox
(``DATA/supervisor``, the same databases, only ``outbox``, ``quarantine`` and
``meta`` used). All integers are big-endian, so byte order is numeric order.
This module alone knows these layouts: everyone else packs and reads keys,
URL states and the meta state through what it defines.

==========  ===================================  =====================================  ===========
db          key                                  value                                  writes
==========  ===================================  =====================================  ===========
urls        host_hash(8) url_hash(8)             URL state: ``p`` pending (then the     frontier
                                                 kind, depth, level and seq of its      (SeenSet),
                                                 live queue entry and its evidence:     resize
                                                 :class:`Pending`), ``d`` + outcome,
                                                 ``r`` + reason
front       level(1) seq(8)                      UrlRecord bytes (front FIFO of level)  frontier,
                                                                                        resize
back        host_hash(8) level(1) seq(8)         UrlRecord bytes (a host's queue,       frontier,
                                                 best first)                            resize
hosts       host_hash(8)                         HostState bytes (politeness, robots,   frontier,
                                                 counts)                                resize
bound       host_hash(8)                         empty: the host holds a back-end slot  frontier,
                                                                                        resize
parked      time_ms(8) host_hash(8)              empty: unbound host with URLs, due     frontier,
                                                 at time                                resize
leases      host_hash(8)                         back key (17), or empty for            frontier,
                                                 robots.txt                             resize
retries     due_ms(8) host_hash(8) level(1)      UrlRecord bytes: a URL waiting out     frontier,
            seq(8)                               its retry's back-off, out of its       resize
                                                 host's queue until due
robots      host key (utf-8)                     robots.txt cache entry                 worker,
                                                 (hive.fetch.robots_cache)              resize
meta        ``state``                            :class:`MetaState` (JSON)              frontier,
                                                                                        resize
meta        ``refusals``                         the refusals tally                     frontier
                                                 (hive.frontier.refusals)
meta        ``outbox_seq``                       u64: the last outbox batch's seq       outbox
meta        ``resize/<store>/`` seq(8)           empty: a drained store's batch was     resize
                                                 copied here (supervisor store only)
outbox      seq(8)                               a records frame waiting for its        outbox,
                                                 acknowledgement                        resize
quarantine  seq(8)                               reason ``\\0`` batch: a poison batch,  outbox
                                                 never resent
damaged     db ``\\0`` key                        reason ``\\0`` record: a queued        frontier
                                                 record set aside
payloads    SHA-1 of a payload (20)              its first record: WARC-Date ``\\0``     worker
                                                 record id ``\\0`` target URI          (revisits)
                                                 (hive.fetch.revisits)
meta        ``dedup_from``                       the CDXJ ``payloads`` is seeded from   worker
                                                 and how far: offset, lines, whole      (dedup),
                                                 (hive.procs.reading)                   resize
prior       host_hash(8) url_hash(8)             a Prior (hive.core.prior): what the    worker
                                                 prior crawls knew of the URL           (plan)
meta        ``recrawl_from``                     the plan read into ``prior`` and how   worker
                                                 far: offset, lines, whole              (plan),
                                                 (hive.procs.reading)                   resize
domains     registered domain (utf-8)            hosts(4) pages(8) fetched(8): the      frontier,
                                                 sums over the domain's host records    resize
                                                 (hive.frontier.domains)
meta        ``domains``                          ``1``: the rows were made from the     frontier
                                                 host records (stores made before
                                                 ``domains``) or from the start
meta        ``address_ledger``                   empty: this worker's address ledger    worker
                                                 may have grants out (a life that did   (addresses)
                                                 not close cleanly)
==========  ===================================  =====================================  ===========

``domains`` holds one row per registered domain (hive.core.keys) with a host record
in the store: how many hosts, their pages (admitted and listed) and their fetches,
which the per-domain caps read at admission (``scope.max_hosts_per_domain``,
``scope.max_pages_per_domain``). A row changes in the transaction that changes its
host records, a resize's copy and delete included, and ``hive verify`` checks it.

``payloads`` holds one entry per distinct payload this worker archived whole
(at least ``warc.revisit_min_bytes``) or was seeded with (``--dedup-from``):
it grows with the crawl, as ``urls`` does, at about 100 bytes and a URL per
entry, and is never pruned. An entry lives with the owner of the host of the URI
it names: seeding takes only those (a batch of the CDXJ's lines a turn, ``meta``
``dedup_from``: how far), and a resize moves them and clears how far every worker read,
so each reads the CDXJ again under the new ring (hive/procs/resize.py).

``prior`` holds one entry per URL of a recrawl's plan whose host the worker owns
(``hive start --recrawl-from``, hive/procs/worker.py), keyed as in ``urls``; a fetch
thread reads it to send the URL's validators and to tell what changed. It is written
as the worker reads the plan (``meta`` ``recrawl_from``: how far); a resize does not
move it but clears how far every worker read, so each reads the plan again under the
new ring and puts the entries of the URLs it now owns (hive/procs/resize.py).

``host_hash`` in a key is the hash (hive.core.urls.host_hash) of a politeness key
(hive.core.keys; today the host key); the ``robots`` cache is keyed by the host key.

Every admitted URL is in ``urls``. A pending URL has exactly one *live* queue
entry, in front, back or retries: the one whose level and seq its state names
(front ``level|seq``, back ``host|level|seq`` and a retry's back key keep the
seq a URL was queued with, so the state names its place wherever it is); a state
written before states named the place (4 bytes) names it by the record's kind
and depth, and a bare ``p`` names whichever entry there is; a leased one is the
back key named in ``leases``. A pending state also keeps the URL's *evidence*
(hive.frontier.evidence): the level its prioritizer gave it, a sketch of the
hosts that link to it and the best score of a page that links to it, from
which its level is recomputed as links arrive; a URL whose level rises is moved
(its entry deleted and put at the new level and a new seq, the state naming the
new place, in one transaction). A URL found
again by a stronger discovery (hive.frontier.seen) gets a new live entry, and
its earlier entries are *superseded*: left in place, dropped when they come up.
A retry's key is its due time and the back key it left, which it takes again
when due. Keys of one host
share the host-hash prefix, so a host's URLs and fingerprints move together.
hive/frontier/verify.py checks these rules.

Changing the schema: a new database is a row above, its name in ``DB_NAMES``
(every opener opens every name) and, since stores made before it lack it until
a worker opens them, in ``ADDED_LATER``. A new field of the meta state is a
field of :class:`MetaState` (a store without it loads its default); a new
counter needs nothing here (``MetaState.counts`` keeps every name it is given).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from hive.core.urlstate import UrlState
from hive.errors import StoreError

DB_NAMES = (
    "urls", "front", "back", "hosts", "bound", "parked", "leases", "robots", "meta", "outbox",
    "quarantine", "damaged", "payloads", "retries", "prior", "domains",
)
# Databases a store made by an earlier hive lacks until a worker opens it (and makes them).
ADDED_LATER = frozenset({"damaged", "payloads", "retries", "prior", "domains"})

U64 = struct.Struct(">Q")
HOST_LEVEL_SEQ = struct.Struct(">QBQ")
LEVEL_SEQ = struct.Struct(">BQ")
TIME_HOST = struct.Struct(">QQ")
URL_KEY = struct.Struct(">QQ")
TIME_HOST_LEVEL_SEQ = struct.Struct(">QQBQ")

# How a URL state (hive.core.urlstate) is stored: the first byte of its ``urls`` value.
URL_STATE_BYTES: dict[UrlState, bytes] = {
    UrlState.PENDING: b"p", UrlState.DONE: b"d", UrlState.REFUSED: b"r",
}
_URL_STATES = {byte: state for state, byte in URL_STATE_BYTES.items()}
PENDING = URL_STATE_BYTES[UrlState.PENDING]
DONE = URL_STATE_BYTES[UrlState.DONE]
REFUSED = URL_STATE_BYTES[UrlState.REFUSED]
# A pending state's tail: its live entry's record kind (a page's "" written "p") and depth;
# then (``Pending``) its level and seq, and the evidence: the prioritizer's level, the
# linking hosts' sketch, the best score of a linking page (0: none).
_PENDING_TAIL = struct.Struct(">cH")
PENDING_SIZE = 1 + _PENDING_TAIL.size
_PENDING_PLACED = struct.Struct(">cHBQBQB")
PLACED_SIZE = 1 + _PENDING_PLACED.size
# Where a placed state keeps its evidence (the linkers sketch and the score), read alone.
_EVIDENCE = struct.Struct(">QB")
_EVIDENCE_AT = PLACED_SIZE - _EVIDENCE.size

# Keys of the ``meta`` database.
META_STATE = b"state"
META_REFUSALS = b"refusals"
META_OUTBOX_SEQ = b"outbox_seq"
META_DEDUP_FROM = b"dedup_from"
META_RECRAWL_FROM = b"recrawl_from"
META_ADDRESS_LEDGER = b"address_ledger"


class Pending(NamedTuple):
    """A pending URL's state: its live entry (the record's kind and depth, the queue level
    and seq it is placed at; ``level`` 0 in a state written before states named the
    place) and its evidence (hive.frontier.evidence: ``base`` the prioritizer's level,
    ``linkers`` the sketch of the hosts linking to it, ``score`` the best quantized score
    of a page linking to it, 0 for none)."""

    kind: str
    depth: int
    level: int = 0
    seq: int = 0
    base: int = 0
    linkers: int = 0
    score: int = 0

    def encode(self) -> bytes:
        code = (self.kind or "p").encode()
        depth = min(self.depth, 0xFFFF)
        if not self.level:
            return PENDING + _PENDING_TAIL.pack(code, depth)
        return PENDING + _PENDING_PLACED.pack(
            code, depth, self.level, self.seq, self.base, self.linkers, self.score)


def pending_state(kind: str, depth: int) -> bytes:
    """The state of a pending URL whose live queue entry is a record of this kind and depth
    (the 4-byte form, which names no place: stores written before ``Pending`` had one)."""
    return Pending(kind, depth).encode()


def pending(state: bytes) -> Pending | None:
    """The pending state in ``state``; None for a bare ``p`` (written before states named
    an entry) or a state that is not pending."""
    if state[:1] != PENDING:
        return None
    size = len(state)
    if size == PLACED_SIZE:
        code, depth, level, seq, base, linkers, score = _PENDING_PLACED.unpack_from(state, 1)
    elif size == PENDING_SIZE:
        code, depth = _PENDING_TAIL.unpack_from(state, 1)
        level = seq = base = linkers = score = 0
    else:
        return None
    kind = code.decode("ascii", "replace")
    return Pending("" if kind == "p" else kind, depth, level, seq, base, linkers, score)


def evidence_of(state: bytes) -> tuple[int, int] | None:
    """(linkers, score) of a placed pending state without decoding the rest (the owner's
    check, for each link to a pending URL, whether it tells anything new); None for any
    other state."""
    if len(state) != PLACED_SIZE or state[:1] != PENDING:
        return None
    found: tuple[int, int] = _EVIDENCE.unpack_from(state, _EVIDENCE_AT)
    return found


def pending_entry(state: bytes) -> tuple[str, int] | None:
    """(kind, depth) of the live entry a pending state names; None for a bare ``p``
    (written before states named it) or a state that is not pending. Both forms of a
    pending state start with the kind and depth: read them alone."""
    if state[:1] != PENDING or len(state) not in (PENDING_SIZE, PLACED_SIZE):
        return None
    code, depth = _PENDING_TAIL.unpack_from(state, 1)
    kind = code.decode("ascii", "replace")
    return ("" if kind == "p" else kind), depth


def url_key(host_hash: int, url_hash: int) -> bytes:
    return URL_KEY.pack(host_hash, url_hash)


def back_key(host_hash: int, level: int, seq: int) -> bytes:
    return HOST_LEVEL_SEQ.pack(host_hash, level, seq)


def front_key(level: int, seq: int) -> bytes:
    return LEVEL_SEQ.pack(level, seq)


def parked_key(when: float, host_hash: int) -> bytes:
    return TIME_HOST.pack(max(0, int(when * 1000)), host_hash)


def retry_key(due: float, back: bytes) -> bytes:
    """The ``retries`` key of a URL due at ``due`` that left the back key ``back``: the
    time rounded up to the millisecond, so a retry never goes before its back-off."""
    return U64.pack(max(0, math.ceil(due * 1000))) + back


def damaged_key(db: str, key: bytes) -> bytes:
    return db.encode() + b"\0" + key


def resize_marker(store_name: str) -> bytes:
    """The prefix of the meta keys that mark a drained store's batches as copied."""
    return f"resize/{store_name}/".encode()


def url_state(value: bytes) -> tuple[UrlState, str] | None:
    """The state a ``urls`` value holds and the outcome or reason after its byte (a
    pending state's tail is ``pending_entry``'s); None if its byte is no state's."""
    state = _URL_STATES.get(value[:1])
    return None if state is None else (state, value[1:].decode("utf-8", "replace"))


def state_counters(state: bytes) -> tuple[str, ...]:
    """The meta counters a URL in ``state`` is counted in (as hive verify checks them)."""
    found = url_state(state)
    if found is None:
        return ()
    kind, text = found
    if kind is UrlState.PENDING:
        return ("frontier/admitted",)
    if kind is UrlState.DONE:
        return ("frontier/admitted", f"frontier/done/{text}")
    return (f"frontier/refused/{text}",)


class Reads(Protocol):
    """A store or transaction a value can be read from by database name."""

    @property
    def path(self) -> Path: ...
    def get(self, name: str, key: bytes) -> bytes | None: ...


class Writes(Reads, Protocol):
    def put(self, name: str, key: bytes, value: bytes) -> Any: ...


@dataclass(slots=True)
class MetaState:
    """The frontier's persistent counters, in ``meta`` under ``state`` (JSON).

    ``seq`` is at least every queue key's seq (new keys must not collide),
    ``back_queued`` the number of ``back`` entries, ``counts`` the frontier's
    counters by name. ``extra`` keeps fields this version does not know, written
    back as they were; ``missing`` names the known fields the stored bytes
    lacked (they load as their defaults; hive verify reports them).
    """

    seq: int = 0
    back_queued: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    missing: frozenset[str] = frozenset()

    @classmethod
    def decode(cls, raw: bytes | None, where: Path) -> MetaState:
        """The state in ``raw`` (None: a store that never committed one, all defaults).

        StoreError naming ``where`` (the store's file) when the bytes are damaged."""
        if raw is None:
            return cls()
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise StoreError(f"{where}: meta state is not JSON ({exc}): {raw[:60]!r}") from exc
        if not isinstance(data, dict):
            raise StoreError(f"{where}: meta state is not a JSON object: {raw[:60]!r}")
        missing = frozenset(n for n in ("seq", "back_queued", "counts") if n not in data)
        seq, back_queued = data.pop("seq", 0), data.pop("back_queued", 0)
        counts = data.pop("counts", {})
        if not (
            isinstance(seq, int) and isinstance(back_queued, int) and isinstance(counts, dict)
            and all(isinstance(n, int) for n in counts.values())
        ):
            raise StoreError(f"{where}: meta state has a field of the wrong type: {raw[:120]!r}")
        return cls(seq, back_queued, counts, data, missing)

    def encode(self) -> bytes:
        state = {"seq": self.seq, "counts": self.counts, "back_queued": self.back_queued}
        return json.dumps({**state, **self.extra}).encode()

    @classmethod
    def load(cls, store: Reads) -> MetaState:
        return cls.decode(store.get("meta", META_STATE), store.path / "data.mdb")

    def save(self, store: Writes) -> None:
        store.put("meta", META_STATE, self.encode())

    def add(self, counts: Mapping[str, int], sign: int = 1) -> None:
        """Add ``counts`` to the counters (or take them away, with ``sign`` -1)."""
        for name, n in counts.items():
            self.counts[name] = self.counts.get(name, 0) + sign * n
