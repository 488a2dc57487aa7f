"""``hive changes``: a recrawl's change feed, one JSON line per URL it fetched.

A recrawl's worker writes on each fetch's crawl-log line what changed since the prior
crawls and how that was known (``change``, ``evidence``: hive.core.prior.classify). The
feed joins those lines to the recrawl's plan (``recrawl.jsonl``, hive.export.recrawl),
which says what the prior crawls knew, so each line stands alone::

    {"url": ..., "change": "changed", "evidence": "new_digest", "status": 200,
     "prior_status": 200, "location": ..., "validators": {"etag": ..., "last_modified": ...},
     "date": "2026-...Z", "prior_date": "2026-...Z", "prior_digest": "sha1:..."}

``change`` is one of new, changed, unchanged, gone, moved; ``evidence`` one of ``304``
(the server said not modified), ``same_digest`` or ``new_digest`` (the payload against
the prior one), ``status`` (404 or 410 where there was a page, or the reverse),
``redirect`` (``location`` is the target), ``not_in_prior`` (a new URL). ``validators``
are those the request was sent with; ``date`` is when this crawl's fetch started (its
record's WARC-Date, to the crawl log's millisecond), ``prior_date`` the WARC-Date of the prior
capture. A URL
fetched more than once (a retry) has the line of its last fetch. Lines come sorted by
URL; memory does not follow the crawl (a scratch SQLite database on disk).
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections import Counter
from pathlib import Path
from typing import IO

from hive.core.prior import CHANGES, read_plan
from hive.fetch.warc_records import warc_date
from hive.report.lines import Skips, read_lines
from hive.storage.datadir import DataDir

CACHE_KIB = 64 << 10


def write_changes(dd: DataDir, out: IO[str]) -> Counter[str]:
    """Write the change feed of the recrawl in ``dd`` to ``out``; the count of each change."""
    counts: Counter[str] = Counter({change: 0 for change in CHANGES})
    with tempfile.TemporaryDirectory(prefix=".hive-changes-", dir=dd.root) as scratch:
        db = sqlite3.connect(Path(scratch) / "changes.sqlite")
        try:
            db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            db.execute("PRAGMA journal_mode = OFF")
            db.execute("PRAGMA synchronous = OFF")
            db.execute("CREATE TABLE prior (url TEXT PRIMARY KEY, prior TEXT)")
            db.execute("CREATE TABLE feed (url TEXT PRIMARY KEY, line TEXT)")
            if dd.recrawl_plan.is_file():
                with dd.recrawl_plan.open("rb") as f:
                    db.executemany("INSERT OR REPLACE INTO prior VALUES (?, ?)", (
                        (prior.url, prior.encode().decode())
                        for _, prior, _ in read_plan(f) if prior is not None))
            for entry in read_lines(dd.crawl_logs(), Skips()):
                change = entry.get("change")
                if not isinstance(change, str) or change not in CHANGES:
                    continue
                url = entry["url"]
                found = db.execute("SELECT prior FROM prior WHERE url = ?", (url,)).fetchone()
                db.execute("INSERT OR REPLACE INTO feed VALUES (?, ?)",
                           (url, json.dumps(_line(entry, found[0] if found else None))))
            for (line,) in db.execute("SELECT line FROM feed ORDER BY url"):
                out.write(line + "\n")
                counts[json.loads(line)["change"]] += 1
        finally:
            db.close()
    return counts


def _line(entry: dict[str, object], prior_text: str | None) -> dict[str, object]:
    started = float(entry["t"]) - float(entry.get("dl", 0.0))  # type: ignore[arg-type]
    line: dict[str, object] = {
        "url": entry["url"], "change": entry["change"], "evidence": entry.get("evidence", ""),
        "status": entry.get("status"),
    }
    if entry.get("location"):
        line["location"] = entry["location"]
    line["date"] = warc_date(started)
    if prior_text is not None:
        prior = json.loads(prior_text)
        line["prior_status"] = prior.get("status")
        line["validators"] = {k: prior[k] for k in ("etag", "last_modified") if prior.get(k)}
        line["prior_date"] = prior.get("date", "")
        line["prior_digest"] = prior.get("digest", "")
    return line
