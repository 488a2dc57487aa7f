"""The other ways to open a store than a worker's: read-only, and durable step by step.

:func:`read_only` opens a stopped process's store (``hive verify``, the
supervisor's count of the pages a store holds, the soak bench) without its lock
file and without writing anything, in one read transaction; a database the
store lacks reads as empty, and ``Txn.missing`` names it. :class:`DurableStore`
is resize's: every write step runs in a transaction of its own, committed with
fsync (resize deletes a host at its source only once its copy is durable), and
a step that fills the map is run again from the start on a map twice the size.
:func:`compact_copy` writes a stopped store's compacted copy (a cluster resize
ships one).

Both hand their callers a :class:`Txn`, a transaction addressed by database
name (hive/storage/schema.py has the names and layouts). LMDB's failures leave
this module as StoreError naming the store.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import lmdb

from hive.errors import StoreError
from hive.storage.schema import DB_NAMES
from hive.storage.store import check_file

P = ParamSpec("P")
T = TypeVar("T")


class Txn:
    """One LMDB transaction over a store's databases, addressed by name."""

    def __init__(self, txn: Any, dbs: dict[str, Any], path: Path) -> None:
        self.txn = txn
        self.dbs = dbs
        self.path = path

    @property
    def missing(self) -> list[str]:
        """The databases of the schema this store lacks (a read-only open makes none)."""
        return [name for name in DB_NAMES if name not in self.dbs]

    def get(self, name: str, key: bytes) -> bytes | None:
        db = self.dbs.get(name)
        if db is None:
            return None
        value: bytes | None = self.txn.get(key, db=db)
        return value

    def put(self, name: str, key: bytes, value: bytes, overwrite: bool = True) -> bool:
        return bool(self.txn.put(key, value, overwrite=overwrite, db=self.dbs[name]))

    def replace(self, name: str, key: bytes, value: bytes) -> bytes | None:
        """Write ``value``; the value it replaced, or None."""
        old: bytes | None = self.txn.replace(key, value, db=self.dbs[name])
        return old

    def pop(self, name: str, key: bytes) -> bytes | None:
        """Delete ``key``; its value, or None if it was not there."""
        old: bytes | None = self.txn.pop(key, db=self.dbs[name])
        return old

    def delete(self, name: str, key: bytes) -> bool:
        return bool(self.txn.delete(key, db=self.dbs[name]))

    def items(self, name: str, start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) of a database in key order from the first key at or after
        ``start`` (none if the store lacks the database)."""
        db = self.dbs.get(name)
        if db is None:
            return iter(())
        cursor = self.txn.cursor(db)
        if start and not cursor.set_range(start):
            return iter(())
        items: Iterator[tuple[bytes, bytes]] = cursor.iternext()
        return items

    def range(self, name: str, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """The (key, value) items whose keys start with ``prefix``, in key order."""
        db = self.dbs.get(name)
        if db is None:
            return
        cursor = self.txn.cursor(db)
        if not cursor.set_range(prefix):
            return
        for key, value in cursor.iternext():
            if key[: len(prefix)] != prefix:
                return
            yield key, value

    def delete_range(self, name: str, prefix: bytes) -> Iterator[bytes]:
        """Delete every item whose key starts with ``prefix``, yielding each value."""
        cursor = self.txn.cursor(self.dbs[name])
        if not cursor.set_range(prefix):
            return
        while cursor.key()[: len(prefix)] == prefix:
            yield cursor.value()
            if not cursor.delete():
                return

    def entries(self, name: str) -> int:
        db = self.dbs.get(name)
        return 0 if db is None else int(self.txn.stat(db)["entries"])


@contextmanager
def read_only(path: Path, live: bool = False) -> Iterator[Txn]:
    """A read transaction on the stopped store at ``path``; StoreError if it is damaged or
    cannot be opened (a directory without ``data.mdb`` among them). ``live``: the store's
    worker may be running, so the read takes LMDB's reader lock, which keeps the writer
    from reusing the pages being read."""
    check_file(path)
    try:
        env = lmdb.open(
            str(path), readonly=True, lock=live, max_dbs=len(DB_NAMES) + 2, readahead=False
        )
    except lmdb.Error as exc:
        raise StoreError(f"cannot open store at {path}: {exc}") from exc
    try:
        with env.begin() as txn:
            dbs = {}
            for name in DB_NAMES:
                try:
                    dbs[name] = env.open_db(name.encode(), txn=txn, create=False)
                except lmdb.NotFoundError:
                    continue
            yield Txn(txn, dbs, path)
    except lmdb.Error as exc:
        raise StoreError(f"{path / 'data.mdb'} is damaged: {exc}") from exc
    finally:
        env.close()


class DurableStore:
    """A store opened for resize: one durable (fsynced) commit per write step.

    The caller holds the store's lock for as long as it is open."""

    def __init__(self, path: Path, map_size_mb: int) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        check_file(path)
        try:
            self.env = lmdb.open(
                str(path), map_size=map_size_mb << 20, max_dbs=len(DB_NAMES) + 2,
                readahead=False, max_readers=256,
            )
        except lmdb.Error as exc:
            raise StoreError(f"cannot open store at {path}: {exc}") from exc
        try:
            self.env.reader_check()
            self.dbs = {name: self.env.open_db(name.encode()) for name in DB_NAMES}
        except lmdb.Error as exc:
            self.env.close()
            raise StoreError(f"cannot open store at {path}: {exc}") from exc

    @contextmanager
    def read(self) -> Iterator[Txn]:
        """A read transaction."""
        try:
            with self.env.begin() as txn:
                yield Txn(txn, self.dbs, self.path)
        except lmdb.Error as exc:
            raise StoreError(f"{self.path}: {exc}") from exc

    def write(self, step: Callable[Concatenate[Txn, P], T], *args: P.args,
              **kwargs: P.kwargs) -> T:
        """Run ``step(txn, *args)`` in one write transaction and commit it; a full map is
        doubled and the step run again from the start (the aborted one left nothing)."""
        while True:
            try:
                with self.env.begin(write=True) as txn:
                    result = step(Txn(txn, self.dbs, self.path), *args, **kwargs)
            except lmdb.MapFullError:
                self.env.set_mapsize(self.env.info()["map_size"] * 2)
                continue
            except lmdb.Error as exc:
                raise StoreError(f"{self.path}: {exc}") from exc
            info = self.env.info()
            if (info["last_pgno"] + 1) * self.env.stat()["psize"] * 2 > info["map_size"]:
                self.env.set_mapsize(info["map_size"] * 2)
            return result

    def entries(self, name: str) -> int:
        with self.read() as txn:
            return txn.entries(name)

    def close(self) -> None:
        self.env.close()


def compact_copy(path: Path, target: Path) -> Path:
    """Write a compacted copy of the stopped store at ``path`` into the empty directory
    ``target`` (LMDB's copy: only the pages in use, in order, so the file's size matches
    its last page) and fsync it; the copy's data file."""
    try:
        env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=len(DB_NAMES) + 2)
    except lmdb.Error as exc:
        raise StoreError(f"cannot open store at {path}: {exc}") from exc
    try:
        env.copy(str(target), compact=True)
    except lmdb.Error as exc:
        raise StoreError(f"cannot copy the store at {path}: {exc}") from exc
    finally:
        env.close()
    copied = target / "data.mdb"
    fd = os.open(copied, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return copied
