"""CDXJ indexes of WARC files: the sorted lines a replay tool (pywb) looks captures up by.

This module owns the index format and how it is read out of a WARC. Policy:

* **One line per capture**: a ``response``, ``revisit``, ``resource`` or ``metadata``
  record, except a resource or metadata record of ``application/warc-fields`` (the
  records webrecorder's ``cdxj-indexer`` indexes by default). A line is the SURT key
  of the target URI, the 14-digit timestamp of ``WARC-Date`` (fraction dropped) and a
  JSON object of ``url``, ``mime``, ``status``, ``digest``, ``length``, ``offset`` and
  ``filename`` (a field with no value is left out), written exactly as
  ``cdxj-indexer`` writes them, so that pywb finds a capture by the key it computes
  itself. ``mime`` is the HTTP Content-Type (the record's for a resource or metadata
  record; ``warc/revisit`` for a revisit) up to its first ``;`` or space; ``length``
  and ``offset`` are the record's gzip member in the file. ``digest`` is the record's
  ``WARC-Payload-Digest``, which hive writes on every response (a record without one
  gets no digest; cdxj-indexer would compute it).
* **SURT keys are the ``surt`` package's**, the implementation pywb and
  cdxj-indexer call: its canonicalization (``www`` dropped, query sorted, session ids
  stripped) is what a lookup repeats, so a key that differs in one case would make a
  capture unfindable. It costs about 35 us a URL, so the URLs most crawls are made of
  (``_PLAIN``: http or https, a host name of ASCII letters, digits and hyphens, a path
  and query of characters that none of its rules touches, no dot segment, no empty
  segment, no session-id name in the query) get their key from :func:`_plain_key`,
  which applies the very rules that change such a URL (lowercasing, ``www``-stripping,
  default-port and trailing-slash dropping, query sorting) in a few microseconds; every
  other URL goes to ``surt``. tests/unit/test_cdxj_keys.py holds the two equal on
  generated URLs at and around that boundary.
* **Lines are sorted** as strings, as pywb's binary search needs and
  ``cdxj-indexer --sort`` writes them; a merged index is merged from sorted indexes
  one line at a time (:func:`merge`).
* **Only whole records are indexed**: the file is read one gzip member (one record,
  as hive writes them) at a time, and reading stops at the first torn or corrupt
  member, so a file cut by a crash is indexed up to its last whole record and the
  result says how many bytes were skipped. A member's inflated output is kept only
  up to ``HEAD_BYTES`` (the WARC and HTTP heads): memory does not follow record size.
  A record whose heads do not fit is indexed without status and mime.
* **Two ways to a file's lines, one code path**: :func:`index_file` reads them out of a
  WARC; the writer (hive.fetch.warc) takes each response's capture as it writes it and
  adds the position (:func:`line`) at close, so a finished file costs no second read.
  The writer gives :func:`exchange_capture` the WARC fields it wrote and the HTTP head
  it stored (the function :func:`capture` ends in when it reads), or, when the heads
  reach HEAD_BYTES, the record's first bytes to :func:`capture`: the lines are the
  same (tests/io/test_cdxj.py compares them, odd records and the boundary included).
  The ``surt`` package (it imports tldextract and requests, about 0.25 CPU-s) is
  imported at the first key :func:`_plain_key` cannot compute.
* **A crawl's index** (``hive index``) is built from its WARCs alone, those a crash
  left ``.open`` included (under that name, which recovery later drops), so it
  can be rebuilt at any time; the indexes beside the WARCs are not read.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _json_string
from pathlib import Path
from typing import IO, NamedTuple, cast

from isal import isal_zlib

__all__ = [
    "HEAD_BYTES", "Capture", "FileIndex", "build_index", "capture", "crawl_warcs",
    "exchange_capture", "index_file", "index_path", "line", "merge", "url_key", "write_beside",
    "write_lines",
]

HEAD_BYTES = 1 << 16
SUFFIX = ".cdxj"
WARC_SUFFIX = ".warc.gz"
# Sorted runs one merge reads at once: one open file each, well under the usual limit of 1024.
MERGE_FAN_IN = 128
_PIECE = 1 << 16
_INDEXED = frozenset({"response", "revisit", "resource", "metadata"})
_MIME_END = re.compile(r"[;\s]")
_HEAD_END = b"\r\n\r\n"
_NOT_DIGIT = re.compile(r"\D")
# isal's stubs declare its error as an instance, not a class.
_INFLATE_ERROR = cast(type[Exception], isal_zlib.error)


@dataclass(slots=True)
class FileIndex:
    """The index lines of one WARC file, sorted, and what could not be read.

    ``skipped_bytes``: bytes past ``whole_bytes`` (the end of the last whole record)
    that are not a whole gzip member: a torn or corrupt tail."""

    filename: str
    lines: list[str] = field(default_factory=list)
    records: int = 0
    whole_bytes: int = 0
    skipped_bytes: int = 0


def members(f: IO[bytes]) -> Iterator[tuple[int, int, bytes]]:
    """(offset, length, first inflated bytes up to HEAD_BYTES) of each whole gzip member
    of f from its start, stopping at the first torn or corrupt one."""
    offset = fed = 0  # fed: bytes read from the member's start on
    pending = b""
    while True:
        inflater = isal_zlib.decompressobj(31)
        head = b""
        while not inflater.eof:
            if not pending:
                pending = f.read(_PIECE)
                if not pending:
                    return
                fed += len(pending)
            try:
                # max_length bounds what one call returns, whatever the compression ratio.
                out = inflater.decompress(pending, _PIECE)
            except _INFLATE_ERROR:
                return
            pending = inflater.unconsumed_tail
            if len(head) < HEAD_BYTES:
                head += out[: HEAD_BYTES - len(head)]
        pending = inflater.unused_data
        length = fed - len(pending)
        yield offset, length, head
        offset += length
        fed = len(pending)


def _fields(head: bytes) -> dict[str, str]:
    """The ``Name: value`` lines of a message head (first line excluded), names
    lowercased, the first occurrence of a name kept."""
    text = head.decode("utf-8", "replace") if not head.isascii() else head.decode("ascii")
    found: dict[str, str] = {}
    for line in text.split("\r\n")[1:]:
        name, colon, value = line.partition(":")
        if colon:
            found.setdefault(name.strip().lower(), value.strip())
    return found


def _timestamp(warc_date: str) -> str:
    """The 14 digits of a WARC-Date (``2024-05-01T12:00:00.25Z`` -> ``20240501120000``)."""
    digits = (warc_date[:4] + warc_date[5:7] + warc_date[8:10] + warc_date[11:13]
              + warc_date[14:16] + warc_date[17:19])
    # The usual form: its first 19 characters hold all 14 digits, the rest none that count.
    if warc_date[4:17:3] == "--T::" and digits.isascii() and digits.isdigit() and len(digits) == 14:
        return digits
    return _NOT_DIGIT.sub("", warc_date.partition(".")[0])[:14].ljust(14, "0")


def _content_type(block: bytes, start: int, end: int) -> str | None:
    """``_fields(block[start:end]).get("content-type")``, block[start:end] being the header
    lines of an HTTP head (from the CRLF that ends its first line) without the parse.

    A line whose name is ``content-type`` (stripped and lowercased, as _fields reads it)
    holds those bytes in the lowercased block: no decoding makes them out of others,
    and no other character lowercases into them. So with no occurrence there is no such
    line, and with one occurrence that starts a line and meets its colon, that line is the
    first; any other block is parsed."""
    lowered = block[start:end].lower()
    count = lowered.count(b"content-type")
    if count == 0:
        return None
    at = lowered.find(b"\r\ncontent-type:")
    if count > 1 or at < 0:
        return _fields(block[start:end]).get("content-type")
    value_start = start + at + 15
    value_end = block.find(b"\r\n", value_start, end)
    value = block[value_start : end if value_end < 0 else value_end]
    return (value.decode("ascii") if value.isascii() else value.decode("utf-8", "replace")).strip()


# A URL whose key _plain_key computes: surt's rules leave its characters alone (no
# percent-escape, no ';' or '(' of a session id, nothing it escapes) and its host is no IP
# address form (the last label starts with a letter).
_SAFE = r"[A-Za-z0-9._~!$'*+,=:@&/-]"
_PLAIN = re.compile(
    rf"(https?)://((?:[A-Za-z0-9-]+\.)*[A-Za-z][A-Za-z0-9-]*)(?::([1-9][0-9]{{0,4}}))?"
    rf"(/{_SAFE}*)?(?:\?({_SAFE}+))?"
)
_DOT_OR_EMPTY_SEGMENT = re.compile(r"//|/\.\.?(?:/|$)")
_WWW = re.compile(r"www\d*\.")
_QUERY_SESSION = ("sid", "session", "cfid")
_DEFAULT_PORT = {"http": 80, "https": 443}


def _plain_key(url: str) -> str | None:
    """The SURT key of a URL of the common form (``_PLAIN``), None for any other."""
    match = _PLAIN.fullmatch(url)
    if match is None:
        return None
    scheme, host, port, path, query = match.groups()
    if path and _DOT_OR_EMPTY_SEGMENT.search(path):
        return None
    host = host.lower()
    www = _WWW.match(host)
    if www:
        host = host[www.end() :]
    key = ",".join(reversed(host.split(".")))
    if port is not None:
        number = int(port)
        if number > 65535:
            return None
        if number != _DEFAULT_PORT[scheme]:
            key += f":{number}"
    path = path.lower() if path else "/"
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    key += ")" + path
    if query is not None:
        query = query.lower()
        if any(name in query for name in _QUERY_SESSION):
            return None
        # As surt sorts: by (name,) or (name, value), so "a" sorts before "a=".
        pairs = sorted(tuple(arg.split("=", 1)) for arg in query.split("&"))
        key += "?" + "&".join("=".join(pair) for pair in pairs)
    return key


def url_key(url: str) -> str:
    """The SURT key of url, as pywb computes it; the URL itself if surt refuses it."""
    plain = _plain_key(url)
    if plain is not None:
        return plain
    import surt  # noqa: PLC0415 - imported at the first key it computes (module docstring)

    try:
        return str(surt.surt(url))
    except Exception:  # noqa: BLE001 - surt raises anything on odd URLs; cdxj-indexer does this
        return url


class Capture(NamedTuple):
    """What an index line says of a record but where it is: its target URI, the 14-digit
    timestamp and the line's JSON object up to its position fields (closing brace left
    out)."""

    url: str
    timestamp: str
    fields: str


def capture(head: bytes) -> Capture | None:
    """The capture of a record from its start as written (up to HEAD_BYTES of it, the WARC
    head and, for a response or revisit, the HTTP head); None if it is not indexed."""
    warc_end = head.find(_HEAD_END)
    if not head.startswith(b"WARC/") or warc_end < 0:
        return None
    warc = _fields(head[:warc_end])
    kind = warc.get("warc-type", "")
    record_type = warc.get("content-type")
    if kind not in _INDEXED or (
        kind in ("resource", "metadata") and record_type == "application/warc-fields"
    ):
        return None
    url, date = warc.get("warc-target-uri", ""), warc.get("warc-date", "")
    digest = warc.get("warc-payload-digest")
    if kind in ("response", "revisit"):
        return exchange_capture(kind, url, date, digest, head[warc_end + 4 :])
    return _capture(url, date, record_type, None, digest)


def exchange_capture(
    kind: str, url: str, date: str, digest: str | None, block: bytes
) -> Capture:
    """The capture of a response or revisit record: its WARC-Target-URI, WARC-Date and
    WARC-Payload-Digest values, and its block's start (the HTTP head, whole if it ends
    within the record's first HEAD_BYTES). The writer calls it with the fields it writes,
    sparing the parse of a WARC head it made itself."""
    mime: str | None = None
    status: str | None = None
    http_end = block.find(_HEAD_END)
    if block.startswith(b"HTTP/") and http_end >= 0:
        line_end = block.find(b"\r\n")
        words = block[:line_end].decode("latin-1").split(" ", 2)
        status = words[1] if len(words) > 1 else None
        mime = _content_type(block, line_end, http_end)
    if kind == "revisit":
        mime = "warc/revisit"
    return _capture(url, date, mime, status, digest)


def _capture(
    url: str, date: str, mime: str | None, status: str | None, digest: str | None
) -> Capture:
    # As json.dumps writes the object (ensure_ascii, ", " and ": "), without its overhead.
    fields = '{"url": ' + _json_string(url)
    if mime is not None:
        fields += ', "mime": ' + _json_string(_MIME_END.split(mime, 1)[0].strip())
    if status is not None:
        fields += ', "status": ' + _json_string(status)
    if digest is not None:
        fields += ', "digest": ' + _json_string(digest)
    return Capture(url, _timestamp(date), fields)


def line(found: Capture, offset: int, length: int, filename: str) -> str:
    """The index line of a capture whose record is the gzip member at offset, length bytes
    long, of the file named filename."""
    return (f'{url_key(found.url)} {found.timestamp} {found.fields}, "length": "{length}", '
            f'"offset": "{offset}", "filename": {_json_string(filename)}}}\n')


def index_file(path: Path, filename: str | None = None) -> FileIndex:
    """The sorted index lines of the WARC at path, named ``filename`` (default: its name)."""
    result = FileIndex(filename or path.name)
    size = path.stat().st_size
    with path.open("rb") as f:
        for offset, length, head in members(f):
            result.whole_bytes = offset + length
            found = capture(head)
            if found is not None:
                result.lines.append(line(found, offset, length, result.filename))
                result.records += 1
    result.skipped_bytes = size - result.whole_bytes
    result.lines.sort()
    return result


def index_path(warc_path: Path) -> Path:
    """Where the index of a finished WARC goes: beside it, ``.warc.gz`` -> ``.cdxj``."""
    return warc_path.with_name(warc_path.name.removesuffix(".gz").removesuffix(".warc") + SUFFIX)


def write_beside(warc_path: Path) -> FileIndex:
    """Index a finished WARC into :func:`index_path` by reading it."""
    index = index_file(warc_path)
    write_lines(warc_path, index.lines)
    return index


def write_run(path: Path, lines: list[str]) -> Path:
    """Sort ``lines`` into a run file at ``path`` (merged later by :func:`write_lines`)."""
    lines.sort()
    with path.open("w", encoding="utf-8") as out:
        out.writelines(lines)
    return path


def write_lines(warc_path: Path, lines: list[str], runs: Sequence[Path] = ()) -> None:
    """Write a finished WARC's index lines, sorted here, merged with the sorted ``runs``
    (:func:`write_run`), into :func:`index_path` (written whole, then renamed)."""
    lines.sort()
    final = index_path(warc_path)
    partial = final.with_name(final.name + ".part")
    with contextlib.ExitStack() as stack:
        sources = [stack.enter_context(run.open(encoding="utf-8")) for run in runs]
        with partial.open("w", encoding="utf-8") as out:
            merge([lines, *sources], out)
            out.flush()
            os.fsync(out.fileno())
    partial.replace(final)


def merge(indexes: Iterable[Iterable[str]], out: IO[str]) -> int:
    """Write the merge of sorted index line streams to out; returns the lines written."""
    count = 0
    for line in heapq.merge(*indexes):
        out.write(line)
        count += 1
    return count


def crawl_warcs(warc_dir: Path) -> list[Path]:
    """A crawl's WARC files, finished (``*.warc.gz``) and left open by a crash (``.open``)."""
    found = [*warc_dir.glob("*" + WARC_SUFFIX), *warc_dir.glob(f"*{WARC_SUFFIX}.open")]
    return sorted(path for path in found if path.is_file())


