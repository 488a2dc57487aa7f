"""The text sink's languages, joined to the captures they were found in: ``content_languages``.

The text sink (hive.fetch.text_sink, off by default) writes one WARC ``conversion`` record
per HTML page into WET files beside the WARCs (``*.warc.wet.gz``), with the page's
language (``WARC-Identified-Content-Language``, ISO 639-3 codes, comma-separated as Common
Crawl writes them) when the text told it, and naming the response record it was taken
from: its WARC-Record-ID (``WARC-Refers-To``), target URI and WARC-Date. A capture's index
line (hive/fetch/cdxj.py) has its URI and its date to the second, but not its record ID.
So, in the export's scratch database (hive.export.logtable's, its page cache bounded):

* **Load**: every closed WET file's conversion records go in, heads only (each gzip
  member inflated up to ``cdxj.HEAD_BYTES``), keyed by URI and the second of their
  WARC-Date; a WET file still written (``.open``) is left out and counted, its pages
  then having no language.
* **Look up**: a capture of status 200 (the only ones the sink converts) takes the
  languages of the conversion record of its URI and second. When several share them (a
  page fetched twice in one second), the capture's own record ID is read from its record
  (``record_id``, called only then) and the one that refers to it is taken.

None when there is no such record (the sink off, a page without text or not HTML, a WET
file still open) or the record names no language (too little text). What is left to
chance: a URL answered 200 twice within one second, once as an HTML page with text and
once without (another type, or empty), may give the latter the former's language.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from hive.export import records
from hive.fetch import cdxj

WET_SUFFIX = ".warc.wet.gz"
# Conversion records inserted per executemany call while loading.
LOAD_BATCH = 10_000
_SECOND = len("2024-05-01T12:00:00")


def wet_files(warc_dir: Path) -> tuple[list[Path], list[Path]]:
    """The crawl's closed WET files and those still open, each by name."""
    if not warc_dir.is_dir():
        return [], []
    closed = sorted(path for path in warc_dir.glob("*" + WET_SUFFIX) if path.is_file())
    still_open = sorted(path for path in warc_dir.glob(f"*{WET_SUFFIX}.open") if path.is_file())
    return closed, still_open


def second(epoch: float) -> str:
    """The second of a capture's time as a WARC-Date begins: ``2024-05-01T12:00:00``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch))


class LanguageTable:
    """The conversion records of a crawl's WET files, in a table of ``db`` (the export's
    scratch database: the caller owns it and closes it)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        db.execute("CREATE TABLE conversion (url TEXT NOT NULL, second TEXT NOT NULL, "
                   "refers TEXT, languages TEXT)")
        self.records = 0
        self.unreadable = 0  # WET members whose heads did not read

    def load(self, files: list[Path]) -> None:
        """Put in the conversion records of ``files`` (closed WET files)."""
        insert = "INSERT INTO conversion (url, second, refers, languages) VALUES (?, ?, ?, ?)"
        batch: list[tuple[str, str, str | None, str | None]] = []
        self._db.execute("BEGIN")
        for path in files:
            with path.open("rb") as f:
                for _, _, head in cdxj.members(f):
                    end = head.find(b"\r\n\r\n")
                    if not head.startswith(b"WARC/") or end < 0:
                        self.unreadable += 1
                        continue
                    warc = records.fields(head[:end], "utf-8")
                    if warc.get("warc-type") != "conversion":
                        continue
                    url, date = warc.get("warc-target-uri"), warc.get("warc-date", "")
                    if not url or len(date) < _SECOND:
                        self.unreadable += 1
                        continue
                    batch.append((url, date[:_SECOND], warc.get("warc-refers-to"),
                                  warc.get("warc-identified-content-language") or None))
                    if len(batch) >= LOAD_BATCH:
                        self._insert(insert, batch)
        self._insert(insert, batch)
        self._db.execute("CREATE INDEX conversion_key ON conversion (url, second)")
        self._db.execute("COMMIT")

    def _insert(self, insert: str, batch: list[tuple[str, str, str | None, str | None]]) -> None:
        self._db.executemany(insert, batch)
        self.records += len(batch)
        batch.clear()

    def languages(self, url: str, epoch: float, record_id: Callable[[], str | None]) -> str | None:
        """The languages of the capture of ``url`` at ``epoch`` (seconds), whose own
        WARC-Record-ID ``record_id`` reads (None if it cannot); None if it has none."""
        if not self.records:  # the text sink off: no query a capture
            return None
        found = self._db.execute(
            "SELECT refers, languages FROM conversion WHERE url = ? AND second = ?",
            (url, second(epoch)),
        ).fetchall()
        if len(found) <= 1:
            return found[0][1] if found else None
        own = record_id()
        for refers, languages in found:
            if own is not None and refers == own:
                return str(languages) if languages is not None else None
        return None
