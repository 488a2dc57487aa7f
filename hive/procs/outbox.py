"""Outbox: the durable hand-off of discovered links until their owners have them.

ZeroMQ drops what is in flight when a process dies, so a sender keeps every
batch it sends in its own LMDB (``outbox`` db, key seq) — written in the same
transaction as the fetch outcome that produced it — until every owner it was
split to has acknowledged committing its admission. The splitter tells each
owner how many parts the batch was cut into; the acks carry that number, so
the sender knows when a batch is whole without knowing the ring.

Links travel in batches: the records of every page a worker finishes within
``window`` seconds (``hive.outbox_window``) join one batch, so a busy worker
sends a message per window, not per page. Each page's records are written
into the batch's outbox entry in the transaction of that page's outcome, so a
crash loses none of them; the batch is sent when its window has passed.

An unacknowledged batch is sent again after ``resend_after`` seconds, doubling
per try (capped at a minute), and on every restart (the in-memory send times
are gone, so everything in the outbox is due). Admission is idempotent (the
seen set), so a batch sent twice costs a lookup, not a duplicate fetch. A slow
owner is not a dead one: a batch is resent, at most once a minute, for as long
as it is unacknowledged (a worker paused for minutes once made its peers give
up on 532 healthy links). After ``max_tries`` sends it is counted as overdue
(``outbox/overdue``) and logged once, and still resent; the supervisor is the
one that restarts an owner whose reports stop.

A batch read back from the store (after a restart) is checked to decode
before it is sent: one that does not (a damaged disk) could never be
admitted, so it is a poison batch, moved to ``quarantine`` with its reason and
counted. ``hive verify`` lists quarantined batches, and
:func:`replay_quarantine` puts those that decode back in the outbox.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hive.core.record import UrlRecord
from hive.core.wire import MAX_RECORDS, WireError, concat_records, decode_records, encode_records
from hive.procs.lifecycle import Lock
from hive.storage.datadir import DataDir
from hive.storage.schema import META_OUTBOX_SEQ, U64
from hive.storage.store import Store

log = logging.getLogger(__name__)

MAX_RESEND = 60.0
# An open batch takes no more records once its frame is this large.
MAX_BATCH_BYTES = 1 << 20


@dataclass(slots=True)
class _Open:
    """The batch that still takes records: its seq, when it closes, its records frame."""

    seq: int
    closes: float
    data: bytes
    records: int


@dataclass(slots=True)
class _Pending:
    sent_at: float = 0.0
    tries: int = 0
    acked: set[int] = field(default_factory=set)
    # False for a batch read back from the store: it is checked to decode before its send.
    checked: bool = True


class Outbox:
    def __init__(
        self, store: Store, *, resend_after: float, max_tries: int, window: float = 0.0
    ) -> None:
        self.store = store
        self.resend_after = resend_after
        self.max_tries = max_tries
        self.window = window
        self.pending: dict[int, _Pending] = {}
        self._open: _Open | None = None
        self.counts = {"outbox/batches": 0, "outbox/sent": 0, "outbox/acked": 0,
                       "outbox/quarantined": 0, "outbox/overdue": 0, "outbox/discarded": 0}
        cursor = store.cursor("outbox")
        for key in cursor.iternext(values=False):
            self.pending[U64.unpack(key)[0]] = _Pending(checked=False)
        last = store.get("meta", META_OUTBOX_SEQ)
        self._seq = U64.unpack(last)[0] if last else max(self.pending, default=0)

    def __len__(self) -> int:
        return len(self.pending)

    def put(self, records: list[UrlRecord], now: float) -> int:
        """Keep records (in the open transaction) in the batch open since less than
        ``window`` seconds, or in new ones; returns the (last) batch's sequence number.
        A batch is sent once its window has passed and its transaction committed.

        Records beyond what one message may carry (:data:`~hive.core.wire.MAX_RECORDS`,
        ``MAX_BATCH_BYTES``) go into as many batches as they need. Every frame is
        encoded before anything is written, so a record the wire refuses raises
        :class:`~hive.core.wire.WireError` with nothing of ``records`` kept: the caller
        must then not record the page as done."""
        seq = 0
        for data, count in _frames(records):
            seq = self._put_frame(data, count, now)
        return seq

    def _put_frame(self, data: bytes, records: int, now: float) -> int:
        batch = self._open
        if (
            batch is not None and now < batch.closes
            and batch.records + records <= MAX_RECORDS
            and len(batch.data) + len(data) <= MAX_BATCH_BYTES
        ):
            batch.data = concat_records(batch.data, data)
            batch.records += records
        else:
            self._seq += 1
            batch = self._open = _Open(self._seq, now + self.window, data, records)
            self.store.put("meta", META_OUTBOX_SEQ, U64.pack(self._seq))
            self.pending[self._seq] = _Pending()
            self.counts["outbox/batches"] += 1
        self.store.put("outbox", U64.pack(batch.seq), batch.data)
        return batch.seq

    def due(self, now: float) -> list[tuple[int, bytes]]:
        """Batches to send now: never sent, or unacknowledged past their resend time.

        The open batch is closed and sent once its window has passed."""
        if self._open is not None and now >= self._open.closes:
            self._open = None
        out = []
        for seq, entry in list(self.pending.items()):
            if self._open is not None and seq == self._open.seq:
                continue
            wait = min(self.resend_after * 2 ** max(entry.tries - 1, 0), MAX_RESEND)
            if entry.tries and now < entry.sent_at + wait:
                continue
            data = self.store.get("outbox", U64.pack(seq))
            if data is None:
                del self.pending[seq]
                continue
            if not entry.checked:
                try:
                    decode_records(data)
                except WireError as exc:
                    self._quarantine(seq, f"does not decode: {exc}")
                    continue
                entry.checked = True
            if entry.tries == self.max_tries:
                self.counts["outbox/overdue"] += 1
                log.warning("outbox: batch %d unacknowledged after %d sends; still resending "
                            "every %gs while its owners are slow", seq, entry.tries, MAX_RESEND)
            entry.sent_at, entry.tries = now, entry.tries + 1
            self.counts["outbox/sent"] += 1
            out.append((seq, data))
        return out

    def next_due(self) -> float | None:
        """When the open batch closes or the earliest sent batch becomes due again
        (None: nothing waits)."""
        times = [
            e.sent_at + min(self.resend_after * 2 ** max(e.tries - 1, 0), MAX_RESEND)
            for e in self.pending.values() if e.tries
        ]
        if self._open is not None:
            times.append(self._open.closes)
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

    def discard(self, drop: Callable[[UrlRecord], bool],
                now: float) -> Iterator[list[UrlRecord]]:
        """Take the records ``drop`` names out of every batch (in the open transaction),
        yielding each batch's taken (memory holds one batch at a time, however many wait). A
        batch that had any is replaced by a new one of the rest, if any: acknowledgements of
        the old cut are then ignored (its sequence number is gone) and the rest is sent and
        admitted again (admission is idempotent). A batch that does not decode is left for
        ``due`` to quarantine."""
        self._open = None
        for seq in list(self.pending):
            key = U64.pack(seq)
            data = self.store.get("outbox", key)
            try:
                records = decode_records(data) if data is not None else []
            except WireError:
                continue
            gone = [record for record in records if drop(record)]
            if not gone:
                continue
            self.store.delete("outbox", key)
            del self.pending[seq]
            self.counts["outbox/discarded"] += 1
            kept = [record for record in records if not drop(record)]
            if kept:
                self.put(kept, now)
            yield gone
        self._open = None

    def _quarantine(self, seq: int, reason: str) -> None:
        log.error("outbox: batch %d quarantined: %s", seq, reason)
        key = U64.pack(seq)
        data = self.store.get("outbox", key) or b""
        self.store.put("quarantine", key, reason.encode() + b"\0" + data)
        self.store.delete("outbox", key)
        del self.pending[seq]
        self.counts["outbox/quarantined"] += 1


def _frames(records: list[UrlRecord]) -> list[tuple[bytes, int]]:
    """Records frames of at most MAX_RECORDS records and MAX_BATCH_BYTES bytes (a
    single larger record, which the wire's own limit bounds, alone), with their counts."""
    out: list[tuple[bytes, int]] = []
    chunks = [records[i : i + MAX_RECORDS] for i in range(0, len(records), MAX_RECORDS)]
    chunks.reverse()
    while chunks:
        chunk = chunks.pop()
        data = encode_records(chunk)
        if len(data) > MAX_BATCH_BYTES and len(chunk) > 1:
            # Pieces aimed at 3/4 of the limit: records vary in size, and one over is cut again.
            pieces = min(len(chunk), -(-len(data) // (MAX_BATCH_BYTES * 3 // 4)))
            step = -(-len(chunk) // pieces)
            chunks += reversed([chunk[i : i + step] for i in range(0, len(chunk), step)])
        else:
            out.append((data, len(chunk)))
    return out


def quarantined(store: Store) -> list[tuple[int, str, int]]:
    """A store's quarantined batches: (seq, reason, bytes of the batch)."""
    out = []
    for key, value in store.cursor("quarantine").iternext():
        reason, _, data = bytes(value).partition(b"\0")
        out.append((U64.unpack(key)[0], reason.decode("utf-8", "replace"), len(data)))
    return out


def replay_quarantine(store: Store) -> tuple[int, list[tuple[int, str]]]:
    """Put the quarantined batches that decode back in the outbox (sent on the next start);
    returns how many, and (seq, why) of those left in quarantine. The caller commits."""
    replayed, left = 0, []
    for key, value in list(store.cursor("quarantine").iternext()):
        seq = U64.unpack(key)[0]
        _, _, data = bytes(value).partition(b"\0")
        try:
            decode_records(data)
        except WireError as exc:
            left.append((seq, str(exc)))
            continue
        store.put("outbox", bytes(key), data)
        store.delete("quarantine", bytes(key))
        replayed += 1
    return replayed, left


def replay_data_dir(data_dir: Path) -> list[str]:
    """Replay the quarantine of every store of a stopped hive (its workers' and the
    supervisor's), each under its directory's lock; one line per store that had any."""
    dd = DataDir(data_dir)
    hive = Lock(dd.lock, f"the hive at {data_dir}")
    try:
        stores = [*(d for _, d in dd.workers()), dd.supervisor]
        return [line for directory in stores if (line := _replay_store(directory))]
    finally:
        hive.release()


def _replay_store(directory: Path) -> str:
    """Replay one store's quarantine; a line saying what it did, or "" if it had none."""
    if not DataDir.store_data(directory).exists():
        return ""
    lock = Lock(DataDir.store_lock(directory), f"the store {directory}")
    try:
        store = Store(directory, sync_interval=0.0)
        try:
            replayed, left = replay_quarantine(store)
        finally:
            store.close(time.time())
    finally:
        lock.release()
    if not replayed and not left:
        return ""
    return (f"{directory}: {replayed} quarantined batches back in the outbox"
            + "".join(f"; batch {seq} left: {why}" for seq, why in left))
