"""``hive export --format wacz``: the crawl as one WACZ 1.1.1 package for replay tools.

A WACZ (webrecorder's Web Archive Collection Zipped) is a ZIP of::

    archive/<name>.warc.gz     each closed WARC of the crawl, stored (not deflated), so a
                               replay tool reads a record by its offset in the ZIP
    indexes/index.cdx.gz       the crawl's CDXJ lines, merged in sort order, as a ZipNum
                               index: blocks of ``BLOCK_LINES`` lines, a gzip member each
    indexes/index.idx          the first key of each block and where it is (offset, length),
                               after a ``!meta`` line naming the format
    pages/pages.jsonl          a header line, then one line per HTML page (a URL's latest
                               2xx response of text/html or application/xhtml+xml): its
                               record's id, URL, WARC-Date and ``<title>`` (hive.export.records)
    datapackage.json           each file above: path, size and SHA-256 of its bytes
    datapackage-digest.json    the SHA-256 of datapackage.json

as the WACZ 1.1.1 specification lays it out and ``wacz validate`` (PyPI ``wacz``) checks.
The index lines are the CDXJ indexes beside the WARCs (hive/fetch/cdxj.py), whose
``filename`` is the WARC's name, which is its name under ``archive/``. A file still open
is left out, as everywhere in ``hive export``; so is its index.

Streaming: a WARC is copied in pieces, each file's hash taken as it is written; the
index is merged from the sorted indexes, at most ``cdxj.MERGE_FAN_IN`` open at once
(more are merged in rounds through a scratch directory beside the output), one block
held at a time; pages are read one record at a time, from the merged index again (a
URL's captures side by side), at most ``cdxj.MERGE_FAN_IN`` WARCs open. The package is written as
``.part`` and renamed when whole. Writing needs nothing outside the standard library.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import heapq
import json
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from hive import __version__
from hive.errors import HiveError
from hive.export import records
from hive.export.captures import Tally, closed_warcs, index_lines, parse_line
from hive.fetch import cdxj
from hive.storage.datadir import DataDir

WACZ_VERSION = "1.1.1"
BLOCK_LINES = 3000  # cdxj-indexer's and py-wacz's ZipNum block
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_PIECE = 1 << 20
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class _Resources:
    """The ZIP being written and what datapackage.json says of each file in it."""

    def __init__(self, zf: zipfile.ZipFile, when: datetime) -> None:
        self.zf = zf
        self.when = when.timetuple()[:6]
        self.listed: list[dict[str, Any]] = []

    @contextlib.contextmanager
    def entry(self, path: str, stored: bool) -> Iterator[_Hashing]:
        info = zipfile.ZipInfo(path, self.when)
        info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
        with self.zf.open(info, "w", force_zip64=True) as raw:
            out = _Hashing(raw)
            yield out
        self.listed.append({"name": path.rsplit("/", 1)[-1].lower(), "path": path,
                            "hash": f"sha256:{out.sha256.hexdigest()}", "bytes": out.size})


class _Hashing:
    """A writer that takes the SHA-256 and size of what goes through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw, self.sha256, self.size = raw, hashlib.sha256(), 0

    def write(self, data: bytes) -> None:
        self.raw.write(data)
        self.sha256.update(data)
        self.size += len(data)


def _merged(warcs: Sequence[Path], scratch: Path, tally: Tally) -> Iterator[str]:
    """The index lines of ``warcs`` in sort order, at most MERGE_FAN_IN files open at once."""
    runs: list[Path] = []
    for warc in warcs:
        beside = cdxj.index_path(warc)
        if not beside.is_file():  # closed, not indexed yet: as hive index would, read it
            beside = scratch / f"i{len(runs):06d}"
            beside.write_text("".join(index_lines(warc, tally)), encoding="utf-8")
        runs.append(beside)
    rounds = 0
    while len(runs) > cdxj.MERGE_FAN_IN:
        group, runs = runs[: cdxj.MERGE_FAN_IN], runs[cdxj.MERGE_FAN_IN :]
        merged = scratch / f"m{rounds:06d}"
        rounds += 1
        with contextlib.ExitStack() as stack, merged.open("w", encoding="utf-8") as out:
            cdxj.merge([stack.enter_context(run.open(encoding="utf-8")) for run in group], out)
        runs.append(merged)
    with contextlib.ExitStack() as stack:
        yield from heapq.merge(*[stack.enter_context(run.open(encoding="utf-8")) for run in runs])


