"""The text sink (hive.fetch.text_sink), on a real worker crawling the test web and its
text host (hive.testweb.texts), read back with warcio."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from hive import config
from hive.errors import ConfigError
from hive.export import parquet
from hive.export.captures import Tally
from hive.fetch import text
from hive.fetch.sinks import Exchange, SinkContext, Sinks
from hive.fetch.warc import WarcWriter
from hive.fetch.warc_records import sha1_digest
from hive.procs.worker import Worker
from hive.testweb import Web, WebProcess, texts
from tests.conftest import WEB_ADDRESS, crawl_config

WARC = "hive.fetch.warc_sink:build"
TEXT = "hive.fetch.text_sink:build"
MAX_CHARS = 50_000
UNCONVERTED = ("/empty.html", "/broken.html", "/compress.html", "/binary.html")

pytestmark = pytest.mark.skipif(not text.available(), reason="the text extra is not installed")


@pytest.fixture(scope="module")
def text_web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebProcess]:
    log = tmp_path_factory.mktemp("web") / "requests.jsonl"
    with WebProcess(Web(seed=5, hosts=2, pages=5, hostile=False), log,
                    host=WEB_ADDRESS) as server:
        yield server


@pytest.fixture(scope="module")
def crawled(text_web: WebProcess,
            tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, float]]:
    """A crawl of the normal hosts and the text host with the text sink on (closed: its
    files are final), and the worker's stats at the end."""
    directory = tmp_path_factory.mktemp("crawl")
    cfg = crawl_config(text_web, outputs={"sinks": [WARC, TEXT]},
                       text={"max_chars": MAX_CHARS})
    worker = Worker(cfg, directory / "store", warc_dir=directory / "warc",
                    log_dir=directory / "logs")
    try:
        seeds = [*text_web.seeds(), text_web.url(f"{texts.LABEL}.{text_web.web.domain}")]
        worker.add(seeds, time.time())
        assert worker.run_until_idle(timeout=60)
        stats = worker.stats()
    finally:
        worker.close()
    return directory, stats


