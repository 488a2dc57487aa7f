"""Outbox: the durable hand-off of discovered links until their owners have them.

ZeroMQ drops what is in flight when a process dies, so a sender keeps every
batch it sends in its own LMDB (``outbox`` db, key seq) — written in the same
transaction as the fetch outcome that produced it — until every owner it was
split to has acknowledged committing its admission. The splitter tells each
owner how many parts the batch was cut into; the acks carry that number, so
the sender knows when a batch is whole without knowing the ring.

An unacknowledged batch is sent again after ``resend_after`` seconds, doubling
per try (capped at a minute), and on every restart (the in-memory send times
are gone, so everything in the outbox is due). Admission is idempotent (the
seen set), so a batch sent twice costs a lookup, not a duplicate fetch. A
batch still unacknowledged after ``max_tries`` sends is a poison batch: it is
moved to ``quarantine`` with its reason and counted, never resent forever.

``RecentLinks`` is the small cache of URLs a sender keeps to drop links it
sent a moment ago (a page repeats its neighbours' links) before they cost a
hop and an outbox write.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hive.frontier.store import U64, Store
from hive.record import UrlRecord
from hive.wire import encode_records

MAX_RESEND = 60.0


@dataclass(slots=True)
class _Pending:
    sent_at: float = 0.0
    tries: int = 0
    acked: set[int] = field(default_factory=set)


class Outbox:
    def __init__(self, store: Store, *, resend_after: float, max_tries: int) -> None:
        self.store = store
        self.resend_after = resend_after
        self.max_tries = max_tries
        self.pending: dict[int, _Pending] = {}
        self.counts = {"outbox/batches": 0, "outbox/sent": 0, "outbox/acked": 0,
                       "outbox/quarantined": 0}
        cursor = store.cursor("outbox")
        for key in cursor.iternext(values=False):
            self.pending[U64.unpack(key)[0]] = _Pending()
        last = store.get("meta", b"outbox_seq")
        self._seq = U64.unpack(last)[0] if last else max(self.pending, default=0)

    def __len__(self) -> int:
        return len(self.pending)

    def put(self, records: list[UrlRecord]) -> int:
        """Keep a batch (in the open transaction); it is sent once that commits."""
        self._seq += 1
        self.store.put("outbox", U64.pack(self._seq), encode_records(records))
        self.store.put("meta", b"outbox_seq", U64.pack(self._seq))
        self.pending[self._seq] = _Pending()
        self.counts["outbox/batches"] += 1
        return self._seq

    def due(self, now: float) -> list[tuple[int, bytes]]:
        """Batches to send now: never sent, or unacknowledged past their resend time."""
        out = []
        for seq, entry in list(self.pending.items()):
            wait = min(self.resend_after * 2 ** max(entry.tries - 1, 0), MAX_RESEND)
            if entry.tries and now < entry.sent_at + wait:
                continue
            if entry.tries >= self.max_tries:
                self._quarantine(seq, f"unacknowledged after {entry.tries} sends")
                continue
            data = self.store.get("outbox", U64.pack(seq))
            if data is None:
                del self.pending[seq]
                continue
            entry.sent_at, entry.tries = now, entry.tries + 1
            self.counts["outbox/sent"] += 1
            out.append((seq, data))
        return out

    def next_due(self) -> float | None:
        """When the earliest sent batch becomes due again (None: nothing waits)."""
        times = [
            e.sent_at + min(self.resend_after * 2 ** max(e.tries - 1, 0), MAX_RESEND)
            for e in self.pending.values() if e.tries
        ]
        return min(times) if times else None

    def ack(self, seq: int, part: int, parts: int) -> bool:
        """Record one owner's acknowledgement; True when the whole batch is acknowledged."""
        entry = self.pending.get(seq)
        if entry is None or not 0 <= part < parts:
            return False
        entry.acked.add(part)
        if len(entry.acked) < parts:
            return False
        del self.pending[seq]
        self.store.delete("outbox", U64.pack(seq))
        self.counts["outbox/acked"] += 1
        return True

    def _quarantine(self, seq: int, reason: str) -> None:
        key = U64.pack(seq)
        data = self.store.get("outbox", key) or b""
        self.store.put("quarantine", key, reason.encode() + b"\0" + data)
        self.store.delete("outbox", key)
        del self.pending[seq]
        self.counts["outbox/quarantined"] += 1


class RecentLinks:
    """Links handed on a moment ago, by canonical URL (a page repeats its neighbours' links).

    The fetch threads consult it before a link costs a scope check, a record, a
    hop to the splitter and an outbox write. It remembers between ``size / 2``
    and ``size`` URLs in two generations of sets: a hit in the old generation
    moves to the young one, and a full young generation replaces the old one.
    Every step is one set operation, atomic under the GIL, so fetch threads
    share it without a lock; a race at worst lets a repeat through, and the
    owner's seen set drops that.
    """

    def __init__(self, size: int) -> None:
        self._half = max(1, size // 2)
        self._young: set[str] = set()
        self._old: set[str] = set()

    def __contains__(self, url: str) -> bool:
        if url in self._young:
            return True
        if url in self._old:
            self._young.add(url)
            return True
        return False

    def add(self, url: str) -> None:
        young = self._young
        young.add(url)
        if len(young) >= self._half:
            self._old, self._young = young, set()
