"""A recrawl's plan: what the prior crawls knew of each URL they fetched, from their WARCs
and crawl logs, as one ``Prior`` (hive.core.prior) a line.

``hive start --data crawl2 --recrawl-from crawl1`` writes it into crawl2's data
directory (``recrawl.jsonl``) before the hive starts; each worker queues the URLs of its
hosts from it (hive.procs.plan). Where the facts come from:

* **The captures** of each prior crawl (hive.export.captures: its closed WARCs by their
  CDXJ indexes, each joined to its crawl-log line): a URL is planned if a crawl has a
  response or revisit record of it, whatever its status (a 404 then is a 404 to compare
  with); robots.txt, fetched as a prerequisite and never queued, is not. Failures
  without a response (a timeout) have no record and are not planned: found again, they
  are fetched as new. A crawl's WARCs still open (a running crawl, or one killed and not
  restarted) are left out and counted.
* **From its crawl-log line**: the depth, hop path and the URL it was found on, and what
  it was fetched as (a sitemap or feed by its outcome).
* **From its record's heads** (hive.export.records): the WARC-Date and record ID of the
  capture that holds its payload (a revisit's: the original it refers to), its payload
  digest, its HTTP head (past MAX_HEAD bytes none is kept) and the validators in it
  (``ETag``, ``Last-Modified``; past MAX_VALIDATOR bytes, not kept nor sent).
* **Its history**, when several crawls are given (oldest first, newest last): each crawl
  that captured the URL is one observation; two in a row with another payload digest or
  status are one change; ``span`` runs from the first to the last. The oldest crawl's own
  plan, if it was a recrawl, gives the history before it, so a chain of recrawls each
  naming only the last keeps the whole history.

A URL's last capture wins within a crawl (a URL fetched again after a crash). Memory
does not follow the crawls: captures go through a scratch SQLite database on disk, joined
to the history MERGE_BATCH URLs at a time, and the plan is written from it sorted by URL,
through ``.part``, renamed when whole. It costs about 0.2 ms a capture (bench/README.md,
"Crawl again").
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

from hive.core.prior import Prior, read_plan
from hive.core.record import FEED, PAGE, SITEMAP
from hive.errors import HiveError
from hive.export import captures, records
from hive.storage.datadir import DataDir

# A prior head longer than this is not kept (a 304's revisit then keeps the 304's own).
MAX_HEAD = 8 << 10
# A validator longer than this is not kept (nor sent): real ones are tens of bytes, and a
# server's request-header limit is a few KB.
MAX_VALIDATOR = 1024
# The scratch database's page cache, in KiB; URLs merged into the plan at a time.
CACHE_KIB = 64 << 10
MERGE_BATCH = 5000
_ROBOTS_OUTCOMES = ("robots_ok", "robots_stale", "robots_retry")


@dataclass
class PlanTally:
    """What a plan was made of."""

    crawls: int = 0
    captures: int = 0
    planned: int = 0
    skipped_robots: int = 0
    unreadable_heads: int = 0
    open_warcs: list[str] = field(default_factory=list)


def check_source(path: Path, data_dir: Path) -> DataDir:
    """A prior crawl's data directory, or a HiveError naming what is wrong with it."""
    if not path.is_dir():
        raise HiveError(f"--recrawl-from {path}: not a directory")
    if path.resolve() == data_dir.resolve():
        raise HiveError(f"--recrawl-from {path}: is the data directory of this crawl")
    dd = DataDir(path)
    if not dd.warc.is_dir() or not any(dd.warc.glob("*.warc.gz")):
        raise HiveError(f"--recrawl-from {path}: holds no closed WARC file (warc/*.warc.gz): "
                        "a recrawl reads what a crawl archived")
    return dd


