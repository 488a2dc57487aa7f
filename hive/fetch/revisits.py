"""The payload index of one worker: the payloads it archived, so that a repeat is a revisit.

A response whose payload (the body as received, still content-encoded) has the
SHA-1 of one archived before, whole, is written as a ``revisit`` record of the
``identical-payload-digest`` profile that refers to the first record
(hive.fetch.warc). The index maps a payload's SHA-1 to that first record: its
target URI, WARC-Date and record ID, kept in the worker's store (``payloads``,
hive/storage/schema.py). Hosts are partitioned among workers, so a host's
repeats are always found; a repeat on another host of the same worker is too;
one on a host of another worker is archived whole (see bench/README.md for
what that costs on real sites).

**Who reads and who writes.** The fetch threads write the WARC records, so a
fetch thread looks its payload up before it writes: first in ``recent`` (the
last RECENT payloads archived, in memory), then in the store, through a short
read transaction of its own (``Store.read_committed``, which LMDB runs beside
the frontier thread's held write transaction), but only if the payload may be
there: a Bloom filter of every digest in the index (``DigestFilter``, FILTER_BITS
bits, built from the store's keys when the worker opens it) answers "not
archived" for nearly every new payload, in about a microsecond, without the
read transaction (about 10 us) or its lock. Handing the look-up to the
frontier thread instead would hold every response for a turn of that thread
(up to 20 ms) before its records could be written. Only the frontier thread
writes the store: a fetch thread that archived a new payload puts its entry in
``recent`` and on a pending list, which the frontier thread moves into the
store (``persist``) when it applies outcomes and commits with its turn. Until
that commit, ``recent`` answers for the entry; it holds far more entries than
a turn can add (at most one per fetch in flight), and an entry it has
forgotten before its commit only means one more whole copy, never a wrong
revisit. Two threads that miss the same new payload at once both archive it
whole, and the first entry committed stands (``put`` does not overwrite).

**When an entry is committed.** Only after its record is written:
``write_exchange`` returns once the record pair is in the kernel, whole (one
``write(2)``), and a ``.open`` file a crash leaves is cut after its last
complete response or revisit, never before one the kernel holds. So after a
kill -9 every committed entry names a record that survived, and a revisit
written before the crash refers either to such a record or to one written,
whole, before it. The cost of this order is the other side: a crash between the
write and the commit forgets the entry, and the payload's next copy is archived
whole. A power loss can lose the WARC tail and the last LMDB sync alike (the
store syncs every ``frontier.sync_interval``, the WARC file when closed): an
entry could then outlive its record, as a ``done`` URL can outlive its record.

**Seeding** (``--dedup-from``, ``warc.dedup_from``): the ``url``, ``digest``
and timestamp of each capture line of a prior crawl's CDXJ index (revisit lines
aside) become entries, so a second crawl archives whole only what changed; the
revisits name the original by URI and date (a CDXJ line has no record ID).
A worker of a hive takes the lines whose URL's host it owns (its process is
told the ring), as resize places entries (hive/procs/resize.py): N workers
hold the prior index once between them, not N times. A repeat, in this crawl,
of a prior capture from another worker's host is archived whole, as a
cross-worker repeat within a crawl is. A worker on its own (``owns`` not
given) takes every line.
The worker reads the index a batch of lines a turn (``seed``, driven by
hive.procs.dedup, which keeps the place reached). Lines are read up to MAX_LINE bytes
each; a malformed line is counted by reason and the first NAMED of them logged with
their line number.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import struct
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import IO

from hive.errors import URLError
from hive.fetch.warc import Original

log = logging.getLogger(__name__)

RECENT = 4096
# The Bloom filter of archived digests: 4 MiB a worker. Its false positives (only an
# index read too many) stay under 1 in 1,000 up to a million payloads a worker and
# near 5 % at five million; its memory does not grow with the crawl.
FILTER_BITS = 1 << 25
FILTER_HASHES = 4
_WORDS = struct.Struct("<4I")  # FILTER_HASHES words of a digest
MAX_LINE = 64 << 10
NAMED = 10
_TIMESTAMP = re.compile(r"\d{14}")


def encode(original: Original) -> bytes:
    """A ``payloads`` value: WARC-Date, record ID and target URI, separated by NUL."""
    return f"{original.date}\0{original.record_id}\0{original.uri}".encode()


def decode(value: bytes) -> Original | None:
    """The Original a ``payloads`` value names; None if it does not decode."""
    parts = value.decode("utf-8", "replace").split("\0", 2)
    if len(parts) != 3 or not parts[0] or not parts[2]:
        return None
    date, record_id, uri = parts
    return Original(uri, date, record_id)


def digest_bytes(text: str) -> bytes | None:
    """The 20 bytes of a ``sha1:BASE32`` (or bare base32) digest; None if it is not one."""
    value = text.removeprefix("sha1:")
    if len(value) != 32:
        return None
    try:
        return base64.b32decode(value.upper())
    except (binascii.Error, ValueError):
        return None


class DigestFilter:
    """A Bloom filter of SHA-1 digests: ``may_hold`` is False only for a digest never
    ``add``-ed. A SHA-1 is already uniform, so its bits are the filter's hashes: the four
    32-bit words of its first 16 bytes, each taken modulo ``bits`` (a power of two)."""

    def __init__(self, bits: int = FILTER_BITS) -> None:
        if bits < 8 or bits & (bits - 1):
            raise ValueError(f"a filter's bits must be a power of two >= 8, got {bits}")
        self._mask = bits - 1
        self._bits = bytearray(bits // 8)

    def add(self, sha1: bytes) -> None:
        bits, mask = self._bits, self._mask
        for word in _WORDS.unpack_from(sha1):
            position = word & mask
            bits[position >> 3] |= 1 << (position & 7)

    def may_hold(self, sha1: bytes) -> bool:
        bits, mask = self._bits, self._mask
        a, b, c, d = _WORDS.unpack_from(sha1)
        a, b, c, d = a & mask, b & mask, c & mask, d & mask
        return bool(
            bits[a >> 3] >> (a & 7) & bits[b >> 3] >> (b & 7)
            & bits[c >> 3] >> (c & 7) & bits[d >> 3] >> (d & 7) & 1
        )


class PayloadIndex:
    """The payload index (see the module docstring).

    ``read`` gives a committed ``payloads`` value by key and may be called from
    any thread; ``write`` puts one, without overwriting, on the frontier thread;
    ``known`` are the keys already in the store. Payloads shorter than
    ``min_bytes`` are neither looked up nor indexed.
    """

    def __init__(
        self, read: Callable[[bytes], bytes | None], write: Callable[[bytes, bytes], None],
        min_bytes: int, known: Iterable[bytes] = (), filter_bits: int = FILTER_BITS,
    ) -> None:
        self._read = read
        self._write = write
        self.min_bytes = min_bytes
        self._recent: OrderedDict[bytes, Original] = OrderedDict()
        self._pending: list[tuple[bytes, Original]] = []
        self._lock = threading.Lock()
        self._filter = DigestFilter(filter_bits)
        for sha1 in known:
            self._filter.add(sha1)
        self.counts: Counter[str] = Counter()

    # -- a fetch thread ----------------------------------------------------------------

    def find(self, sha1: bytes) -> Original | None:
        """The record that archived this payload first, if any."""
        with self._lock:
            original = self._recent.get(sha1)
        if original is not None:
            return original
        if not self._filter.may_hold(sha1):
            return None
        value = self._read(sha1)
        return decode(value) if value is not None else None

    def archived(self, sha1: bytes, original: Original) -> None:
        """Note a payload just archived whole (its record is in the kernel)."""
        with self._lock:
            if len(self._recent) >= RECENT:
                # Not del d[next(iter(d))]: a dict's iteration walks past every slot
                # deleted from its front, thousands here.
                self._recent.popitem(last=False)
            self._recent[sha1] = original
            self._pending.append((sha1, original))
            self._filter.add(sha1)

    def revisited(self, saved: int) -> None:
        """Count a revisit written in place of ``saved`` bytes of payload."""
        with self._lock:
            self.counts["revisits/records"] += 1
            self.counts["revisits/payload_bytes_saved"] += saved

    # -- the frontier thread -----------------------------------------------------------

    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)

    def persist(self) -> None:
        """Put the entries archived since the last call into the store (committed with the
        frontier thread's turn)."""
        with self._lock:
            pending, self._pending = self._pending, []
        for sha1, original in pending:
            self._write(sha1, encode(original))

    def seed(self, f: IO[bytes], lines: int, owns: Callable[[str], bool] | None,
             where: Callable[[int], str]) -> int:
        """Put an entry for each capture line, of the next ``lines`` lines of the CDXJ index
        ``f``, whose URL ``owns`` accepts (every one without it); the lines read (fewer at
        its end). A malformed line is counted, and the first NAMED of all are logged at
        ``where(n)``, n counting from 1 at the batch's first line. Raises OSError if the
        file cannot be read."""
        counts: Counter[str] = Counter()
        read = 0
        with self._lock:
            malformed = self.counts["revisits/seed/malformed"]
        for read, line in enumerate(_lines(f), 1):
            outcome = self._seed_line(line, owns)
            counts[f"revisits/{outcome}"] += 1
            if outcome.startswith("seed/malformed/"):
                if malformed < NAMED:
                    log.warning("%s: line skipped, %s", where(read),
                                outcome.removeprefix("seed/"))
                malformed += 1
                counts["revisits/seed/malformed"] += 1
            if read >= lines:
                break
        with self._lock:
            self.counts.update(counts)
        return read

    def _seed_line(self, line: bytes | None, owns: Callable[[str], bool] | None) -> str:
        """What became of one CDXJ line: ``seeded``, ``seed/skipped/...`` or
        ``seed/malformed/...``."""
        if line is None:
            return "seed/malformed/too_long"
        if not line.strip():
            return "seed/skipped/blank"
        parts = line.split(b" ", 2)
        if len(parts) != 3 or not _TIMESTAMP.fullmatch(parts[1].decode("ascii", "replace")):
            return "seed/malformed/fields"
        try:
            fields = json.loads(parts[2])
        except ValueError:
            return "seed/malformed/json"
        if not isinstance(fields, dict):
            return "seed/malformed/json"
        if fields.get("mime") == "warc/revisit":
            return "seed/skipped/revisit"
        url, digest = fields.get("url"), fields.get("digest")
        if not isinstance(url, str) or not url:
            return "seed/malformed/url"
        if not isinstance(digest, str):
            return "seed/malformed/digest"
        sha1 = digest_bytes(digest)
        if sha1 is None:
            return "seed/malformed/digest"
        if owns is not None:
            try:
                if not owns(url):
                    return "seed/skipped/other_worker"
            except URLError:
                return "seed/malformed/url"
        stamp = parts[1].decode("ascii")
        date = (f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[8:10]}:{stamp[10:12]}:"
                f"{stamp[12:14]}Z")
        self._write(sha1, encode(Original(url, date, "")))
        with self._lock:
            self._filter.add(sha1)
        return "seeded"


def _lines(f: IO[bytes]) -> Iterator[bytes | None]:
    """The lines of ``f`` without their ends; None for one longer than MAX_LINE, which is
    read past in pieces of MAX_LINE, never held whole."""
    while line := f.readline(MAX_LINE + 1):
        if len(line) > MAX_LINE and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = f.readline(MAX_LINE)
            yield None
        else:
            yield line.rstrip(b"\r\n")
