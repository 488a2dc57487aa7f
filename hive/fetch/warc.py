"""WARC/1.1 output: one writer per worker process, one gzip member per record.

This module owns the archive files under ``DATA/warc/``: their names, their
records, their rotation and their recovery after a crash. Policy:

* **One gzip member per record**, compressed with ISA-L (the ``isal``
  package) at the configured level, 0-3 (default 1). On a 5 KB page its level
  1 takes a quarter to a third of the CPU of zlib's level 2 for about 2 % more
  bytes; warcio's writer always uses zlib's level 9, twice that again. Readers
  see ordinary gzip members; recovery reads them back with ``zlib``.
* **Each fetch is a request record followed by a response record**, written
  with one ``write(2)`` and linked both ways by ``WARC-Concurrent-To``. The
  request block is the request head exactly as the fetcher sent it. The
  response block is the status line, the headers and the body *as received*:
  still content-encoded, but de-chunked. A ``Transfer-Encoding`` header no longer
  describes such a body, so it is stored renamed to
  ``X-Crawler-Transfer-Encoding`` (as Heritrix and wget do) and the record stays
  self-consistent. A body cut at the size cap keeps the server's
  ``Content-Length``; ``WARC-Truncated`` tells readers.
* **Revisits**: an exchange whose payload was archived before (its
  ``original``, found by its SHA-1 in the worker's payload index,
  hive.fetch.revisits) is written as a request and a ``revisit`` record of the
  ``identical-payload-digest`` profile (WARC/1.1 section 6.7.2): the response's
  status line and headers as the block, the payload left out, and the
  original's target URI, date and record ID (``WARC-Refers-To-*``). No
  ``WARC-Truncated``: the profile omits the payload by definition, and replay
  tools read a truncated record as a damaged capture.
* **Not modified**: a recrawl's 304 (hive.fetch.warc_sink) is a ``revisit`` of the
  ``server-not-modified`` profile (section 6.7.3) referring to the prior crawl's capture,
  its payload digest that capture's (so pywb finds the original by URI, date and
  digest), its block the head the caller gives (hive.core.prior.Prior.refreshed_head).
* **How a URL was reached**: with ``metadata_records`` on, a response (or revisit)
  whose caller names its hop path is followed by a ``metadata`` record, as Heritrix
  writes one: ``application/warc-fields`` of ``via: <url>`` (the URL it was found on,
  left out for a seed) and ``hopsFromSeed: <path>`` (hive.core.record's hop path,
  ``P`` for robots.txt), ``WARC-Concurrent-To`` the response's record ID. It is built
  as one string, with no block digest (optional in WARC/1.1) and compressed before the
  lock is taken: about 10 us and a gzip member of about 230 bytes at level 1, most of
  both the compression of a small member (bench/bench_warc.py). Replay tools and
  cdxj-indexer pass over ``application/warc-fields`` metadata.
* **Durability**: ``write_exchange`` returns once the pair is in the kernel (it
  survives the death of the process), so the worker may commit the outcome
  then. A finished file is fsynced before it is renamed.
* **Names**: a file is written as ``{prefix}-{UTC yyyymmddHHMMSS}-{seq:05d}.warc.gz.open``
  and renamed to drop ``.open`` when closed or rotated, so a reader looking
  for ``*.warc.gz`` never sees a torn file. A file is rotated once it reaches
  ``max_file_bytes``; it exceeds that by at most one fetch's records. ``seq``
  continues from the highest sequence number already on disk for the prefix. A
  writer given another ``suffix`` (the text sink's ``.warc.wet.gz``) names its files
  so, and readers of ``*.warc.gz`` pass them by.
* **Recovery**: a writer owns its prefix (one process per worker id). When it
  starts, each ``.open`` file of its prefix left by a crash is cut after its
  last complete response (or revisit, or the metadata record after one, or a
  ``conversion`` record, the only kind in a WET file), dropping
  a torn gzip member and a request whose response never arrived, and renamed to
  its final name; a file left with no response is deleted. Only the tail is read (see ``find_cut``).
* **Index**: a file finished (closed, rotated or recovered) gets its CDXJ index
  beside it (``hive.fetch.cdxj``), written after the writer's lock is let go. The
  writer takes each response's capture from the record it compresses, so only a
  recovered file is read back to be indexed. A writer made with ``indexed=False`` (of
  WET files: no replay tool reads their index) writes none.
* **Single records**: ``write_record`` appends one record of the caller's fields and
  block (the text sink's ``conversion`` records), compressed before the lock is taken;
  it names no warcinfo (``WARC-Warcinfo-ID`` is optional).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

from hive.config import GZIP_LEVELS, WarcConfig
from hive.fetch import cdxj
from hive.fetch.warc_records import (
    Headers,
    Truncation,
    digest_text,
    encode_text,
    gzip_member,
    head_lines,
    metadata_record,
    one_line,
    record_id,
    sha1_digest,
    stored_response_head,
    warc_date,
    warc_record,
)

log = logging.getLogger(__name__)

CONFORMS_TO = "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
SUFFIX = ".warc.gz"
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
# An open file's index lines kept in memory at most; past it they go to a run file.
CAPTURE_RUN = 4096
RUN_INFIX = ".cdxj-run-"
OPEN_SUFFIX = ".open"
_HEAD_BYTES = 128
_PIECE = 1 << 16
_TAIL = 1 << 22
# A gzip member header as ISA-L or zlib writes it: magic, deflate, no flags, mtime 0,
# XFL (0, 2 or 4), OS (ISA-L: 255).
_MEMBER_START = re.compile(rb"\x1f\x8b\x08\x00\x00\x00\x00\x00[\x00\x02\x04][\x00-\xff]")
_TYPE_RE = re.compile(rb"\r\nWARC-Type: *([A-Za-z]+)")
# The records a cut may follow: hive writes a metadata record only after its response.
_KEPT = (b"response", b"revisit", b"metadata", b"conversion")


class WarcLocation(NamedTuple):
    """Where a response record landed: final file name, offset and length of its gzip member;
    its record ID and WARC-Date."""

    filename: str
    offset: int
    length: int
    record_id: str = ""
    date: str = ""


class Original(NamedTuple):
    """The record a revisit refers to: its target URI, WARC-Date and record ID ("" when
    unknown, as for one read from a CDXJ index); the revisit's profile, and for a
    server-not-modified revisit (whose response has no payload) the original's payload
    digest, which a replay tool finds the original by."""

    uri: str
    date: str
    record_id: str
    profile: str = REVISIT_PROFILE
    payload_digest: str = ""


def _members(data: memoryview) -> Iterator[tuple[int, bytes]]:
    """(end offset, first inflated bytes) of each complete gzip member from the start
    of data, stopping at the first torn or corrupt one."""
    pos = 0
    while pos < len(data):
        inflater = zlib.decompressobj(31)
        head = b""
        fed = pos
        while not inflater.eof:
            # Small pieces keep unused_data (a copy of what follows the member) small.
            piece = data[fed : fed + _PIECE]
            if not piece:
                return
            try:
                out = inflater.decompress(piece)
            except zlib.error:
                return
            if len(head) < _HEAD_BYTES:
                head += out[: _HEAD_BYTES - len(head)]
            fed += len(piece)
        pos = fed - len(inflater.unused_data)
        yield pos, head


def _last_safe_end(data: memoryview) -> tuple[int, bytes]:
    """(offset past the last complete member that is not a request, its WARC-Type) in
    data, which must begin with a member; (0, b"") if there is none or data does not
    begin with a WARC record."""
    end, kind = 0, b""
    for i, (member_end, head) in enumerate(_members(data)):
        if i == 0 and not head.startswith(b"WARC/1.1\r\n"):
            return 0, b""
        match = _TYPE_RE.search(head)
        if match is not None and match.group(1) != b"request":
            end, kind = member_end, match.group(1)
    return end, kind


def find_cut(path: Path) -> tuple[int, bool]:
    """Where to cut a torn ``.open`` file, and whether a response record precedes the cut.

    The cut follows the last complete response, revisit, metadata or conversion record
    (or the warcinfo): a torn gzip member
    and a request whose response never arrived are dropped. Only the tail can be torn
    (records are only appended, a pair at a time), so this reads the file backwards
    in growing windows: it looks for our gzip member headers (zlib writes mtime 0, so
    ten nearly fixed bytes), latest first, and inflates forward from each until one
    leads to a safe end. Its cost follows the size of the last few records, not of
    the file.
    """
    size = path.stat().st_size
    span = _TAIL
    with path.open("rb") as f:
        while True:
            low = max(0, size - span)
            f.seek(low)
            tail = memoryview(f.read())
            for start in reversed([m.start() for m in _MEMBER_START.finditer(tail)]):
                end, kind = _last_safe_end(tail[start:])
                if kind:
                    return low + start + end, kind in _KEPT
            if low == 0:
                return 0, False
            span *= 4


def recover(path: Path) -> Path | None:
    """Finish a ``.open`` file left by a crash: cut it after its last complete response
    and rename it to its final name; delete it if no response survives.
    Returns the final path, or None when the file was deleted."""
    cut, has_response = find_cut(path)
    if not has_response:
        path.unlink()
        log.warning("warc: deleted %s: no complete response record", path.name)
        return None
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(cut)
        f.flush()
        os.fsync(f.fileno())
    final = path.with_name(path.name.removesuffix(OPEN_SUFFIX))
    path.rename(final)
    log.warning("warc: recovered %s: kept %d bytes, cut %d", final.name, cut, size - cut)
    return final


def index_beside(path: Path, lines: list[str] | None = None,
                 runs: Sequence[Path] = ()) -> None:
    """Write the CDXJ index of a finished file beside it (``hive.fetch.cdxj``): ``lines``
    and sorted ``runs`` if the writer kept them, else read out of the file. A failure is
    logged, not raised: the records are safe, and ``hive index`` rebuilds any index from
    the WARCs. The runs are gone afterwards either way."""
    try:
        if lines is None:
            cdxj.write_beside(path)
        else:
            cdxj.write_lines(path, lines, runs)
    except OSError as exc:
        log.warning("warc: no index written for %s: %s", path.name, exc)
    finally:
        for run in runs:
            run.unlink(missing_ok=True)


def run_path(open_path: Path, final_name: str, number: int) -> Path:
    """Where the ``number``-th sorted run of an open file's index lines waits."""
    return open_path.with_name(f"{final_name}{RUN_INFIX}{number:05d}")


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class WarcWriter:
    """Writes request/response record pairs for one worker; safe to share between threads."""

    def __init__(
        self,
        directory: Path,
        prefix: str,
        max_file_bytes: int,
        gzip_level: int,
        software: str,
        now: Callable[[], float] | None = None,
        info: Sequence[tuple[str, str]] = (),
        metadata_records: bool = True,
        suffix: str = SUFFIX,
        indexed: bool = True,
    ) -> None:
        if gzip_level not in GZIP_LEVELS:
            raise ValueError(f"gzip_level must be 0..{GZIP_LEVELS[-1]}, got {gzip_level}")
        if max_file_bytes < 1:
            raise ValueError(f"max_file_bytes must be at least 1, got {max_file_bytes}")
        self.directory = directory
        self.prefix = prefix
        self.max_file_bytes = max_file_bytes
        self.gzip_level = gzip_level
        self.software = software
        self.info = list(info)
        self.metadata_records = metadata_records
        self.suffix = suffix
        self.indexed = indexed
        self._now: Callable[[], float] = now if now is not None else time.time
        self._lock = threading.Lock()
        self._name_re = re.compile(
            rf"{re.escape(prefix)}-\d{{14}}-(\d{{5,}}){re.escape(suffix)}(?:{re.escape(OPEN_SUFFIX)})?$"
        )
        self._file: _FileState | None = None
        self._records = self._bytes = self._files = 0
        directory.mkdir(parents=True, exist_ok=True)
        self._seq = self._recover_and_next_seq()

    @classmethod
    def from_config(
        cls, cfg: WarcConfig, directory: Path, prefix: str, software: str,
        info: Sequence[tuple[str, str]] = (),
    ) -> WarcWriter:
        """``info``: warcinfo fields besides software, format, conformsTo and hostname
        (the worker's: ``robots``, ``http-header-user-agent``)."""
        return cls(directory, prefix, cfg.max_file_bytes, cfg.gzip_level, software, info=info,
                   metadata_records=cfg.metadata_records)

    def _recover_and_next_seq(self) -> int:
        highest = -1
        for entry in sorted(os.listdir(self.directory)):
            name, run, _ = entry.partition(RUN_INFIX)
            if run and self._name_re.match(name):
                (self.directory / entry).unlink()  # a crash's: its file is indexed anew
                continue
            match = self._name_re.match(entry)
            if match is None:
                continue
            highest = max(highest, int(match.group(1)))
            if entry.endswith(OPEN_SUFFIX):
                recovered = recover(self.directory / entry)
                if recovered is not None and self.indexed:
                    index_beside(recovered)
        return highest + 1

    def write_exchange(
        self,
        *,
        url: str,
        ip: str | None,
        request: bytes,
        status_line: str,
        response_headers: Headers,
        body: bytes,
        truncated: Truncation | None = None,
        date: float | None = None,
        payload_sha1: bytes | None = None,
        original: Original | None = None,
        via: str = "",
        hop_path: str | None = None,
    ) -> WarcLocation:
        """Write a request record and its response record, and return once both are in the kernel.

        ``request``: the request head as the fetcher sent it, byte for byte (request
        line, headers in their order and case, the empty line), stored as it is.
        ``status_line``/``response_headers``/``body``: the response as received, the
        body de-chunked but still content-encoded. ``truncated`` names why the body
        is incomplete (``"length"`` at the size cap). ``date``: when the fetch
        started (default: now). ``payload_sha1``: the SHA-1 of ``body``, if the
        caller has it. ``original``: the record that archived this payload before;
        the response is then written as a revisit of it, without the body. ``hop_path``
        (None: not known) and ``via``: how the URL was reached, written as a metadata
        record after the response when ``metadata_records`` is on. Returns where the
        response (or revisit) record is.
        """
        when = warc_date(self._now() if date is None else date)
        head = stored_response_head(status_line, response_headers)
        request_id, response_id = record_id(), record_id()
        digest = hashlib.sha1(head)
        if original is None:
            digest.update(body)
        if original is not None and original.payload_digest:
            payload = original.payload_digest
        else:
            payload = digest_text(payload_sha1 or hashlib.sha1(body).digest())
        # Each head is one string, as warc_record would join it: only the caller's values can
        # hold a CR or LF (the ids, dates and digests are ours), so only they are cleaned.
        target = url
        if "\r" in url or "\n" in url or (ip and ("\r" in ip or "\n" in ip)):
            target, ip = one_line(url), (one_line(ip) if ip else ip)
        address = f"WARC-IP-Address: {ip}\r\n" if ip else ""
        request_head = encode_text(
            f"WARC/1.1\r\nWARC-Type: request\r\nWARC-Record-ID: {request_id}\r\n"
            f"WARC-Date: {when}\r\nWARC-Target-URI: {target}\r\n"
            f"Content-Type: application/http; msgtype=request\r\n"
            f"WARC-Block-Digest: {sha1_digest(request)}\r\n"
            f"WARC-Concurrent-To: {response_id}\r\n{address}"
        )
        if original is None:
            kind, block_length = "response", len(head) + len(body)
            refers = ""
            if truncated is not None:
                address += f"WARC-Truncated: {one_line(truncated)}\r\n"
        else:
            kind, block_length = "revisit", len(head)
            refers = (
                f"WARC-Profile: {original.profile}\r\n"
                f"WARC-Refers-To-Target-URI: {one_line(original.uri)}\r\n"
                f"WARC-Refers-To-Date: {one_line(original.date)}\r\n"
            )
            if original.record_id:
                refers += f"WARC-Refers-To: {one_line(original.record_id)}\r\n"
        response_head = encode_text(
            f"WARC/1.1\r\nWARC-Type: {kind}\r\nWARC-Record-ID: {response_id}\r\n"
            f"WARC-Date: {when}\r\nWARC-Target-URI: {target}\r\n"
            f"Content-Type: application/http; msgtype=response\r\n"
            f"WARC-Block-Digest: {digest_text(digest.digest())}\r\n"
            f"WARC-Payload-Digest: {payload}\r\nWARC-Concurrent-To: {request_id}\r\n"
            f"{refers}{address}"
        )
        metadata = b"" if hop_path is None or not self.metadata_records else gzip_member(
            metadata_record(url, when, response_id, via, hop_path), self.gzip_level
        )
        # The index's capture, from the fields as given, before the lock is taken.
        found = cdxj.exchange_capture(kind, url, when, payload, head)
        # Compression runs under the lock: the header names the file's warcinfo, which
        # only the lock holder knows, and ~60 us a pair is far below a worker's page rate.
        with self._lock:
            current = self._file if self._file is not None else self._open()
            info = f"WARC-Warcinfo-ID: {current.info_id}\r\nContent-Length: "
            level = self.gzip_level
            request = gzip_member(b"".join([
                request_head, f"{info}{len(request)}\r\n\r\n".encode(), request, b"\r\n\r\n",
            ]), level)
            warc_head = b"".join([response_head, f"{info}{block_length}\r\n\r\n".encode()])
            record = b"".join(
                [warc_head, head, b"\r\n\r\n"] if original is not None
                else [warc_head, head, body, b"\r\n\r\n"]
            )
            response = gzip_member(record, level)
            offset = current.size + len(request)
            current.write(b"".join([request, response, metadata]))
            # Heads that reach HEAD_BYTES: the capture a reader of the file would take.
            if not self.indexed:
                pass  # no index: no lines, no runs
            elif len(warc_head) + len(head) + 4 >= cdxj.HEAD_BYTES:
                current.note(cdxj.capture(record[: cdxj.HEAD_BYTES]), offset, len(response))
            else:
                current.note(found, offset, len(response))
            self._records += 3 if metadata else 2
            where = WarcLocation(current.final_name, offset, len(response), response_id, when)
            finished = self._finish() if current.size >= self.max_file_bytes else None
        if finished is not None and self.indexed:
            finished.index()
        return where

    def write_record(self, fields: Sequence[tuple[str, str]], block: bytes) -> WarcLocation:
        """Append one record of ``fields`` (WARC-Type, WARC-Record-ID and WARC-Date first;
        Content-Length is added) and ``block``; return once it is in the kernel. Its
        gzip member is made before the lock is taken."""
        record = gzip_member(warc_record(fields, block), self.gzip_level)
        with self._lock:
            current = self._file if self._file is not None else self._open()
            offset = current.size
            current.write(record)
            self._records += 1
            where = WarcLocation(current.final_name, offset, len(record))
            finished = self._finish() if current.size >= self.max_file_bytes else None
        if finished is not None and self.indexed:
            finished.index()
        return where

    def _open(self) -> _FileState:
        started = self._now()
        stamp = datetime.fromtimestamp(started, UTC).strftime("%Y%m%d%H%M%S")
        final_name = f"{self.prefix}-{stamp}-{self._seq:05d}{self.suffix}"
        self._seq += 1
        info_id = record_id()
        fields = head_lines("", [
            ("software", self.software),
            ("format", "WARC File Format 1.1"),
            ("conformsTo", CONFORMS_TO),
            ("hostname", socket.gethostname()),
            *self.info,
        ])[2:] + b"\r\n"
        record = warc_record(
            [
                ("WARC-Type", "warcinfo"),
                ("WARC-Record-ID", info_id),
                ("WARC-Date", warc_date(started)),
                ("WARC-Filename", final_name),
                ("Content-Type", "application/warc-fields"),
                ("WARC-Block-Digest", sha1_digest(fields)),
            ],
            fields,
        )
        state = _FileState(self.directory / (final_name + OPEN_SUFFIX), final_name, info_id)
        try:
            state.write(gzip_member(record, self.gzip_level))
        except OSError:
            state.discard()
            raise
        self._file = state
        self._files += 1
        self._records += 1
        return state

    def _finish(self) -> _FileState | None:
        """Finish the current file; it is to be indexed outside the lock."""
        current = self._file
        if current is None:
            return None
        self._file = None
        self._bytes += current.size
        current.finish()
        _fsync_dir(self.directory)
        return current

    def close(self) -> None:
        """Finish the current file (fsync, rename to ``*.warc.gz``).

        A later write opens a new file."""
        with self._lock:
            finished = self._finish()
        if finished is not None and self.indexed:
            finished.index()

    def stats(self) -> dict[str, int]:
        """Records written (warcinfo included), compressed bytes written, files opened."""
        with self._lock:
            open_bytes = self._file.size if self._file is not None else 0
            return {
                "warc/records": self._records,
                "warc/bytes": self._bytes + open_bytes,
                "warc/files": self._files,
            }

    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _FileState:
    """The open ``.open`` file: unbuffered, created exclusively, its size tracked, and the
    index lines of its records. At most CAPTURE_RUN lines wait in memory: past that they
    are sorted into a run file beside the WARC (``<name>.cdxj-run-NNNNN``), and the index
    written at close merges the runs, so a worker's memory does not follow the size of its
    open file (a few hundred bytes a record, 0.1 GB at ``max_file_bytes`` = 1 GB of pages
    once). A crash leaves runs behind: the next start removes them when it recovers the
    file, which it indexes by reading it."""

    def __init__(self, path: Path, final_name: str, info_id: str) -> None:
        self.path = path
        self.final_name = final_name
        self.info_id = info_id
        self.size = 0
        self.lines: list[str] = []
        self.runs: list[Path] = []
        self._made = 0  # run files made, for their names
        self._raw = open(path, "xb", buffering=0)  # noqa: SIM115 - closed in finish()

    def write(self, data: bytes) -> None:
        """Append data whole, or (on an error such as a full disk) not at all, then re-raise."""
        view = memoryview(data)
        try:
            while view:
                view = view[self._raw.write(view) :]
        except OSError:
            self._raw.truncate(self.size)
            self._raw.seek(self.size)
            raise
        self.size += len(data)

    def note(self, found: cdxj.Capture | None, offset: int, length: int) -> None:
        """Keep the index line of the record just written at offset, length bytes long."""
        if found is None:
            return
        self.lines.append(cdxj.line(found, offset, length, self.final_name))
        if len(self.lines) < CAPTURE_RUN:
            return
        self.runs.append(cdxj.write_run(self._next_run(), self.lines))
        self.lines = []
        if len(self.runs) >= cdxj.MERGE_FAN_IN:  # the close merges them all at once
            merged = self._next_run()
            cdxj.merge_files(self.runs, merged)
            self.runs = [merged]

    def _next_run(self) -> Path:
        self._made += 1
        return run_path(self.path, self.final_name, self._made)

    def discard(self) -> None:
        self._raw.close()
        self.path.unlink()

    def finish(self) -> None:
        os.fsync(self._raw.fileno())
        self._raw.close()
        self.path.rename(self.path.with_name(self.final_name))

    def index(self) -> None:
        """Write the index of the finished file from its lines and runs."""
        lines, runs = self.lines, self.runs
        self.lines, self.runs = [], []
        index_beside(self.path.with_name(self.final_name), lines, runs)

