"""A crawl's captures, one :class:`Row` at a time: each WARC record joined to its crawl-log
line, then the crawl log's outcomes that have no record.

What an export reads, running crawl or stopped, through :class:`DataDir`:

* **Closed WARCs only** (``warc/*.warc.gz``): a file still written (``.open``) is left
  out and counted, its fetches' lines coming as rows without a record. A closed file's
  captures are the lines of the CDXJ index beside it (hive/fetch/cdxj.py), read one at a
  time; a file whose index is not written yet (the writer renames, then indexes) is
  indexed here, as ``hive index`` would.
* **Every crawl log** (rotated and live), loaded into a :class:`LogTable` on disk, so
  that memory does not follow the crawl. A capture takes its fetch's line (the URL's,
  nearest in time); a capture whose line is not there (a log not flushed yet) has no
  crawl-log columns, and is counted.
* **What the index leaves out is read from the record** (hive.export.records) for the
  captures that can have it: a redirect's ``Location`` (a 3xx status) and a body's
  ``WARC-Truncated`` (a fetch that did not end as a whole answer, or with no log line).
* **The text sink's languages** (hive.export.languages): each response's, from the
  conversion records of the closed WET files, kept in the same scratch database.
* **The rest of the log**, after every capture: refusals, failures with no response and
  fetches whose record is in a file still open, each a row with no record.

Rows come WARC file by WARC file (by name), each in its index's order, then the log's
remaining lines in the order they were written.
"""

from __future__ import annotations

import calendar
import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

from hive.errors import HiveError
from hive.export import records
from hive.export.languages import LanguageTable, wet_files
from hive.export.logtable import LogTable
from hive.fetch import cdxj
from hive.report.lines import Skips
from hive.storage.datadir import DataDir

# Outcomes of a fetch whose record is never truncated; any other may be (hive/fetch/pipeline.py
# truncation), so its record's head is read for WARC-Truncated.
_WHOLE = frozenset({"ok", "redirect", "robots_ok", "robots_stale", "robots_retry", "sitemap_ok",
                    "feed_ok"})
_DIGEST_PREFIX = "sha1:"
_NEEDED = ("url", "filename", "offset", "length")


class Row(NamedTuple):
    """One capture, or one crawl-log outcome without a record (``record_type`` None).

    Times are seconds since the epoch (UTC); ``digest`` is the payload's base32 SHA-1 (as
    Common Crawl writes it, without ``sha1:``)."""

    url: str
    surt: str
    fetch_time: float | None
    status: int | None
    mime: str | None
    digest: str | None
    record_type: str | None
    filename: str | None
    offset: int | None
    length: int | None
    redirect: str | None
    truncated: str | None
    outcome: str | None
    reason: str | None
    message: str | None
    hop: str | None
    via: str | None
    depth: int | None
    duration: float | None
    size: int | None
    outcome_time: float | None
    languages: str | None  # ISO 639-3 codes, comma-separated (hive.export.languages)
    score: float | None


@dataclass
class Tally:
    """What an export read and what it could not."""

    warcs: int = 0
    open_warcs: list[str] = field(default_factory=list)
    indexed_here: int = 0
    captures: int = 0
    unlogged: int = 0
    log_rows: int = 0
    heads_read: int = 0
    unreadable_heads: int = 0
    log_lines: int = 0
    skips: Skips = field(default_factory=Skips)
    wet_files: int = 0
    open_wet_files: list[str] = field(default_factory=list)
    conversions: int = 0
    unreadable_conversions: int = 0


def closed_warcs(dd: DataDir) -> tuple[list[Path], list[Path]]:
    """The crawl's closed WARC files and those still open (being written, or left by a
    crash), each by name."""
    every = cdxj.crawl_warcs(dd.warc) if dd.warc.is_dir() else []
    closed = [path for path in every if path.name.endswith(cdxj.WARC_SUFFIX)]
    return closed, [path for path in every if not path.name.endswith(cdxj.WARC_SUFFIX)]


def index_lines(warc: Path, tally: Tally | None = None) -> Iterator[str]:
    """The CDXJ lines of a closed WARC: its index beside it, or read from it if there is
    none yet."""
    beside = cdxj.index_path(warc)
    try:
        handle = beside.open(encoding="utf-8")
    except FileNotFoundError:
        if tally is not None:
            tally.indexed_here += 1
        yield from cdxj.index_file(warc).lines
        return
    with handle:
        yield from handle


class Line(NamedTuple):
    """An index line read: its SURT key, capture time and fields."""

    key: str
    time: float
    fields: dict[str, Any]


@functools.lru_cache(maxsize=1024)
def _epoch(stamp: str) -> int:
    """Seconds since the epoch of a 14-digit UTC timestamp (captures come many a second)."""
    if len(stamp) != 14 or not stamp.isascii() or not stamp.isdigit():
        raise ValueError(f"{stamp!r} is not a 14-digit timestamp")
    fields = (int(stamp[0:4]), int(stamp[4:6]), int(stamp[6:8]), int(stamp[8:10]),
              int(stamp[10:12]), int(stamp[12:14]))
    if not (1 <= fields[1] <= 12 and 1 <= fields[2] <= 31 and fields[3] < 24
            and fields[4] < 60 and fields[5] < 62):
        raise ValueError(f"{stamp!r} is not a time")
    return calendar.timegm(fields)


