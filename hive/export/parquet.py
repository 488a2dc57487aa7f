"""``hive export --format parquet``: the crawl as a columnar index, one row per capture.

The columns that mean what Common Crawl's cc-index-table columns mean have their names
and types (its ``cc-index-schema-flat.json``: ``short`` is int16, ``integer`` int32,
``timestamp`` a UTC timestamp), so its users' queries run unchanged: the URL and its
host's parts (hive.export.urlparts), ``fetch_time``, ``fetch_status``,
``fetch_redirect``, ``content_digest``, ``content_mime_type``, ``content_languages``
(the languages the text sink found, hive.export.languages: ISO 639-3 codes,
comma-separated; null when it is off or found none), ``content_truncated``,
``warc_filename``, ``warc_record_offset``, ``warc_record_length`` and ``subset``. Two
differ, on purpose: the offset and length are int64, a hive WARC having no 2 GiB bound
(``warc.max_file_bytes``), and a row of the crawl log with no response has no
``fetch_status`` and no ``fetch_time``, which Common Crawl's rows always have.
``content_mime_detected``, ``content_charset``, ``warc_record_id`` and ``warc_segment``
are left out: hive does not know them without reading every record.

hive's own columns: ``warc_record_type`` (``response``, ``revisit``, or null: a crawl-log
outcome with no record, such as a refusal, a DNS failure, or a fetch whose WARC is still
open), ``outcome`` (the crawl log's kind), ``outcome_reason``, ``outcome_message``,
``hop_path`` (``L`` link, ``E`` embed, ``R`` redirect, ``P`` robots.txt, one a hop; ""
for a seed), ``depth``, ``via`` (the URL it was found on), ``fetch_duration`` (seconds),
``fetch_bytes`` (the body's as received), ``outcome_time`` and ``score`` (the page's
score by ``priority.scorer``, hive.fetch.scoring; null when none scored it).

Written streaming: rows are turned into Arrow columns ``BATCH_ROWS`` at a time (Python
objects cost about five times their Arrow form), the batches of ``ROW_GROUP_ROWS`` rows
written as one row group and let go, so memory follows the row group, not the crawl.
``--out`` names a file, or a directory that gets ``part-NNNNN.parquet`` files of at most
``FILE_ROWS`` rows (a glob reads them all). A file is written as ``.part`` and renamed when whole.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hive.export import require
from hive.export.captures import Row, Tally, rows
from hive.export.urlparts import url_parts
from hive.storage.datadir import DataDir

ROW_GROUP_ROWS = 50_000
BATCH_ROWS = 5_000
FILE_ROWS = 10_000_000
PART = "part-{:05d}.parquet"

# (name, pyarrow type name, nullable), in the order written.
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("url_surtkey", "string", False),
    ("url", "string", False),
    ("url_host_name", "string", False),
    ("url_host_tld", "string", True),
    ("url_host_2nd_last_part", "string", True),
    ("url_host_3rd_last_part", "string", True),
    ("url_host_4th_last_part", "string", True),
    ("url_host_5th_last_part", "string", True),
    ("url_host_registry_suffix", "string", True),
    ("url_host_registered_domain", "string", True),
    ("url_host_private_suffix", "string", True),
    ("url_host_private_domain", "string", True),
    ("url_host_name_reversed", "string", True),
    ("url_protocol", "string", False),
    ("url_port", "int32", True),
    ("url_path", "string", False),
    ("url_query", "string", True),
    ("fetch_time", "timestamp", True),
    ("fetch_status", "int16", True),
    ("fetch_redirect", "string", True),
    ("content_digest", "string", True),
    ("content_mime_type", "string", True),
    ("content_languages", "string", True),
    ("content_truncated", "string", True),
    ("warc_filename", "string", True),
    ("warc_record_offset", "int64", True),
    ("warc_record_length", "int64", True),
    ("subset", "string", True),
    ("warc_record_type", "string", True),
    ("outcome", "string", True),
    ("outcome_reason", "string", True),
    ("outcome_message", "string", True),
    ("hop_path", "string", True),
    ("depth", "int32", True),
    ("via", "string", True),
    ("fetch_duration", "float64", True),
    ("fetch_bytes", "int64", True),
    ("outcome_time", "timestamp", True),
    ("score", "float64", True),
)


def schema() -> Any:
    """The pyarrow schema of the export."""
    pa = require("pyarrow")
    types = {"string": pa.string(), "int16": pa.int16(), "int32": pa.int32(),
             "int64": pa.int64(), "float64": pa.float64(),
             "timestamp": pa.timestamp("us", tz="UTC")}
    return pa.schema([pa.field(name, types[kind], nullable) for name, kind, nullable in COLUMNS],
                     metadata={"written_by": "hive export"})


def _micros(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1_000_000)


def _subset(row: Row, path: str) -> str | None:
    """Common Crawl's subset: robots.txt, a success, or anything else a server answered."""
    if row.status is None:
        return None
    if path == "/robots.txt":
        return "robotstxt"
    return "warc" if 200 <= row.status < 300 else "crawldiagnostics"