def html_responses(directory: Path) -> dict[str, tuple[str, str]]:
    """URI -> (WARC-Date, WARC-Record-ID) of every 200 HTML response record in the WARC
    files."""
    found = {}
    for path in sorted((directory / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type != "response":
                    continue
                headers = record.http_headers
                if headers.get_statuscode() == "200" and "html" in (
                        headers.get_header("Content-Type") or ""):
                    warc = record.rec_headers
                    found[warc.get_header("WARC-Target-URI")] = (
                        warc.get_header("WARC-Date"), warc.get_header("WARC-Record-ID"))
    return found


def conversions(directory: Path) -> dict[str, tuple[dict[str, str], str]]:
    """URI -> (WARC headers, text) of every conversion record in the crawl's WET files."""
    return conversions_in(directory / "warc")


def conversions_in(warc_dir: Path) -> dict[str, tuple[dict[str, str], str]]:
    """URI -> (WARC headers, text) of every conversion record in the WET files of
    ``warc_dir``, each checked against its block digest."""
    found = {}
    for path in sorted(warc_dir.glob("*.warc.wet.gz")):
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type == "warcinfo":
                    continue
                assert record.rec_type == "conversion"
                block = record.content_stream().read()
                headers = dict(record.rec_headers.headers)
                assert headers["WARC-Block-Digest"] == sha1_digest(block)
                assert headers["Content-Type"] == "text/plain"
                found[headers["WARC-Target-URI"]] = (headers, block.decode("utf-8"))
    return found


def text_url(server: WebProcess, path: str) -> str:
    return server.url(f"{texts.LABEL}.{server.web.domain}", path)


def test_every_html_page_has_a_conversion_record_naming_its_response(
    text_web: WebProcess, crawled: tuple[Path, dict[str, float]]
) -> None:
    """Each 200 HTML response has one conversion record of the same URI and date, referring
    to its record ID (but the page without text and the one that cannot be decoded), and
    nothing else has one."""
    directory, stats = crawled
    responses, records = html_responses(directory), conversions(directory)
    unconverted = {text_url(text_web, p) for p in UNCONVERTED}
    assert unconverted <= responses.keys()
    assert records.keys() == responses.keys() - unconverted
    assert len(records) > 2 * 5
    for uri, (headers, _) in records.items():
        date, response_id = responses[uri]
        assert headers["WARC-Date"] == headers["WARC-Refers-To-Date"] == date
        assert headers["WARC-Refers-To"] == response_id
        assert headers["WARC-Refers-To-Target-URI"] == uri
        assert "WARC-Identified-Content-Language" in headers, uri
    assert stats["text/converted"] == len(records)
    assert stats["text/skipped/empty"] == stats["text/skipped/binary"] == 1
    assert stats["text/skipped/not_html"] >= 1 + 3  # notes.txt, each host's robots.txt
    assert not list((directory / "warc").glob("*text*.open"))
    assert not list((directory / "warc").glob("*text*.cdxj"))


@pytest.mark.parametrize("path", sorted(texts.SENTENCES))
def test_the_text_and_language_of_pages_in_other_encodings_and_gzip(
    text_web: WebProcess, crawled: tuple[Path, dict[str, float]], path: str
) -> None:
    """French in windows-1252 (Content-Type charset), Japanese in Shift_JIS (a meta charset
    only), German gzip-encoded: each is read as the page says, in its language."""
    headers, page = conversions(crawled[0])[text_url(text_web, path)]
    assert texts.SENTENCES[path] in page
    assert headers["WARC-Identified-Content-Language"] == texts.LANGUAGES[path]


def test_a_huge_page_is_cut_at_max_chars_and_counted(
    text_web: WebProcess, crawled: tuple[Path, dict[str, float]]
) -> None:
    directory, stats = crawled
    headers, page = conversions(directory)[text_url(text_web, "/huge.html")]
    assert texts.HUGE_CHARS > 2 * MAX_CHARS
    assert len(page) == MAX_CHARS
    assert int(headers["Content-Length"]) == MAX_CHARS  # ASCII: a byte a character
    assert stats["text/truncated"] == 1


def test_an_unreadable_page_is_the_sinks_failure_counted_and_the_crawl_goes_on(
    text_web: WebProcess, crawled: tuple[Path, dict[str, float]]
) -> None:
    """/broken.html says gzip and is not, /compress.html has a coding nothing decodes: the
    text sink fails on each, counted, and every other page is still converted; each ends
    as it would without the sink."""
    directory, stats = crawled
    assert stats["sinks/text/failed"] == 2
    log_file = directory / "logs" / "crawl-00.jsonl"
    log = [json.loads(line) for line in log_file.read_text().splitlines()]
    for path in ("/broken.html", "/compress.html"):
        lines = [e for e in log if e["url"] == text_url(text_web, path)]
        assert len(lines) == 1 and lines[0]["outcome"] != "error", lines
    assert text_url(text_web, "/huge.html") in conversions(directory)


def test_naming_the_text_sink_without_the_extra_is_refused_naming_the_key(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "resiliparse", None)  # find_spec: not installed
    monkeypatch.delitem(sys.modules, "hive.fetch.text_sink", raising=False)
    with pytest.raises(ConfigError, match=r"outputs.sinks: .*pip install 'hive-crawler\[text\]'"):
        config.load(environ={}).replace(outputs={"sinks": [WARC, TEXT]})


def test_the_text_sink_is_off_by_default() -> None:
    assert TEXT not in config.load(environ={}).outputs.sinks


def test_a_torn_wet_file_is_recovered_by_its_own_writer_only(tmp_path: Path) -> None:
    """kill -9 leaves a WARC file and a WET file open in one directory: the WARC writer's
    recovery leaves the WET file alone; the text writer cuts its torn tail after the last
    whole conversion record and renames it, with no index."""
    script = f"""
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from hive.fetch.warc import WarcWriter
from hive.fetch.warc_records import record_id, warc_date
here = Path({str(tmp_path)!r})
warc = WarcWriter(here, "hive-00", 10**9, 1, "test")
warc.write_exchange(url="http://a/0", ip=None, request=b"GET / HTTP/1.1\\r\\n\\r\\n",
                    status_line="HTTP/1.1 200 OK", response_headers=[], body=b"x")
wet = WarcWriter(here, "hive-00-text", 10**9, 1, "test", suffix=".warc.wet.gz", indexed=False)
for n in range(3):
    wet.write_record([("WARC-Type", "conversion"), ("WARC-Record-ID", record_id()),
                      ("WARC-Date", warc_date(0)), ("WARC-Target-URI", f"http://a/{{n}}"),
                      ("Content-Type", "text/plain")], f"page {{n}}".encode())
[torn] = here.glob("*.wet.gz.open")
with torn.open("ab") as f:
    f.write(os.urandom(300))
os.kill(os.getpid(), signal.SIGKILL)
"""
    done = subprocess.run([sys.executable, "-c", script], check=False, timeout=60)
    assert done.returncode == -signal.SIGKILL
    (torn,) = tmp_path.glob("*.wet.gz.open")
    WarcWriter(tmp_path, "hive-00", 10**9, 1, "test").close()
    assert torn.exists()
    assert len(list(tmp_path.glob("hive-00-2*.cdxj"))) == 1
    WarcWriter(tmp_path, "hive-00-text", 10**9, 1, "test", suffix=".warc.wet.gz",
               indexed=False).close()
    (final,) = tmp_path.glob("hive-00-text-*.warc.wet.gz")
    assert final.name == torn.name.removesuffix(".open")
    with final.open("rb") as f:
        uris = [r.rec_headers.get_header("WARC-Target-URI") for r in ArchiveIterator(f)
                if r.rec_type == "conversion"]
    assert uris == ["http://a/0", "http://a/1", "http://a/2"]
    assert not list(tmp_path.glob("*text*.cdxj"))


def page_exchange(url: str, body: bytes, decoded: bytes | None,
                  truncated: str | None = None) -> Exchange:
    """An exchange of a 200 gzip-encoded HTML page, as the pipeline hands it on."""
    headers = [("Content-Type", "text/html; charset=utf-8"), ("Content-Encoding", "gzip")]
    return Exchange(url, "127.0.0.1", b"GET / HTTP/1.1\r\n\r\n", 200, "HTTP/1.1 200 OK",
                    headers, body, decoded, truncated, 1.7e9, 1.7e9 + 0.1,  # type: ignore[arg-type]
                    headers[0][1], "", "")


def test_the_sink_reads_the_body_the_fetcher_decoded_and_refers_to_the_warc_record(
    tmp_path: Path
) -> None:
    """The text sink takes the page as the fetcher decoded it (Exchange.decoded), not
    decoding the body again: here the bytes received are not gzip at all, and the decoded
    page is still converted. Its record names the response record the WARC sink, before
    it, wrote (WARC-Refers-To, as warcio reads it). A fetch cut before its body ended was
    never decoded: counted, no record, no failure."""
    from hive.fetch import text_sink, warc_sink

    cfg = config.load(environ={})
    context = SinkContext(cfg, "00", tmp_path)
    sinks = Sinks([warc_sink.build(context), text_sink.build(context)])  # type: ignore[list-item]
    page = b"<html><body><article><p>" + texts.SENTENCES["/"].encode() * 3 + b"</p></article>"
    sinks.write(page_exchange("http://a.test/", b"not gzip at all", page))
    sinks.write(page_exchange("http://a.test/cut", b"\x1f\x8b", None, "disconnect"))
    stats = sinks.stats()
    sinks.close()
    assert stats["text/converted"] == stats["text/skipped/incomplete"] == 1
    assert "sinks/text/failed" not in stats
    [(uri, (headers, page_text))] = conversions_in(tmp_path).items()
    assert uri == "http://a.test/" and texts.SENTENCES["/"] in page_text
    with next(tmp_path.glob("hive-00-2*.warc.gz")).open("rb") as f:
        ids = {r.rec_headers.get_header("WARC-Target-URI"): r.rec_headers.get_header(
            "WARC-Record-ID") for r in ArchiveIterator(f) if r.rec_type == "response"}
    with next(tmp_path.glob("*.warc.wet.gz")).open("rb") as f:
        [refers] = [r.rec_headers.get_header("WARC-Refers-To") for r in ArchiveIterator(f)
                    if r.rec_type == "conversion"]
    assert refers == ids["http://a.test/"] and refers.startswith("<urn:uuid:")
    assert headers["WARC-Identified-Content-Language"] == "eng"


def test_the_parquet_index_has_each_pages_languages_as_its_wet_record_says(
    text_web: WebProcess, crawled: tuple[Path, dict[str, float]], tmp_path: Path
) -> None:
    """``hive export --format parquet`` of a crawl with the text sink on: DuckDB reads
    each response's content_languages as its conversion record says (ISO 639-3), null for
    a page without one (no text, not HTML, undecodable) and for every other row."""
    import duckdb

    directory, _ = crawled
    out = tmp_path / "crawl.parquet"
    tally = Tally()
    parquet.export(directory, out, tally)
    records = conversions(directory)
    assert tally.conversions == len(records) and tally.wet_files >= 1
    said = {uri: headers.get("WARC-Identified-Content-Language") for uri, (headers, _)
            in records.items()}
    host = f"{texts.LABEL}.{text_web.web.domain}"
    db = duckdb.connect()
    db.execute(f"CREATE VIEW c AS SELECT * FROM read_parquet('{out}')")
    found = dict(db.execute(
        "SELECT url, content_languages FROM c WHERE warc_record_type = 'response' "
        "AND url_host_name = ?", [host]).fetchall())
    assert found == {uri: said.get(uri) for uri in found}
    assert {path: found[text_url(text_web, path)] for path in texts.LANGUAGES} == texts.LANGUAGES
    assert all(found[text_url(text_web, path)] is None for path in UNCONVERTED)
    # Every page of the crawl with a language has it in the index; nothing else has one.
    assert db.execute("SELECT count(*) FROM c WHERE content_languages IS NOT NULL").fetchone() \
        == (sum(1 for language in said.values() if language is not None),)
    assert db.execute("SELECT count(*) FROM c WHERE content_languages IS NOT NULL AND "
                      "(fetch_status <> 200 OR warc_record_type IS NULL)").fetchone() == (0,)


def test_two_captures_of_a_page_in_one_second_each_take_their_own_language(
    tmp_path: Path
) -> None:
    """A page fetched twice within one second, English then German: the index line says
    the same URI and second of both, and each capture still gets its own record's language
    (WARC-Refers-To, its record ID read from the record)."""
    from hive.fetch import text_sink, warc_sink

    directory = tmp_path / "data"
    warc_dir = directory / "warc"
    warc_dir.mkdir(parents=True)
    context = SinkContext(config.load(environ={}), "00", warc_dir)
    sinks = Sinks([warc_sink.build(context), text_sink.build(context)])  # type: ignore[list-item]
    english = b"<html><body><p>" + texts.SENTENCES["/"].encode() * 3 + b"</p>"
    german = b"<html><body><p>" + texts.SENTENCES["/de.html"].encode() * 3 + b"</p>"
    for n, page in enumerate((english, german)):
        sinks.write(page_exchange("http://a.test/", page, page)._replace(started=1.7e9 + n / 4))
    sinks.close()
    out = tmp_path / "crawl.parquet"
    parquet.export(directory, out, Tally())
    import duckdb

    assert duckdb.sql(f"SELECT content_languages FROM read_parquet('{out}') "
                      "ORDER BY warc_record_offset").fetchall() == [("eng",), ("deu",)]