def parse_line(line: str) -> Line:
    """An index line read; ValueError if it is not one of hive's."""
    try:
        key, stamp, text = line.split(" ", 2)
        when = _epoch(stamp)
        fields = json.loads(text)
        if not isinstance(fields, dict) or any(name not in fields for name in _NEEDED):
            raise ValueError(f"not an object with {', '.join(_NEEDED)}")
        int(fields["offset"]), int(fields["length"])
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a CDXJ line of hive's: {exc}") from exc
    return Line(key, float(when), fields)


def bad_index(warc: Path, number: int, exc: ValueError) -> HiveError:
    """The error for line ``number`` of a WARC's index, which is not an index line."""
    return HiveError(f"{cdxj.index_path(warc)}:{number}: {exc}; delete that index and the "
                     "export reads its WARC instead")


def rows(dd: DataDir, scratch: Path, tally: Tally) -> Iterator[Row]:
    """Every row of the crawl in ``dd`` (see the module's docstring); ``scratch`` is a
    directory for the log table."""
    closed, still_open = closed_warcs(dd)
    tally.open_warcs = [path.name for path in still_open]
    table = LogTable(scratch / "crawl-log.sqlite")
    try:
        table.load(dd.crawl_logs())
        tally.log_lines, tally.skips = table.lines, table.skips
        wets, open_wets = wet_files(dd.warc)
        tally.wet_files, tally.open_wet_files = len(wets), [path.name for path in open_wets]
        languages = LanguageTable(table.database)
        languages.load(wets)
        tally.conversions, tally.unreadable_conversions = languages.records, languages.unreadable
        for warc in closed:
            tally.warcs += 1
            with warc.open("rb") as f:
                for number, text in enumerate(index_lines(warc, tally), 1):
                    tally.captures += 1
                    try:
                        line = parse_line(text)
                    except ValueError as exc:
                        raise bad_index(warc, number, exc) from exc
                    yield _capture(line, table, languages, f, tally)
        for entry in table.rest():
            tally.log_rows += 1
            yield _logged(entry)
    finally:
        table.close()


def _capture(line: Line, table: LogTable, languages: LanguageTable, f: IO[bytes],
             tally: Tally) -> Row:
    found = line.fields
    url = found["url"]
    status = int(found["status"]) if "status" in found else None
    entry = table.take(url, line.time)
    if entry is None:
        tally.unlogged += 1
        entry = {}
    offset, length = int(found["offset"]), int(found["length"])
    redirect = truncated = None
    outcome = entry.get("outcome")
    redirected = status is not None and 300 <= status < 400
    record: records.Record | None = None
    if redirected or outcome is None or not (outcome in _WHOLE or outcome.startswith("http_")):
        tally.heads_read += 1
        record = records.read(f, offset, length)
        if record is None:
            tally.unreadable_heads += 1
        else:
            redirect = record.redirect() if redirected else None
            truncated = record.truncated

    def record_id() -> str | None:
        """The capture's WARC-Record-ID, its record read if it was not already."""
        nonlocal record
        if record is None:
            tally.heads_read += 1
            record = records.read(f, offset, length)
        return record.warc.get("warc-record-id") if record is not None else None

    found_languages = languages.languages(url, line.time, record_id) if status == 200 else None
    mime = found.get("mime")
    digest = found.get("digest")
    return Row(
        url, line.key, line.time, status, mime,
        digest.removeprefix(_DIGEST_PREFIX) if digest else None,
        "revisit" if mime == "warc/revisit" else "response",
        found.get("filename"), offset, length, redirect, truncated, *_log_columns(entry),
        found_languages, _score(entry),
    )


def _log_columns(
    entry: dict[str, Any],
) -> tuple[str | None, str | None, str | None, str | None, str | None, int | None,
           float | None, int | None, float | None]:
    """outcome, reason, message, hop path, via, depth, duration, bytes and time of a line."""
    if not entry:
        return None, None, None, None, None, None, None, None, None
    return (
        entry["outcome"], entry.get("reason") or None, entry.get("msg") or None,
        entry.get("hop", ""), entry.get("via") or None, int(entry.get("depth", 0)),
        float(entry.get("dl", 0.0)), int(entry.get("bytes", 0)), float(entry["t"]),
    )


def _score(entry: dict[str, Any]) -> float | None:
    """The page's score in its line (the scorer's, hive.fetch.scoring), if any."""
    score = entry.get("score") if entry else None
    return float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None


def _logged(entry: dict[str, Any]) -> Row:
    url = entry["url"]
    status = entry.get("status")
    started = float(entry["t"]) - float(entry.get("dl", 0.0)) if status is not None else None
    return Row(
        url, cdxj.url_key(url), started, status, entry.get("mime") or None, None, None,
        None, None, None, None, None, *_log_columns(entry), None, _score(entry),
    )
