"""The crawl log read back for the report: its lines one at a time, the odd ones skipped.

A crawl's logs are ``DATA/logs/crawl-NN.jsonl`` (one per worker, the live one)
and ``crawl-NN.<time>[-n].jsonl`` (rotated; see hive.fetch.crawllog);
:meth:`hive.storage.datadir.DataDir.crawl_logs` lists them, each worker's
oldest first, so the lines of one host come in the order they were written.
Lines are read one at a time, at most ``MAX_LINE`` bytes each: memory does not
grow with the log.

Policy for what does not read: a line that is not a JSON object with the fields
the report uses (``t``, ``outcome``, ``url`` and, when present, numbers where
numbers belong) is skipped, counted by cause, and the first few are named by
file and line number; so is a line longer than ``MAX_LINE``. A last line with
no newline is being written (a running crawl) or was cut by a crash: it is
skipped as ``unfinished``. The report shows every skip.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# A crawl log line is a URL (scope.max_url_length), its source URL and a short message.
MAX_LINE = 64 << 10
# Skipped lines named one by one in the report; the rest are counted.
NAMED_SKIPS = 5
_NUMBER = (int, float)


@dataclass
class Skips:
    """Lines the report could not use: how many, by cause, and the first few by place."""

    by_cause: Counter[str] = field(default_factory=Counter)
    named: list[str] = field(default_factory=list)

    def add(self, cause: str, path: Path, number: int) -> None:
        self.by_cause[cause] += 1
        if len(self.named) < NAMED_SKIPS:
            self.named.append(f"{path.name}:{number}: {cause}")

    @property
    def total(self) -> int:
        return sum(self.by_cause.values())


def problem(entry: Any) -> str:
    """Why a decoded line cannot be used; empty if it can. (Unrolled: it runs per line.)"""
    if not isinstance(entry, dict):
        return "not a JSON object"
    get = entry.get
    if not isinstance(get("t"), _NUMBER):
        return "no time (t)"
    if not isinstance(get("outcome"), str):
        return "no outcome"
    if not isinstance(get("url"), str):
        return "no url"
    if not isinstance(get("bytes", 0), _NUMBER):
        return "bytes is not a number"
    if not isinstance(get("dl", 0), _NUMBER):
        return "dl is not a number"
    if not isinstance(get("depth", 0), _NUMBER):
        return "depth is not a number"
    status = get("status")
    if status is not None and not isinstance(status, int):
        return "status is not a number"
    if not isinstance(get("reason", ""), str):
        return "reason is not a string"
    if not isinstance(get("mime", ""), str):
        return "mime is not a string"
    return ""


def read_lines(files: list[Path], skips: Skips) -> Iterator[dict[str, Any]]:
    """The usable lines of ``files`` in order; the others are counted in ``skips``."""
    decode = json.JSONDecoder().decode
    for path in files:
        try:
            handle = path.open("rb")
        except OSError as exc:
            skips.add(f"cannot open: {exc.strerror}", path, 0)
            continue
        with handle:
            number = 0
            while True:
                raw = handle.readline(MAX_LINE)
                if not raw:
                    break
                number += 1
                if not raw.endswith(b"\n"):
                    if len(raw) < MAX_LINE:
                        skips.add("unfinished last line", path, number)
                        break
                    skips.add(f"longer than {MAX_LINE} bytes", path, number)
                    while raw and not raw.endswith(b"\n"):
                        raw = handle.readline(MAX_LINE)
                    continue
                try:
                    entry = decode(raw.decode())
                except ValueError:  # UnicodeDecodeError is one too
                    skips.add("not JSON", path, number)
                    continue
                cause = problem(entry)
                if cause:
                    skips.add(cause, path, number)
                    continue
                yield entry
