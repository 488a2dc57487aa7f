"""A file a worker reads a batch of lines a turn of its frontier thread, and the place the
reading reached, kept in the worker's store (``meta``, under the reader's key).

A recrawl's plan (hive.procs.plan) and a prior crawl's CDXJ index (``--dedup-from``,
hive.procs.dedup) are read so: a file of millions of lines read at once would hold the
worker for minutes, unreporting, and the supervisor kills a worker silent for
``hive.hung_after``, whose restart would read it again from its start. The reader puts
the place with what its lines put in the store, and commits them together: a restart goes
on from there, and a kill between two commits reads the last batch again, which each
reader makes harmless (what a line puts is put again whole). A place holds for one
version of the file (its path, size and time): another file, or this one changed, is
read from its start.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import IO

from hive.storage.store import Store

# The place reached in a version of the file (after its mark): byte offset, lines read,
# read whole.
_PLACE = struct.Struct(">QQ?")


class Reading:
    """Where a worker got to in the file at ``path``, kept under ``meta`` ``key``."""

    def __init__(self, store: Store, path: Path, key: bytes) -> None:
        self.store = store
        self.path = path
        self.key = key
        self.lines = 0  # read, by this start and the ones before it
        self._file: IO[bytes] | None = None
        self._mark = b""
        self._size = 0

    def open(self) -> IO[bytes] | None:
        """The file at the place the last commit kept (opened on the first call); None if
        it was read whole. Raises OSError if it cannot be read."""
        if self._file is not None:
            return self._file
        stat = self.path.stat()
        self._size = stat.st_size
        self._mark = f"{self.path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode()
        held = self.store.get("meta", self.key) or b""
        offset = 0
        if held.startswith(self._mark) and len(held) == len(self._mark) + _PLACE.size:
            offset, self.lines, whole = _PLACE.unpack(held[len(self._mark):])
            if whole:
                return None
        f = self.path.open("rb")
        f.seek(offset)
        self._file = f
        return f

    def keep(self) -> bool:
        """Put the place the open file is at (committed with the caller's next commit);
        True if that is its end."""
        assert self._file is not None
        offset = self._file.tell()
        whole = offset >= self._size
        self.store.put("meta", self.key, self._mark + _PLACE.pack(offset, self.lines, whole))
        return whole

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