def build_index(warcs: Sequence[Path], out_path: Path) -> tuple[list[FileIndex], int]:
    """Index each WARC and write one sorted index of them all to out_path (written whole,
    then renamed). Each file's lines wait in a temporary file beside out_path, and the
    merge reads at most ``MERGE_FAN_IN`` of them at a time, so memory follows the largest
    WARC, not the crawl. Returns each file's index (lines dropped) and the lines written."""
    partial = out_path.with_name(out_path.name + ".part")
    with tempfile.TemporaryDirectory(prefix=".hive-index-", dir=out_path.parent) as scratch:
        runs: list[Path] = []
        results = []
        for warc in warcs:
            index = index_file(warc)
            run = Path(scratch) / f"{len(runs):06d}"
            run.write_text("".join(index.lines), encoding="utf-8")
            runs.append(run)
            index.lines = []
            results.append(index)
        while len(runs) > MERGE_FAN_IN:
            group, runs = runs[:MERGE_FAN_IN], runs[MERGE_FAN_IN:]
            merged = Path(scratch) / f"m{len(runs):06d}-{group[0].name}"
            merge_files(group, merged)
            runs.append(merged)
        count = merge_files(runs, partial)
    partial.replace(out_path)
    return results, count


def merge_files(runs: Sequence[Path], out_path: Path) -> int:
    with contextlib.ExitStack() as stack:
        sources = [stack.enter_context(run.open(encoding="utf-8")) for run in runs]
        with out_path.open("w", encoding="utf-8") as out:
            count = merge(sources, out)
            out.flush()
            os.fsync(out.fileno())
    for run in runs:
        if run != out_path:
            run.unlink(missing_ok=True)
    return count
