"""CDXJ indexes agree line for line with webrecorder's cdxj-indexer, on whole and torn WARCs,
beside each WARC the writer finishes and merged by ``hive index``."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from cdxj_indexer.main import write_cdx_index
from click.testing import CliRunner

import cli
from hive.fetch import cdxj
from hive.fetch.warc import Original, WarcWriter
from hive.fetch.warc_records import gzip_member, sha1_digest, warc_record
from tests.io.test_warc import EXCHANGES, clock, exchange, warc_files


def reference(*inputs: Path, tmp: Path) -> str:
    """What ``cdxj-indexer --sort`` writes for the files."""
    out = tmp / "reference.cdxj"
    write_cdx_index(str(out), [str(path) for path in inputs], {"sort": True})
    return out.read_text()


def write_crawl(directory: Path, max_file_bytes: int = 10**9) -> list[Path]:
    with WarcWriter(directory, "hive-07", max_file_bytes, 1, "hive/test", now=clock) as writer:
        for args in EXCHANGES:
            writer.write_exchange(**args)
        writer.write_exchange(**exchange(
            6, url="http://www.b.test:8080/x/?z=1&a=%7e&JSESSIONID=0123456789abcdef",
            status_line="HTTP/1.1 301", response_headers=[("content-TYPE", " Text/Plain ;x")],
            body=b"",
        ))
    return warc_files(directory)


def test_the_index_beside_each_file_is_cdxj_indexers(tmp_path: Path) -> None:
    warcs = write_crawl(tmp_path / "warc", max_file_bytes=1500)
    assert len(warcs) > 2
    for path in warcs:
        beside = cdxj.index_path(path)
        assert beside.name == path.name.removesuffix(".warc.gz") + ".cdxj"
        assert beside.read_text() == reference(path, tmp=tmp_path)
    merged = "".join(cdxj.index_path(path).read_text() for path in warcs)
    assert len(merged.splitlines()) == len(EXCHANGES) + 1


def test_an_unusual_response_is_keyed_and_described_as_cdxj_indexer_does(tmp_path: Path) -> None:
    [path] = write_crawl(tmp_path)
    lines = cdxj.index_file(path).lines
    [odd] = [line for line in lines if "b.test" in line]
    # surt: www dropped, lowercased, trailing slash dropped, %7e unescaped, query sorted.
    assert odd.startswith("test,b:8080)/x?a=~&jsessionid=0123456789abcdef&z=1 ")
    assert '"mime": "Text/Plain", "status": "301"' in odd
    assert "".join(lines) == reference(path, tmp=tmp_path)


def test_a_huge_record_is_indexed_by_its_head(tmp_path: Path) -> None:
    body = b"\0" * (64 << 20)
    with WarcWriter(tmp_path, "hive-07", 10**9, 1, "hive/test", now=clock) as writer:
        writer.write_exchange(**exchange(0, body=body))
        writer.write_exchange(**exchange(1))
    [path] = warc_files(tmp_path)
    index = cdxj.index_file(path)
    assert index.records == 2 and index.skipped_bytes == 0
    assert "".join(index.lines) == reference(path, tmp=tmp_path)
    assert cdxj.index_path(path).read_text() == "".join(index.lines)


def test_records_that_are_not_captures_get_no_line(tmp_path: Path) -> None:
    path = tmp_path / "mixed.warc.gz"
    records = [
        (("WARC-Type", "metadata"), ("Content-Type", "application/warc-fields")),
        (("WARC-Type", "resource"), ("Content-Type", "text/plain; charset=utf-8")),
        (("WARC-Type", "request"), ("Content-Type", "application/http; msgtype=request")),
    ]
    data = b""
    for kind, content_type in records:
        fields = [kind, ("WARC-Record-ID", "<urn:uuid:0>"), ("WARC-Date", "2024-06-01T12:00:00Z"),
                  ("WARC-Target-URI", "http://a.test/r"), content_type,
                  # With no digest cdxj-indexer computes one, and leaks a temporary file.
                  ("WARC-Payload-Digest", sha1_digest(b"a: b\r\n"))]
        data += gzip_member(warc_record(fields, b"a: b\r\n"), 1)
    path.write_bytes(data)
    lines = cdxj.index_file(path).lines
    assert len(lines) == 1 and '"mime": "text/plain"' in lines[0]
    assert "".join(lines) == reference(path, tmp=tmp_path)


@pytest.mark.parametrize("tail", ["cut", "garbage"])
def test_a_torn_file_is_indexed_up_to_its_last_whole_record(tmp_path: Path, tail: str) -> None:
    [whole] = write_crawl(tmp_path / "whole")
    data = whole.read_bytes()
    last = cdxj.index_file(whole)
    offsets = sorted(int(line.split('"offset": "')[1].split('"')[0]) for line in last.lines)
    torn = tmp_path / whole.name
    torn.write_bytes(data[:-7] if tail == "cut" else data + b"not a gzip member" * 50)
    index = cdxj.index_file(torn)
    if tail == "cut":
        # The last response is torn: reading stops where it starts.
        assert index.whole_bytes == offsets[-1]
        assert index.skipped_bytes == len(data) - 7 - offsets[-1]
        prefix = tmp_path / "prefix" / whole.name
        prefix.parent.mkdir()
        prefix.write_bytes(data[: index.whole_bytes])
        assert "".join(index.lines) == reference(prefix, tmp=tmp_path)
        assert index.records == len(last.lines) - 1
    else:
        assert index.whole_bytes == len(data) and index.skipped_bytes > 0
        assert index.lines == last.lines


def test_hive_index_merges_every_warc_and_names_what_it_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cdxj, "MERGE_FAN_IN", 2)  # a merge of merges, with few files
    warc_dir = tmp_path / "data" / "warc"
    warcs = write_crawl(warc_dir, max_file_bytes=1500)
    assert len(warcs) >= 4
    # A crash left the last file open and torn.
    open_file = warcs[-1].with_name(warcs[-1].name + ".open")
    open_file.write_bytes(warcs[-1].read_bytes()[:-5])
    warcs[-1].unlink()
    whole = cdxj.index_file(open_file).whole_bytes
    result = CliRunner().invoke(cli.main, ["index", "--data", str(tmp_path / "data")])
    assert result.exit_code == 0, result.output
    index = (tmp_path / "data" / "index.cdxj").read_text()
    expected = reference(*warcs[:-1], tmp=tmp_path) + "".join(cdxj.index_file(open_file).lines)
    assert index == "".join(sorted(expected.splitlines(keepends=True)))
    lines = len(index.splitlines())
    assert f"indexed {lines} records from {len(warcs)} WARC files" in result.output
    assert f"{open_file.name}: skipped {open_file.stat().st_size - whole} bytes" in result.output
    assert "still open" in result.output
    assert not list(tmp_path.glob("data/.hive-index-*"))

    out = tmp_path / "elsewhere.cdxj"
    result = CliRunner().invoke(cli.main, ["index", "--data", str(tmp_path / "data"),
                                           "--out", str(out)])
    assert result.exit_code == 0 and out.read_text() == index


def test_hive_index_without_warcs_says_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli.main, ["index", "--data", str(tmp_path)])
    assert result.exit_code == 1
    assert f"{tmp_path / 'warc'}: no such directory" in result.output


def test_the_lines_the_writer_keeps_are_those_read_back_from_its_files(tmp_path: Path) -> None:
    """The writer indexes a file from the records it compressed, not by reading it back:
    the same lines, for odd records too, with threads rotating files under each other."""
    odd = [
        # An HTTP head longer than HEAD_BYTES: indexed without status and mime.
        exchange(0, response_headers=[("X-Big", "v" * cdxj.HEAD_BYTES),
                                      ("Content-Type", "text/html")]),
        exchange(1, response_headers=[("Content-Type", "text/html; charset=\u00e9t\u00e9")]),
        exchange(2, status_line="HTTP/1.1", response_headers=[]),
        exchange(3, original=Original("http://a.test/page/0", "2024-06-01T12:00:00Z", "")),
        exchange(4, hop_path="LE", via="http://a.test/"),
        # Heads from a little under HEAD_BYTES to a little over: where the writer stops
        # taking the capture from its fields and reads it from the record.
        *(exchange(5 + n, response_headers=[("X-Pad", "p" * (cdxj.HEAD_BYTES - 760 + 9 * n)),
                                            ("Content-Type", "text/plain")])
          for n in range(40)),
    ]
    with WarcWriter(tmp_path, "hive-07", 4000, 1, "hive/test", now=clock) as writer:
        for args in odd:
            writer.write_exchange(**args)

        def write(thread: int) -> None:
            for n in range(25):
                writer.write_exchange(**exchange(100 * thread + n, hop_path="L"))

        threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    warcs = warc_files(tmp_path)
    assert len(warcs) > 5
    lines = 0
    for path in warcs:
        kept = cdxj.index_path(path).read_text()
        assert kept == "".join(cdxj.index_file(path).lines), path.name
        lines += len(kept.splitlines())
    assert lines == len(odd) + 100
    assert reference(*warcs, tmp=tmp_path).count("\n") == lines


@pytest.mark.parametrize("head", [
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nCONTENT-TYPE:text/plain \r\nX: y\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n Content-Type : a/b\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX: content-type: q\r\nContent-Type: a/b\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Type: a/b\r\ncontent-type: c/d\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Type: \xe9t\xe2\x82\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n\xc2\x85Content-Type: a/b\r\nY: \xe2\x82\xac\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Type: a\rb\nc\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Type:\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Type: a/b",
    b"HTTP/1.1\r\nContent-Type: a/b\r\n\r\n",
])
def test_exchange_capture_reads_the_head_as_its_fields_do(head: bytes) -> None:
    """The mime taken from the one ``content-type`` occurrence is the one the full parse of
    the header lines (_fields) gives: names stripped and lowercased, the first kept,
    values decoded as the whole head is."""
    http_end = head.find(b"\r\n\r\n")
    expected = None
    if http_end >= 0:
        rest = head[:http_end].partition(b"\r\n")[2]
        expected = cdxj._fields(b"\r\n" + rest).get("content-type")
    found = cdxj.exchange_capture("response", "http://a.test/", "2024-06-01T12:00:00Z", None, head)
    if expected is None:
        assert '"mime"' not in found.fields
    else:
        mime = cdxj._json_string(cdxj._MIME_END.split(expected, 1)[0].strip())
        assert f', "mime": {mime}' in found.fields


@pytest.mark.parametrize(("date", "stamp"), [
    ("2024-06-01T12:00:00.250000Z", "20240601120000"),
    ("2024-06-01T12:00:00Z", "20240601120000"),
    ("2024-06-01T12:00Z", "20240601120000"),
    ("2024-06-01", "20240601000000"),
    ("2024-06-01T12:00:0\u0663Z", "2024060112000\u0663"),
    ("2024-06-01T12:00:0\u00b2Z", "20240601120000"),
    ("2024/06/01 12:00:00", "20240601120000"),
])
def test_timestamp_of_usual_and_odd_dates(date: str, stamp: str) -> None:
    assert cdxj._timestamp(date) == stamp
