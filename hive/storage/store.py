"""A store held open for writing by its process: named databases, group commit, file checks.

The schema (databases, key layouts, values, the meta state) is
hive/storage/schema.py's; this module opens it for the frontier and the
outboxes. hive/storage/modes.py opens it the other ways: read-only (verify,
status) and with a durable commit per step (resize).

Writes go to one long write transaction that the owner commits once per loop
turn (group commit), or earlier when it holds ``txn_max_ops`` operations; a
turn that wrote nothing commits nothing. Every write counts in ``ops`` (writes
through a raw cursor add to it by hand), which is how ``changed`` knows. The
environment is opened without fsync on commit and synced every
``sync_interval`` seconds: a killed process loses nothing it committed (the
pages are in the OS page cache); a power loss can cost the last interval.
The map doubles whenever it is half full, looked at every ``GROW_CHECK_OPS``
writes, between transactions, as LMDB requires.

Other threads of the owner may read what was committed (``read_committed``),
each read in a short read transaction of its own; LMDB lets readers run beside
the held write transaction, but its map may be grown only while no transaction
of the process is open, so growing and those reads share a lock.

A damaged file is named and refused before LMDB maps it (:func:`check_file`):
LMDB trusts its two meta pages, so a truncated file is read past its end
(SIGBUS, no message) and overwritten meta pages give ``MDB_INVALID``. The
check reads both meta pages (LMDB 0.9's layout: magic ``0xBEEFC0DE``, version
1, page size, last page, transaction id, the two core databases' roots) and
refuses a file with no valid meta page, or whose newest valid one names a root
the file does not hold. A file shorter than the newest meta's last page is not
damaged by that alone: LMDB counts in it the pages a transaction allocated and
freed again before its commit, and never writes them, so a healthy store can
end a few pages short. Such a file is read whole, every record of every
database, by a child process (:func:`_reads_whole`): a truncation that cut a
page a record lives on kills the child with SIGBUS, not this process, and the
file is refused. Damage inside the data pages passes the check; LMDB reports
some of that (``MDB_CORRUPTED``, which every opener turns into StoreError),
and records that do not decode are the readers' to quarantine.
"""

from __future__ import annotations

import functools
import os
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Concatenate, ParamSpec, Protocol, TypeVar

import lmdb

from hive.errors import StoreError
from hive.storage.schema import DB_NAMES

GROW_CHECK_OPS = 1024

# LMDB 0.9's meta page (mdb.c: MDB_meta after a 16-byte page header) ends with the txn id.
META_BYTES = 152
META_MAGIC = 0xBEEFC0DE
META_VERSION = 1
P_META = 0x08
NO_PAGE = 2**64 - 1
PAGE_SIZES = (4096, 8192, 16384, 32768, 65536)

P = ParamSpec("P")
R = TypeVar("R")


def _meta(data: bytes, offset: int) -> tuple[int, int, int, int] | None:
    """(page size, last page, transaction id, highest root page) of the meta page at
    ``offset``, or None if it is not one."""
    if len(data) < offset + META_BYTES:
        return None
    (pgno, _pad, flags, _bounds, magic, version, _address, _mapsize, psize, free_root,
     last_page, main_root, txnid) = _unpack_meta(data, offset)
    if magic != META_MAGIC or version != META_VERSION or not flags & P_META:
        return None
    if pgno != offset // max(psize, 1) or psize not in PAGE_SIZES:
        return None
    if any(root != NO_PAGE and root > last_page for root in (free_root, main_root)):
        return None
    roots = [root for root in (free_root, main_root) if root != NO_PAGE]
    return psize, last_page, txnid, max(roots, default=0)


def _unpack_meta(data: bytes, offset: int) -> tuple[int, ...]:
    """The meta fields: the page header, magic, version, address, map size, the free
    database's md_pad (the page size), its root, the last page, the main root, the txn id."""
    head = struct.unpack_from("<QHHIIIQQ", data, offset)
    psize, = struct.unpack_from("<I", data, offset + 40)
    free_root, = struct.unpack_from("<Q", data, offset + 80)
    main_root, = struct.unpack_from("<Q", data, offset + 128)
    last_page, txnid = struct.unpack_from("<QQ", data, offset + 136)
    return (*head, psize, free_root, last_page, main_root, txnid)