def _write_index(package: _Resources, lines: Iterator[str], scratch: Path) -> int:
    """Write the ZipNum index of ``lines``: the blocks, then their .idx; returns the lines."""
    idx = scratch / "index.idx"
    count = offset = 0
    with idx.open("w", encoding="utf-8") as blocks, \
            package.entry("indexes/index.cdx.gz", stored=True) as out:
        meta = {"format": "cdxj-gzip-1.0", "filename": "index.cdx.gz"}
        blocks.write(f"!meta 0 {json.dumps(meta)}\n")
        block: list[str] = []

        def flush() -> None:
            nonlocal offset
            data = gzip.compress("".join(block).encode("utf-8"), mtime=0)
            prefix = block[0].split(" {", 1)[0]
            blocks.write(f"{prefix} {json.dumps({'offset': offset, 'length': len(data)})}\n")
            out.write(data)
            offset += len(data)
            block.clear()

        for line in lines:
            block.append(line)
            count += 1
            if len(block) == BLOCK_LINES:
                flush()
        if block:
            flush()
    with package.entry("indexes/index.idx", stored=False) as out, idx.open("rb") as f:
        while piece := f.read(_PIECE):
            out.write(piece)
    return count


def _page_captures(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Of merged index lines (a URL's captures side by side), each URL's latest capture
    that is an HTML page answered with a 2xx."""
    last: dict[str, Any] | None = None
    for number, text in enumerate(lines, 1):
        try:
            found = parse_line(text).fields
        except ValueError as exc:
            raise HiveError(f"line {number} of the merged index: {exc}") from exc
        if last is not None and found["url"] != last["url"]:
            yield last
            last = None
        if found.get("mime") in HTML_TYPES and found.get("status", "").startswith("2"):
            last = found
    if last is not None:
        yield last


def _pages(lines: Iterator[str], warc_dir: Path, tally: Tally) -> Iterator[dict[str, str]]:
    """A pages.jsonl line for each HTML page of the merged index ``lines``: its id (the
    record's), URL, WARC-Date and title. The WARCs are read with at most
    ``cdxj.MERGE_FAN_IN`` of them open."""
    with contextlib.ExitStack() as stack:
        handles: dict[str, IO[bytes]] = {}
        for found in _page_captures(lines):
            name = found["filename"]
            f = handles.get(name)
            if f is None:
                if len(handles) >= cdxj.MERGE_FAN_IN:
                    handles.pop(next(iter(handles))).close()
                f = handles[name] = stack.enter_context((warc_dir / name).open("rb"))
            record = records.read(f, int(found["offset"]), int(found["length"]),
                                  records.PAGE_BYTES)
            if record is None:
                tally.unreadable_heads += 1
                continue
            record_id = record.warc.get("warc-record-id", "").strip("<>")
            page = {"id": record_id.removeprefix("urn:uuid:"), "url": found["url"],
                    "ts": record.warc.get("warc-date", "")}
            title = record.title()
            if title is not None:
                page["title"] = title
            yield page


def export(data: Path, out: Path, tally: Tally) -> int:
    """Write the crawl in ``data`` as a WACZ package at ``out``; returns the pages listed."""
    dd = DataDir(data)
    warcs, still_open = closed_warcs(dd)
    tally.open_warcs = [path.name for path in still_open]
    tally.warcs = len(warcs)
    created = datetime.now(UTC).replace(microsecond=0)
    partial = out.with_name(out.name + ".part")
    pages = 0
    try:
        with tempfile.TemporaryDirectory(prefix=".hive-export-", dir=out.parent) as scratch, \
                zipfile.ZipFile(partial, "w", allowZip64=True) as zf:
            package = _Resources(zf, created)
            for warc in warcs:
                with package.entry(f"archive/{warc.name}", stored=True) as target, \
                        warc.open("rb") as source:
                    while piece := source.read(_PIECE):
                        target.write(piece)
            tally.captures = _write_index(package, _merged(warcs, Path(scratch), tally),
                                          Path(scratch))
            with package.entry("pages/pages.jsonl", stored=False) as target:
                header = {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}
                target.write((json.dumps(header) + "\n").encode())
                merged = _merged(warcs, Path(scratch), Tally())
                for page in _pages(merged, dd.warc, tally):
                    target.write((json.dumps(page, ensure_ascii=False) + "\n").encode())
                    pages += 1
            described = json.dumps({
                "profile": "data-package",
                "resources": package.listed,
                "wacz_version": WACZ_VERSION,
                "title": f"hive crawl {dd.root.resolve().name}",
                "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "software": f"hive {__version__}",
            }, indent=2).encode()
            digest = {"path": "datapackage.json",
                      "hash": f"sha256:{hashlib.sha256(described).hexdigest()}"}
            deflated = zipfile.ZIP_DEFLATED
            zf.writestr(zipfile.ZipInfo("datapackage.json", package.when), described, deflated)
            zf.writestr(zipfile.ZipInfo("datapackage-digest.json", package.when),
                        json.dumps(digest, indent=2), deflated)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(out)
    return pages
