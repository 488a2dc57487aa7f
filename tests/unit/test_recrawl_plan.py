"""hive.export.recrawl: what a plan line takes from a capture, its crawl-log line and its
record's heads, and how a crawl's captures join the history."""

from __future__ import annotations

import sqlite3

import pytest

from hive.core.prior import Prior
from hive.export import recrawl
from hive.export.captures import Row
from hive.export.records import Record
from hive.export.recrawl import MAX_HEAD, MAX_VALIDATOR, _prior

URL = "http://a.test/p"


def row(**fields: object) -> Row:
    base: dict[str, object] = dict(
        url=URL, surt="test,a)/p", fetch_time=1000.0, status=200, mime="text/html",
        digest="AAAA", record_type="response", filename="f.warc.gz", offset=0, length=10,
        redirect=None, truncated=None, outcome="ok", reason=None, message=None, hop="LL",
        via="http://a.test/", depth=2, duration=0.1, size=10, outcome_time=1000.1,
        languages=None, score=None)
    base.update(fields)
    return Row(**base)  # type: ignore[arg-type]


def record(warc: dict[str, str], lines: tuple[str, ...]) -> Record:
    http = {line.split(":")[0].lower(): line.split(":", 1)[1].strip() for line in lines}
    return Record(warc, "HTTP/1.1 200 OK", http, b"", False, lines)


def test_a_response_names_itself_and_keeps_its_head_and_validators() -> None:
    prior = _prior(row(), record(
        {"warc-date": "2026-12-01T00:00:00Z", "warc-record-id": "<urn:uuid:1>"},
        ("Content-Type: text/html", 'ETag: "e"', "Last-Modified: Tue")))
    assert (prior.date, prior.record_id, prior.uri) == ("2026-12-01T00:00:00Z", "<urn:uuid:1>", "")
    assert (prior.etag, prior.last_modified, prior.digest) == ('"e"', "Tue", "sha1:AAAA")
    assert prior.head == 'HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nETag: "e"\r\n' \
                         "Last-Modified: Tue"
    assert (prior.depth, prior.path, prior.via, prior.kind, prior.last) == (
        2, "LL", "http://a.test/", "", 1000.0)


def test_a_revisit_names_its_original() -> None:
    prior = _prior(row(record_type="revisit", mime="warc/revisit"), record(
        {"warc-date": "2026-12-02T00:00:00Z", "warc-record-id": "<urn:uuid:2>",
         "warc-refers-to-target-uri": "http://a.test/other",
         "warc-refers-to-date": "2026-12-01T00:00:00Z", "warc-refers-to": "<urn:uuid:1>"}, ()))
    assert (prior.date, prior.record_id, prior.uri) == (
        "2026-12-01T00:00:00Z", "<urn:uuid:1>", "http://a.test/other")


def test_what_is_too_long_is_not_kept() -> None:
    prior = _prior(row(outcome="sitemap_ok"), record(
        {"warc-date": "d", "warc-record-id": "i"},
        ("ETag: " + "x" * (MAX_VALIDATOR + 1), "X-Big: " + "y" * MAX_HEAD)))
    assert prior.etag == "" and prior.head == "" and prior.kind == "s"


def test_a_crawls_captures_merge_into_the_history_a_batch_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(recrawl, "MERGE_BATCH", 2)
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE plan (url TEXT PRIMARY KEY, prior TEXT)")
    db.execute("CREATE TABLE crawl (url TEXT PRIMARY KEY, prior TEXT)")
    before = {f"http://a.test/{i}": Prior(f"http://a.test/{i}", digest="sha1:A", status=200,
                                           last=100.0) for i in range(5)}
    for url, prior in before.items():
        db.execute("INSERT INTO plan VALUES (?, ?)", (url, prior.encode().decode()))
    now = [Prior(f"http://a.test/{i}", digest="sha1:B" if i % 2 else "sha1:A", status=200,
                 last=160.0) for i in range(7)]
    for prior in now:
        db.execute("INSERT INTO crawl VALUES (?, ?)", (prior.url, prior.encode().decode()))
    recrawl._merge(db)
    plan = {url: Prior.decode(text) for url, text in db.execute("SELECT * FROM plan")}
    assert len(plan) == 7
    for i in range(7):
        prior = plan[f"http://a.test/{i}"]
        if i < 5:
            assert (prior.seen, prior.changed, prior.span) == (2, i % 2, 60.0), i
        else:
            assert (prior.seen, prior.changed, prior.span) == (1, 0, 0.0), i