def check_file(path: Path) -> None:
    """Refuse a store whose ``data.mdb`` LMDB cannot safely map; see the module docstring.

    A directory without ``data.mdb`` passes (LMDB makes a new one). Raises
    StoreError naming the file and what is wrong with it.
    """
    data_file = path / "data.mdb"
    try:
        with data_file.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(max(PAGE_SIZES) + META_BYTES)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"{data_file}: cannot read: {exc.strerror or exc}") from exc
    if size == 0:
        raise StoreError(f"{data_file} is damaged: the file is empty")
    first = _meta(head, 0)
    sizes = [first[0]] if first is not None else list(PAGE_SIZES)
    metas = [m for m in (first, *(_meta(head, psize) for psize in sizes)) if m is not None]
    if not metas:
        raise StoreError(f"{data_file} is damaged: no valid LMDB meta page (overwritten, "
                         "or not an LMDB file)")
    psize, last_page, _txnid, root = max(metas, key=lambda m: m[2])
    if size >= (last_page + 1) * psize:
        return
    truncated = (f"{data_file} is damaged: truncated to {size} bytes, its last committed "
                 f"transaction needs {(last_page + 1) * psize}")
    if size < (root + 1) * psize:
        raise StoreError(truncated + " (a database's root page is past the end)")
    unread = _reads_whole(path)
    if unread is not None:
        raise StoreError(f"{truncated} ({unread})")


#: A child process reads every record of a store: main database, then each named one.
_READ_WHOLE = """
import sys, lmdb
env = lmdb.open(sys.argv[1], readonly=True, lock=False, max_dbs=int(sys.argv[2]))
with env.begin() as txn:
    names = [key for key, _ in txn.cursor()]
    for name in names:
        try:
            db = env.open_db(name, txn=txn, create=False)
        except lmdb.Error:
            continue
        for _ in txn.cursor(db=db):
            pass
"""
#: How long the child may read: a store of many gigabytes reads in well under a minute.
READ_WHOLE_TIMEOUT = 600.0