def columns(group: Iterable[Row]) -> list[list[Any]]:
    """A row group's values, column by column in the order of ``COLUMNS``."""
    out: list[list[Any]] = [[] for _ in COLUMNS]
    adds = [column.append for column in out]
    for row in group:
        parts = url_parts(row.url)
        host = parts.host
        values = (
            row.surt, row.url, host.name, host.tld, host.second, host.third, host.fourth,
            host.fifth, host.registry_suffix, host.registered_domain, host.private_suffix,
            host.private_domain, host.reversed, parts.protocol, parts.port, parts.path,
            parts.query, _micros(row.fetch_time), row.status, row.redirect, row.digest,
            row.mime, row.languages, row.truncated, row.filename, row.offset, row.length,
            _subset(row, parts.path), row.record_type, row.outcome, row.reason, row.message,
            row.hop, row.depth, row.via, row.duration, row.size, _micros(row.outcome_time),
            row.score,
        )
        for add, value in zip(adds, values, strict=True):
            add(value)
    return out


def _groups(source: Iterator[Row], size: int) -> Iterator[list[Row]]:
    group: list[Row] = []
    for row in source:
        group.append(row)
        if len(group) >= size:
            yield group
            group = []
    if group:
        yield group


class _Files:
    """The output: one file, or numbered parts in a directory; each written as .part and
    renamed when whole."""

    def __init__(self, out: Path, as_dir: bool) -> None:
        self.out, self.as_dir = out, as_dir
        self.written: list[Path] = []
        self._writer: Any = None
        self._partial: Path | None = None
        self._rows = 0

    def write(self, table: Any) -> None:
        pq = require("pyarrow.parquet")
        if self._writer is None or (self.as_dir and self._rows >= FILE_ROWS):
            self.close()
            final = self.out / PART.format(len(self.written)) if self.as_dir else self.out
            self._partial = final.with_name(final.name + ".part")
            self._writer = pq.ParquetWriter(self._partial, table.schema, compression="zstd")
            self.written.append(final)
            self._rows = 0
        self._writer.write_table(table, row_group_size=max(1, table.num_rows))
        self._rows += table.num_rows

    def close(self) -> None:
        if self._writer is not None and self._partial is not None:
            self._writer.close()
            self._partial.replace(self.written[-1])
            self._writer = self._partial = None

    def abandon(self) -> None:
        if self._writer is not None and self._partial is not None:
            self._writer.close()
            self._partial.unlink(missing_ok=True)
            self._writer = self._partial = None


def export(data: Path, out: Path, tally: Tally, group_rows: int = ROW_GROUP_ROWS) -> list[Path]:
    """Write the crawl in ``data`` to ``out`` (a file, or a directory if it is one or its
    name ends with ``/``); returns the files written (one with no row for a crawl with
    none)."""
    pa = require("pyarrow")
    require("pyarrow.parquet")
    as_dir = out.is_dir() or str(out).endswith("/")
    if as_dir:
        out.mkdir(parents=True, exist_ok=True)
    spec = schema()
    files = _Files(out, as_dir)
    with tempfile.TemporaryDirectory(prefix=".hive-export-",
                                     dir=out if as_dir else out.parent) as scratch:
        try:
            batches: list[Any] = []
            held = 0
            source = rows(DataDir(data), Path(scratch), tally)
            for chunk in _groups(source, min(BATCH_ROWS, group_rows)):
                arrays = [pa.array(values, type=field.type)
                          for values, field in zip(columns(chunk), spec, strict=True)]
                batches.append(pa.RecordBatch.from_arrays(arrays, schema=spec))
                held += len(chunk)
                if held >= group_rows:
                    files.write(pa.Table.from_batches(batches))
                    batches, held = [], 0
            if batches or not files.written:  # the last group, or an empty file
                files.write(pa.Table.from_batches(batches, schema=spec))
        except BaseException:
            files.abandon()
            raise
        files.close()
    return files.written
