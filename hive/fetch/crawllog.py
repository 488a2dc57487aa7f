"""The crawl log: one JSON line per outcome, so "what happened to this URL?" has an answer.

What Heritrix's crawl.log gives its users, as JSON lines that ``grep`` and
``jq`` read: time, outcome kind, HTTP status, bytes, download seconds, URL,
the URL it was found on, depth, the MIME type a server gave (``mime``, when
it gave one), how it was reached from its seed (``hop``, its hop path:
``L`` a link, ``E`` an embed, ``R`` a redirect, one letter a hop, as Heritrix
logs it; absent for a seed), the page's score when a scorer gave one (``score``,
hive.fetch.scoring) or why it gave none when it failed (``scorer``), and a message
for failures and refusals. A refused URL's line
has the outcome ``refused`` and its ``reason`` (the config key or scope rule
that refused it; hive/frontier/refusals.py bounds how many). A recrawl's fetch says
what changed since the prior crawls (``change``: new, changed, unchanged, gone,
moved), how that was known (``evidence``: hive.core.prior) and, moved, its redirect
target (``location``), which ``hive changes`` reads. A fetch that connected says to
which address (``address``: the one its WARC records name, after any fallback to
the host's next address). One file
per worker under ``DATA/logs/``, rotated past a size: the live file is
``crawl-NN.jsonl``, rotated ones ``crawl-NN.<time>.jsonl``. Written only by the
worker's frontier thread; lines are flushed at each commit.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO

_string = json.encoder.encode_basestring


class CrawlLog:
    def __init__(self, directory: Path, name: str, max_bytes: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{name}.jsonl"
        self.max_bytes = max_bytes
        self._file: IO[str] = self.path.open("a", encoding="utf-8")
        self._size = self.path.stat().st_size
        self.lines = 0

    def write(
        self,
        now: float,
        outcome: str,
        url: str,
        *,
        status: int | None = None,
        size: int = 0,
        download: float = 0.0,
        via: str = "",
        depth: int = 0,
        mime: str = "",
        reason: str = "",
        message: str = "",
        hop: str = "",
        change: str = "",
        evidence: str = "",
        location: str = "",
        score: float | None = None,
        scorer: str = "",
        address: str = "",
    ) -> None:
        # json.dumps of the same dict, spelled out: a line per page is worth the care.
        line = (
            f'{{"t": {round(now, 3)!r}, "outcome": {_string(outcome)}, '
            f'"status": {"null" if status is None else int(status)}, "bytes": {int(size)}, '
            f'"dl": {round(download, 4)!r}, "url": {_string(url)}, "via": {_string(via)}, '
            f'"depth": {int(depth)}'
            + (f', "hop": {_string(hop)}' if hop else "")
            + (f', "mime": {_string(mime)}' if mime else "")
            + (f', "reason": {_string(reason)}' if reason else "")
            + (f', "change": {_string(change)}, "evidence": {_string(evidence)}'
               if change else "")
            + (f', "location": {_string(location)}' if location else "")
            + (f', "score": {round(score, 4)!r}' if score is not None else "")
            + (f', "scorer": {_string(scorer)}' if scorer else "")
            + (f', "address": {_string(address)}' if address else "")
            + (f', "msg": {_string(message)}}}\n' if message else "}\n")
        )
        self._file.write(line)
        self._size += len(line)
        self.lines += 1
        if self._size >= self.max_bytes:
            self._rotate()

    def _rotate(self) -> None:
        self._file.close()
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        target = self.path.with_name(f"{self.path.stem}.{stamp}.jsonl")
        n = 1
        while target.exists():
            target = self.path.with_name(f"{self.path.stem}.{stamp}-{n}.jsonl")
            n += 1
        self.path.rename(target)
        self._file = self.path.open("a", encoding="utf-8")
        self._size = 0

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()