def _reads_whole(path: Path) -> str | None:
    """None when a child process reads every record of the store at ``path``; else what
    stopped it (a signal: a page past the end of the file)."""
    try:
        child = subprocess.run(
            [sys.executable, "-c", _READ_WHOLE, str(path), str(len(DB_NAMES) + 8)],
            capture_output=True, text=True, timeout=READ_WHOLE_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return f"reading it whole took over {READ_WHOLE_TIMEOUT:g} s"
    if child.returncode == 0:
        return None
    if child.returncode < 0:
        return f"reading it whole was stopped by signal {-child.returncode}"
    said = child.stderr.strip().splitlines() or [f"exit code {child.returncode}"]
    return f"reading it whole failed: {said[-1]}"


class _HasStore(Protocol):
    store: Store


S = TypeVar("S", bound=_HasStore)


def store_errors(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Report an LMDB failure in a method of an owner of ``self.store`` as StoreError
    naming the store: the frontier's hot paths write to LMDB without a wrapper."""

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except lmdb.Error as exc:
            raise StoreError(f"{self.store.path}: {exc}") from exc

    return wrapper


class Store:
    """One LMDB environment with hive's named databases and a held write transaction.

    ``ops`` counts write operations since the store was opened. The frontier's
    hot paths write through ``txn``, ``front_cursor`` and ``back_cursor``
    directly (a wrapper call per write costs about as much as the write), add
    their writes to ``ops`` themselves and report LMDB errors as StoreError at
    the Frontier's public methods; everyone else uses ``put`` and ``delete``.
    """

    def __init__(
        self, path: Path, *, map_size_mb: int = 64, txn_max_ops: int = 5_000,
        sync_interval: float = 2.0,
    ) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        check_file(path)
        try:
            self.env = lmdb.open(
                str(path), map_size=map_size_mb << 20, max_dbs=len(DB_NAMES) + 2,
                sync=False, metasync=False, readahead=False, max_readers=256,
            )
            self.stale_readers = self.env.reader_check()
            self.db = {name: self.env.open_db(name.encode()) for name in DB_NAMES}
        except lmdb.Error as exc:
            raise StoreError(f"cannot open store at {path}: {exc}") from exc
        self.txn_max_ops = txn_max_ops
        self.sync_interval = sync_interval
        self.ops = 0
        self._page_size: int = self.env.stat()["psize"]
        self._grow_checked = -GROW_CHECK_OPS
        self._last_sync = 0.0
        self._unsynced = False
        self.closed = False
        self._readers = threading.Lock()
        self._begin()

    def _begin(self) -> None:
        """Open the next write transaction and the cursors the hot paths reuse within it."""
        self.txn: lmdb.Transaction = self.env.begin(write=True)
        self.front_cursor: lmdb.Cursor = self.txn.cursor(self.db["front"])
        self.back_cursor: lmdb.Cursor = self.txn.cursor(self.db["back"])
        self._due_at = self.ops + self.txn_max_ops
        self._ops_at_begin = self.ops

    def cursor(self, name: str) -> lmdb.Cursor:
        return self.txn.cursor(self.db[name])

    def range(self, name: str, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """The (key, value) items whose keys start with ``prefix``, in key order."""
        cursor = self.txn.cursor(self.db[name])
        if not cursor.set_range(prefix):
            return
        for key, value in cursor.iternext():
            if key[: len(prefix)] != prefix:
                return
            yield bytes(key), bytes(value)

    def keys(self, name: str) -> Iterator[bytes]:
        """Every key of ``name``, in key order."""
        for key in self.txn.cursor(self.db[name]).iternext(keys=True, values=False):
            yield bytes(key)

    def get(self, name: str, key: bytes) -> bytes | None:
        value = self.txn.get(key, db=self.db[name])
        return None if value is None else bytes(value)

    def read_committed(self, name: str, key: bytes) -> bytes | None:
        """The committed value of ``key``, for any thread (see the module docstring); None
        if there is none or the store is closed."""
        with self._readers:
            if self.closed:
                return None
            try:
                with self.env.begin(db=self.db[name], buffers=False) as txn:
                    value: bytes | None = txn.get(key)
            except lmdb.Error as exc:
                raise StoreError(f"{self.path}: read failed: {exc}") from exc
        return value

    def put(self, name: str, key: bytes, value: bytes, overwrite: bool = True) -> bool:
        self.ops += 1
        try:
            return bool(self.txn.put(key, value, overwrite=overwrite, db=self.db[name]))
        except lmdb.MapFullError as exc:
            raise StoreError(f"{self.path}: LMDB map full in one transaction: {exc}") from exc
        except lmdb.Error as exc:
            raise StoreError(f"{self.path}: write failed: {exc}") from exc

    def delete(self, name: str, key: bytes) -> bool:
        self.ops += 1
        return bool(self.txn.delete(key, db=self.db[name]))

    def entries(self, name: str) -> int:
        return int(self.txn.stat(self.db[name])["entries"])

    @property
    def due(self) -> bool:
        """True when the open transaction holds enough operations to commit early."""
        return self.ops >= self._due_at

    @property
    def changed(self) -> bool:
        """True when the open transaction has written through this store (``ops`` moved)."""
        return self.ops != self._ops_at_begin

    def commit(self, now: float) -> None:
        """Commit the turn's transaction, grow the map if needed, sync if due, begin anew."""
        try:
            self.txn.commit()
        except lmdb.Error as exc:
            raise StoreError(f"{self.path}: commit failed: {exc}") from exc
        self._grow_if_needed()
        self._unsynced = True
        self.sync_if_due(now)
        self._begin()

    def sync_if_due(self, now: float) -> None:
        """Flush committed transactions to disk if ``sync_interval`` has passed since the last."""
        if self._unsynced and now - self._last_sync >= self.sync_interval:
            self.env.sync(True)
            self._last_sync = now
            self._unsynced = False

    def _grow_if_needed(self) -> None:
        """Double the map once half of it is used, looking at most every GROW_CHECK_OPS
        writes (a look costs two LMDB stat calls; the half left free dwarfs what
        that many writes can take)."""
        if self.ops < self._grow_checked + GROW_CHECK_OPS:
            return
        self._grow_checked = self.ops
        info = self.env.info()
        used = (info["last_pgno"] + 1) * self._page_size
        if used * 2 > info["map_size"]:
            with self._readers:
                self.env.set_mapsize(info["map_size"] * 2)

    def close(self, now: float) -> None:
        self.commit(now)
        self.txn.abort()
        self.env.sync(True)
        with self._readers:
            self.env.close()
            self.closed = True

    def abandon(self) -> None:
        """Close without committing the open transaction (what a crash would do)."""
        self.txn.abort()
        with self._readers:
            self.env.close()
            self.closed = True