def build_plan(sources: list[Path], data_dir: Path, out: Path) -> PlanTally:
    """Write the plan of the prior crawls ``sources`` (oldest first) to ``out``."""
    dds = [check_source(path, data_dir) for path in sources]
    tally = PlanTally()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".hive-plan-", dir=out.parent) as scratch:
        db = sqlite3.connect(Path(scratch) / "plan.sqlite")
        try:
            db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            db.execute("PRAGMA journal_mode = OFF")
            db.execute("PRAGMA synchronous = OFF")
            db.execute("CREATE TABLE plan (url TEXT PRIMARY KEY, prior TEXT)")
            db.execute("CREATE TABLE crawl (url TEXT PRIMARY KEY, prior TEXT)")
            first_plan = DataDir(sources[0]).recrawl_plan
            if first_plan.is_file():
                _load_plan(db, first_plan)
            for dd in dds:
                tally.crawls += 1
                db.execute("DELETE FROM crawl")
                for prior in _captured(dd, Path(scratch), tally):
                    db.execute("INSERT OR REPLACE INTO crawl VALUES (?, ?)",
                               (prior.url, prior.encode().decode()))
                _merge(db)
            part = out.with_name(out.name + ".part")
            with part.open("w", encoding="utf-8") as f:
                for (text,) in db.execute("SELECT prior FROM plan ORDER BY url"):
                    f.write(text + "\n")
                    tally.planned += 1
            part.replace(out)
        finally:
            db.close()
    return tally


def _load_plan(db: sqlite3.Connection, path: Path) -> None:
    """The history a recrawl's own plan held, before its crawl."""
    with path.open("rb") as f:
        for _, prior, _ in read_plan(f):
            if prior is not None:
                db.execute("INSERT OR REPLACE INTO plan VALUES (?, ?)",
                           (prior.url, prior.encode().decode()))


def _merge(db: sqlite3.Connection) -> None:
    """One crawl's captures into the plan: each an observation of its URL's history. Read
    MERGE_BATCH URLs at a time, in URL order, so memory does not follow the crawl."""
    last = ""
    while True:
        rows = db.execute(
            "SELECT crawl.url, crawl.prior, plan.prior FROM crawl LEFT JOIN plan "
            "ON plan.url = crawl.url WHERE crawl.url > ? ORDER BY crawl.url LIMIT ?",
            (last, MERGE_BATCH)).fetchall()
        if not rows:
            return
        for url, now_text, before_text in rows:
            now = Prior.decode(now_text)
            if before_text is not None:
                before = Prior.decode(before_text)
                differs = now.digest != before.digest or now.status != before.status
                now = replace(now, seen=before.seen + 1, changed=before.changed + differs,
                              span=before.span + max(now.last - before.last, 0.0))
            db.execute("INSERT OR REPLACE INTO plan VALUES (?, ?)", (url, now.encode().decode()))
        last = rows[-1][0]


def _captured(dd: DataDir, scratch: Path, tally: PlanTally) -> Iterator[Prior]:
    """A Prior of each capture of the crawl in ``dd``, in the order of its WARCs."""
    seen = captures.Tally()
    files: dict[str, IO[bytes]] = {}
    with contextlib.ExitStack() as stack:
        for row in captures.rows(dd, scratch, seen):
            if row.record_type is None or row.filename is None:
                continue
            if row.outcome in _ROBOTS_OUTCOMES or (
                    row.outcome is None and row.url.endswith("/robots.txt")):
                tally.skipped_robots += 1
                continue
            tally.captures += 1
            f = files.get(row.filename)
            if f is None:
                f = files[row.filename] = stack.enter_context((dd.warc / row.filename).open("rb"))
            assert row.offset is not None and row.length is not None
            record = records.read(f, row.offset, row.length)
            if record is None:
                tally.unreadable_heads += 1
                continue
            yield _prior(row, record)
    tally.open_warcs += seen.open_warcs


def _prior(row: captures.Row, record: records.Record) -> Prior:
    warc, http = record.warc, record.http
    outcome = row.outcome or ""
    kind = SITEMAP if outcome.startswith("sitemap_") else FEED if outcome.startswith(
        "feed_") else PAGE
    refers = warc.get("warc-refers-to-target-uri")
    head = "\r\n".join([record.status_line, *record.http_lines])
    return Prior(
        url=row.url, depth=row.depth or 0, path=row.hop or "", via=row.via or "", kind=kind,
        date=warc.get("warc-refers-to-date", "") if refers else warc.get("warc-date", ""),
        record_id=warc.get("warc-refers-to", "") if refers else warc.get("warc-record-id", ""),
        uri=refers if refers and refers != row.url else "",
        status=row.status or 0,
        digest=f"sha1:{row.digest}" if row.digest else "",
        location=row.redirect or "",
        etag=_validator(http.get("etag", "")),
        last_modified=_validator(http.get("last-modified", "")),
        head=head if len(head) <= MAX_HEAD else "",
        last=row.fetch_time or 0.0,
    )



def _validator(value: str) -> str:
    return value if len(value) <= MAX_VALIDATOR else ""
