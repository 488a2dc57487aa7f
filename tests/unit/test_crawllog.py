"""The crawl log writes one JSON object per outcome, as json.dumps would, and rotates."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hive.fetch.crawllog import CrawlLog

TEXT = st.text(max_size=40)


def expected(now: float, outcome: str, url: str, **kw: Any) -> str:
    entry: dict[str, object] = {
        "t": round(now, 3), "outcome": outcome, "status": kw.get("status"),
        "bytes": kw.get("size", 0), "dl": round(kw.get("download", 0.0), 4), "url": url,
        "via": kw.get("via", ""), "depth": kw.get("depth", 0),
    }
    if kw.get("hop"):
        entry["hop"] = kw["hop"]
    if kw.get("mime"):
        entry["mime"] = kw["mime"]
    if kw.get("reason"):
        entry["reason"] = kw["reason"]
    if kw.get("message"):
        entry["msg"] = kw["message"]
    return json.dumps(entry, ensure_ascii=False)


@settings(max_examples=200, deadline=None)
@given(
    now=st.floats(0, 4e9), outcome=TEXT, url=TEXT, via=TEXT, mime=TEXT, reason=TEXT,
    message=TEXT, hop=TEXT,
    status=st.one_of(st.none(), st.integers(100, 599)), size=st.integers(0, 2**40),
    download=st.floats(0, 1e4), depth=st.integers(0, 1000),
)
def test_each_line_is_what_json_dumps_gives(
    now: float, outcome: str, url: str, via: str, mime: str, reason: str, message: str,
    hop: str, status: int | None, size: int, download: float, depth: int,
) -> None:
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        log = CrawlLog(directory, "crawl-00", 10**9)
        log.write(now, outcome, url, status=status, size=size, download=download, via=via,
                  depth=depth, mime=mime, reason=reason, message=message, hop=hop)
        log.close()
        text = (directory / "crawl-00.jsonl").read_text(encoding="utf-8")
    line, end = text.split("\n")  # not splitlines(): JSON leaves U+2028 and the like as is
    assert end == ""
    assert line == expected(now, outcome, url, status=status, size=size, download=download,
                            via=via, depth=depth, mime=mime, reason=reason, message=message,
                            hop=hop)


def test_rotates_past_its_size(tmp_path: Path) -> None:
    log = CrawlLog(tmp_path, "crawl-00", 300)
    for i in range(10):
        log.write(float(i), "ok", f"http://a.test/{i}", status=200)
    log.close()
    lines = [line for path in tmp_path.glob("crawl-00*.jsonl")
             for line in path.read_text().splitlines()]
    assert len(list(tmp_path.glob("crawl-00.*.jsonl"))) >= 1
    assert sorted(json.loads(line)["url"] for line in lines) == sorted(
        f"http://a.test/{i}" for i in range(10))
