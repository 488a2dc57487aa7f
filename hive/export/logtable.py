"""The crawl logs' lines kept on disk by URL, so that each capture finds its own line.

A capture (a WARC record) and the crawl-log line of its fetch are written by one worker
but in two files, in different orders; a crawl's logs can hold more lines than fit in
memory. They are joined here through a scratch SQLite database (the standard library's,
on disk beside the export, its page cache bounded by ``CACHE_KIB``): every line of the
logs goes in once (:meth:`LogTable.load`), each capture takes the line of its fetch out
(:meth:`LogTable.take`; deleted in batches), and the lines no capture took are read last
(:meth:`LogTable.rest`): refusals, failures without a response, and fetches whose WARC is
still open.

A line is a fetch's if it has an HTTP status. Of a URL's fetch lines (a URL fetched
again after a retryable answer has more than one), a capture takes the one whose fetch
started (``t`` minus ``dl``: the record's ``WARC-Date``) nearest its own time. Lines are
read by :func:`hive.report.lines.read_lines`, which skips and counts the ones that do not
read (a last line still being written among them).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hive.report.lines import Skips, read_lines

# The scratch database's page cache, in KiB: what the join may hold in memory.
CACHE_KIB = 64 << 10
# Lines inserted per executemany call while loading.
LOAD_BATCH = 10_000


class LogTable:
    """The lines of a crawl's logs in a scratch database at ``path`` (made afresh)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.unlink(missing_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None)
        for pragma in ("journal_mode = OFF", "synchronous = OFF", f"cache_size = -{CACHE_KIB}"):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.execute(
            "CREATE TABLE log (id INTEGER PRIMARY KEY, url TEXT NOT NULL, start REAL, "
            "fetch INTEGER NOT NULL, line TEXT NOT NULL)"
        )
        self.lines = 0
        self.skips = Skips()
        # Lines taken but not deleted yet: deleted LOAD_BATCH at a time, one transaction each.
        self._taken: set[int] = set()

    @property
    def database(self) -> sqlite3.Connection:
        """The scratch database, where the export's other joins keep their tables too
        (hive.export.languages)."""
        return self._db

    def close(self) -> None:
        self._db.close()
        self.path.unlink(missing_ok=True)

    def load(self, files: list[Path]) -> None:
        """Put in every usable line of ``files``, in order; the others are counted in
        :attr:`skips`."""
        insert = "INSERT INTO log (url, start, fetch, line) VALUES (?, ?, ?, ?)"
        batch: list[tuple[str, float, int, str]] = []
        self._db.execute("BEGIN")
        for entry in read_lines(files, self.skips):
            fetched = entry.get("status") is not None
            start = float(entry["t"]) - float(entry.get("dl", 0))
            batch.append((entry["url"], start, fetched, json.dumps(entry)))
            if len(batch) >= LOAD_BATCH:
                self._db.executemany(insert, batch)
                self.lines += len(batch)
                batch.clear()
        self._db.executemany(insert, batch)
        self.lines += len(batch)
        self._db.execute("CREATE INDEX log_url ON log (url) WHERE fetch")
        self._db.execute("COMMIT")

    def take(self, url: str, start: float) -> dict[str, Any] | None:
        """The fetch line of ``url`` whose fetch started nearest ``start`` (seconds since
        the epoch), taken out; None if no line is left for it."""
        # A URL's fetch lines are few (one per try): chosen here, not sorted by SQLite.
        lines = [found for found in self._db.execute(
            "SELECT id, start, line FROM log WHERE url = ? AND fetch", (url,)
        ).fetchall() if found[0] not in self._taken]
        if not lines:
            return None
        row_id, _, line = min(lines, key=lambda found: (abs(found[1] - start), found[0]))
        self._taken.add(row_id)
        if len(self._taken) >= LOAD_BATCH:
            self._delete_taken()
        entry: dict[str, Any] = json.loads(line)
        return entry

    def _delete_taken(self) -> None:
        """Delete the lines taken since the last time, in one transaction."""
        self._db.execute("BEGIN")
        self._db.executemany("DELETE FROM log WHERE id = ?", [(i,) for i in self._taken])
        self._db.execute("COMMIT")
        self._taken.clear()

    def rest(self) -> Iterator[dict[str, Any]]:
        """The lines no capture took, in the order they were loaded."""
        self._delete_taken()
        last = 0
        while True:
            page = self._db.execute(
                "SELECT id, line FROM log WHERE id > ? ORDER BY id LIMIT ?", (last, LOAD_BATCH)
            ).fetchall()
            if not page:
                return
            for row_id, line in page:
                entry: dict[str, Any] = json.loads(line)
                yield entry
                last = row_id
