"""The WARC writer's files pass warcio's checker, read back as written, rotate and recover."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import uuid
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.checker import Checker
from warcio.timeutils import iso_date_to_datetime

from hive import config
from hive.fetch import cdxj, warc, warc_records
from hive.fetch.warc import WarcWriter, recover
from hive.fetch.warc_records import (
    gzip_member,
    http_head,
    record_id,
    rewrite_transfer_encoding,
    sha1_digest,
    warc_date,
    warc_record,
)
from hive.procs.worker import Worker
from tests.io.test_fetch import OK, Server

HTML = b"<!doctype html><html><head><title>t</title></head><body>" + b"<p>hello</p>" * 300
NAME_RE = re.compile(r"^hive-07-\d{14}-(\d{5})\.warc\.gz$")
CLOCK = 1_717_243_200.25


def clock() -> float:
    return CLOCK


def exchange(n: int, **over: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "url": f"http://a.test/page/{n}",
        "ip": "127.0.0.1",
        "request": f"GET /page/{n} HTTP/1.1\r\nHost: a.test\r\nUser-Agent: hive-test\r\n"
                   "Accept: */*\r\n\r\n".encode(),
        "status_line": "HTTP/1.1 200 OK",
        "response_headers": [
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Length", str(len(HTML))),
        ],
        "body": HTML,
    }
    args.update(over)
    return args


EXCHANGES: list[dict[str, Any]] = [
    exchange(0),
    exchange(
        1,
        response_headers=[("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")],
    ),
    exchange(
        2,
        response_headers=[("Content-Type", "text/html"), ("Content-Length", "99999")],
        body=HTML[:1000],
        truncated="length",
    ),
    exchange(
        3,
        response_headers=[("Content-Type", "application/octet-stream")],
        body=bytes(range(256)) * 8 + b"\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
    ),
    exchange(
        4,
        response_headers=[("Content-Type", "text/html"), ("Content-Encoding", "gzip")],
        body=gzip.compress(HTML),
    ),
    exchange(5, ip=None, status_line="HTTP/1.1 404 Not Found", body=b""),
]


def warcio(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warcio.cli", *args],
        capture_output=True, text=True, check=False, timeout=60,
    )


def check(path: Path) -> bool:
    """warcio's digest checker, in process (the CLI is exercised once, by subprocess)."""
    return bool(Checker(SimpleNamespace(inputs=[str(path)], verbose=False)).process_all() == 0)


def members(path: Path) -> Iterator[bytes]:
    """Each gzip member of the file, inflated on its own."""
    data = path.read_bytes()
    while data:
        inflater = zlib.decompressobj(31)
        yield inflater.decompress(data)
        assert inflater.eof
        data = inflater.unused_data


def warc_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.endswith(".warc.gz"))


@pytest.fixture(params=config.GZIP_LEVELS)
def written(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A file of every exchange, at each of ISA-L's levels: readers see plain gzip members."""
    with WarcWriter(tmp_path, "hive-07", 10**9, request.param, "hive/test", now=clock) as writer:
        for args in EXCHANGES:
            writer.write_exchange(**args)
    [path] = warc_files(tmp_path)
    return path


def test_warcio_check_passes_and_index_lists_every_record(written: Path) -> None:
    checked = warcio("check", "-v", str(written))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("digest pass") == 1 + 2 * len(EXCHANGES)
    indexed = warcio("index", "-f", "warc-type,warc-target-uri,http:status", str(written))
    assert indexed.returncode == 0, indexed.stderr
    rows = [json.loads(line) for line in indexed.stdout.splitlines()]
    assert [r["warc-type"] for r in rows] == ["warcinfo"] + ["request", "response"] * len(EXCHANGES)
    responses = [r for r in rows if r["warc-type"] == "response"]
    assert [r["warc-target-uri"] for r in responses] == [a["url"] for a in EXCHANGES]
    assert [r["http:status"] for r in responses] == ["200"] * 5 + ["404"]


def test_every_content_length_equals_its_block(written: Path) -> None:
    records = list(members(written))
    assert len(records) == 1 + 2 * len(EXCHANGES)
    for record in records:
        head, _, rest = record.partition(b"\r\n\r\n")
        assert head.startswith(b"WARC/1.1\r\n")
        length = int(re.search(rb"\r\nContent-Length: (\d+)", head).group(1))  # type: ignore[union-attr]
        assert rest.endswith(b"\r\n\r\n")
        assert len(rest) == length + 4


def test_records_read_back_as_written(written: Path) -> None:
    with written.open("rb") as f:
        records = [
            (r.rec_type, r.rec_headers, r.http_headers, r.raw_stream.read())
            for r in ArchiveIterator(f)
        ]
    info_type, info_headers, _, info_block = records[0]
    assert info_type == "warcinfo"
    assert info_headers.get_header("WARC-Filename") == written.name
    assert b"software: hive/test\r\n" in info_block
    info_id = info_headers.get_header("WARC-Record-ID")
    pairs = list(zip(records[1::2], records[2::2], strict=True))
    assert len(pairs) == len(EXCHANGES)
    for args, (request, response) in zip(EXCHANGES, pairs, strict=True):
        (req_type, req_h, req_http, _), (resp_type, resp_h, resp_http, payload) = request, response
        assert (req_type, resp_type) == ("request", "response")
        for h in (req_h, resp_h):
            assert h.get_header("WARC-Target-URI") == args["url"]
            assert h.get_header("WARC-Warcinfo-ID") == info_id
            assert h.get_header("WARC-Date") == warc_date(CLOCK)
            assert h.get_header("WARC-IP-Address") == args["ip"]
            assert re.fullmatch(r"<urn:uuid:[0-9a-f-]{36}>", h.get_header("WARC-Record-ID"))
        assert req_h.get_header("WARC-Concurrent-To") == resp_h.get_header("WARC-Record-ID")
        assert resp_h.get_header("WARC-Concurrent-To") == req_h.get_header("WARC-Record-ID")
        assert resp_h.get_header("Content-Type") == "application/http; msgtype=response"
        assert req_http.protocol == "GET"
        assert payload == args["body"]
        assert resp_h.get_header("WARC-Payload-Digest") == sha1_digest(args["body"])
        assert resp_h.get_header("WARC-Truncated") == args.get("truncated")
        assert resp_http.get_header("Transfer-Encoding") is None
        if args["response_headers"][-1][0] == "Content-Encoding":
            assert gzip.decompress(payload) == HTML
    chunked = pairs[1][1][2]
    assert chunked.get_header("X-Crawler-Transfer-Encoding") == "chunked"
    truncated = pairs[2][1][2]
    assert truncated.get_header("Content-Length") == "99999"


def test_rotation_by_size_and_sequence(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, "hive-07", 2000, 2, "hive/test", now=clock) as writer:
        where = [writer.write_exchange(**exchange(n)) for n in range(7)]
        stats = writer.stats()
    files = warc_files(tmp_path)
    assert len(files) == stats["warc/files"] > 2
    assert [int(NAME_RE.match(p.name).group(1)) for p in files] == list(range(len(files)))  # type: ignore[union-attr]
    assert stats["warc/records"] == len(files) + 14
    assert stats["warc/bytes"] == sum(p.stat().st_size for p in files)
    for path in files:
        assert check(path)
        first = next(members(path))
        assert b"WARC-Type: warcinfo" in first
    for loc in where:
        raw = (tmp_path / loc.filename).read_bytes()[loc.offset : loc.offset + loc.length]
        assert b"WARC-Type: response" in zlib.decompress(raw, 31)


def test_open_file_is_never_named_warc_gz(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, "hive-07", 10**9, 2, "hive/test", now=clock)
    assert list(tmp_path.iterdir()) == []
    writer.write_exchange(**exchange(0))
    writer.write_exchange(**exchange(1))
    assert warc_files(tmp_path) == []
    [open_file] = list(tmp_path.iterdir())
    assert open_file.name.endswith(".warc.gz.open")
    assert check(open_file)
    writer.close()
    [closed] = warc_files(tmp_path)
    assert closed.name == open_file.name.removesuffix(".open")
    # A closed file gets its CDXJ index beside it (tests/io/test_cdxj.py checks its lines).
    assert sorted(tmp_path.iterdir()) == sorted([closed, cdxj.index_path(closed)])
    writer.write_exchange(**exchange(2))
    writer.close()
    assert len(warc_files(tmp_path)) == 2


def test_kill_9_mid_write_is_recovered(tmp_path: Path) -> None:
    script = f"""
import os, signal, sys
from pathlib import Path
from types import SimpleNamespace
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from hive.fetch.warc import WarcWriter
w = WarcWriter(Path({str(tmp_path)!r}), "hive-07", 10**9, 2, "hive/test")
for n in range(3):
    w.write_exchange(url=f"http://a.test/{{n}}", ip=None,
                     request=b"GET / HTTP/1.1\\r\\n\\r\\n", status_line="HTTP/1.1 200 OK",
                     response_headers=[], body=b"x" * 5000)
open_path = next(Path({str(tmp_path)!r}).iterdir())
with open(open_path, "ab") as f:
    f.write(os.urandom(300))
os.kill(os.getpid(), signal.SIGKILL)
"""
    done = subprocess.run([sys.executable, "-c", script], check=False, timeout=60)
    assert done.returncode == -signal.SIGKILL
    [torn] = list(tmp_path.iterdir())
    assert torn.name.endswith(".open")
    with WarcWriter(tmp_path, "hive-07", 10**9, 2, "hive/test", now=clock) as writer:
        [recovered] = warc_files(tmp_path)
        assert recovered.name == torn.name.removesuffix(".open")
        assert check(recovered)
        assert sum(b"WARC-Type: response" in m for m in members(recovered)) == 3
        assert len(cdxj.index_path(recovered).read_text().splitlines()) == 3
        writer.write_exchange(**exchange(9))
    seqs = sorted(int(NAME_RE.match(p.name).group(1)) for p in warc_files(tmp_path))  # type: ignore[union-attr]
    assert seqs == [0, 1]


def torn_copy(
    tmp_path: Path, exchanges: int, cut: int, **over: Any
) -> tuple[Path, list[int]]:
    """A copy of an open file holding the given exchanges (``over`` their arguments), cut
    `cut` bytes short, and the member end offsets of the full file."""
    source = tmp_path / "source"
    with WarcWriter(source, "hive-07", 10**9, 2, "hive/test", now=clock) as writer:
        for n in range(exchanges):
            writer.write_exchange(**exchange(n, **over))
        [open_file] = list(source.iterdir())
        data = open_file.read_bytes()
    ends, offset = [], 0
    for member in members_of(data):
        offset += member
        ends.append(offset)
    target = tmp_path / "target"
    target.mkdir()
    torn = target / open_file.name
    torn.write_bytes(data[: len(data) - cut])
    return torn, ends


def members_of(data: bytes) -> Iterator[int]:
    while data:
        inflater = zlib.decompressobj(31)
        inflater.decompress(data)
        yield len(data) - len(inflater.unused_data)
        data = inflater.unused_data


@pytest.mark.parametrize("tail", [None, 600], ids=["tail-default", "tail-grows"])
@pytest.mark.parametrize(
    ("cut_into", "responses_kept"),
    [("nothing", 3), ("last response", 2), ("after request", 2), ("first request", 0)],
)
def test_recover_cuts_to_the_last_complete_response(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut_into: str, responses_kept: int,
    tail: int | None,
) -> None:
    if tail is not None:
        monkeypatch.setattr(warc, "_TAIL", tail)
    full, ends = torn_copy(tmp_path, 3, 0)
    size = full.stat().st_size
    cut = {
        "nothing": 0,
        "last response": 7,
        "after request": size - ends[-2],
        "first request": size - ends[0] - 10,
    }[cut_into]
    torn, _ = torn_copy(tmp_path / cut_into.replace(" ", "_"), 3, cut)
    result = recover(torn)
    if responses_kept == 0:
        assert result is None
        assert list(torn.parent.iterdir()) == []
        return
    assert result is not None and result.name == torn.name.removesuffix(".open")
    assert not torn.exists()
    kept = list(members(result))
    assert sum(b"WARC-Type: response" in m for m in kept) == responses_kept
    assert b"WARC-Type: response" in kept[-1]
    assert check(result)


def test_recover_keeps_a_file_whose_last_whole_record_is_metadata(tmp_path: Path) -> None:
    torn, ends = torn_copy(tmp_path, 3, 0, hop_path="L")
    # warcinfo, then request, response and metadata per exchange: cut into the third request.
    assert len(ends) == 10
    os.truncate(torn, ends[6] + 10)
    result = recover(torn)
    assert result is not None and result.stat().st_size == ends[6]
    kept = list(members(result))
    assert sum(b"WARC-Type: response" in m for m in kept) == 2
    assert b"WARC-Type: metadata" in kept[-1]
    assert check(result)


def metadata_of(path: Path) -> list[tuple[str, str, str, dict[str, str]]]:
    """(type, target URI, concurrent-to, warc-fields) of each record after the warcinfo, in
    order, the fields read from a metadata record's block."""
    found = []
    with path.open("rb") as f:
        for record in ArchiveIterator(f):
            headers = record.rec_headers
            fields: dict[str, str] = {}
            if record.rec_type == "metadata":
                assert headers["Content-Type"] == "application/warc-fields"
                for line in record.content_stream().read().decode().splitlines():
                    name, _, value = line.partition(": ")
                    fields[name] = value
            if record.rec_type != "warcinfo":
                found.append((record.rec_type, headers["WARC-Target-URI"],
                              headers.get("WARC-Concurrent-To", ""), fields))
    return found


def test_a_metadata_record_says_how_each_url_was_reached(tmp_path: Path) -> None:
    """Heritrix's via and hopsFromSeed, concurrent to the response, after it; none when the
    hop path is not known; a CR or LF in a URL does not end a field."""
    ids: list[str] = []
    with WarcWriter(tmp_path, "hive-07", 10**9, 1, "hive/test", now=clock) as writer:
        for n, over in enumerate([
            {"hop_path": ""},
            {"via": "http://a.test/page/0", "hop_path": "LLE"},
            {},
            {"via": "http://a.test/x\r\nhopsFromSeed: forged", "hop_path": "P"},
        ]):
            ids.append(writer.write_exchange(**exchange(n, **over)).record_id)
        assert writer.stats()["warc/records"] == 1 + 3 + 2 + 3 + 3
    [path] = warc_files(tmp_path)
    assert check(path)
    found = metadata_of(path)
    page = [f"http://a.test/page/{n}" for n in range(4)]
    assert [(kind, url) for kind, url, _, _ in found] == [
        ("request", page[0]), ("response", page[0]), ("metadata", page[0]),
        ("request", page[1]), ("response", page[1]), ("metadata", page[1]),
        ("request", page[2]), ("response", page[2]),
        ("request", page[3]), ("response", page[3]), ("metadata", page[3]),
    ]
    metadata = [(to, fields) for kind, _, to, fields in found if kind == "metadata"]
    assert metadata == [
        (ids[0], {"hopsFromSeed": ""}),
        (ids[1], {"via": "http://a.test/page/0", "hopsFromSeed": "LLE"}),
        (ids[3], {"via": "http://a.test/x  hopsFromSeed: forged", "hopsFromSeed": "P"}),
    ]
    # Replay tools index the responses alone.
    assert len(cdxj.index_path(path).read_text().splitlines()) == 4


def test_metadata_records_are_off_unless_turned_on(tmp_path: Path) -> None:
    cfg = config.load(environ={})
    assert not cfg.warc.metadata_records
    off = dataclasses.replace(cfg.warc, metadata_records=False)
    with WarcWriter.from_config(off, tmp_path, "hive-07", "hive/test") as writer:
        writer.write_exchange(**exchange(0, via="http://a.test/", hop_path="L"))
    [path] = warc_files(tmp_path)
    assert [kind for kind, _, _, _ in metadata_of(path)] == ["request", "response"]


def test_other_prefixes_and_files_are_left_alone(tmp_path: Path) -> None:
    other = tmp_path / "hive-070-20240101000000-00004.warc.gz.open"
    other.write_bytes(b"not mine")
    done = tmp_path / "hive-07-20240101000000-00004.warc.gz"
    done.write_bytes(b"")
    with WarcWriter(tmp_path, "hive-07", 10**9, 2, "hive/test", now=clock) as writer:
        where = writer.write_exchange(**exchange(0))
    assert other.read_bytes() == b"not mine"
    assert where.filename.endswith("-00005.warc.gz")


def test_concurrent_threads_write_whole_pairs(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, "hive-07", 200_000, 1, "hive/test") as writer:

        def fetch_thread(t: int) -> None:
            for n in range(25):
                writer.write_exchange(**exchange(t * 100 + n))

        threads = [threading.Thread(target=fetch_thread, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert writer.stats()["warc/records"] == writer.stats()["warc/files"] + 400
    urls = set()
    for path in warc_files(tmp_path):
        assert check(path)
        with path.open("rb") as f:
            records = [r for r in ArchiveIterator(f) if r.rec_type != "warcinfo"]
            for request, response in zip(records[::2], records[1::2], strict=True):
                assert request.rec_headers.get_header(
                    "WARC-Concurrent-To"
                ) == response.rec_headers.get_header("WARC-Record-ID")
                urls.add(response.rec_headers.get_header("WARC-Target-URI"))
    assert len(urls) == 200


def test_failed_write_leaves_no_partial_record(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, "hive-07", 10**9, 2, "hive/test", now=clock)
    writer.write_exchange(**exchange(0))
    state = writer._file
    assert state is not None
    real = state._raw

    class DiskFull:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def write(self, data: memoryview) -> int:
            real.write(data[:100])
            raise OSError(28, "No space left on device")

    state._raw = DiskFull()  # type: ignore[assignment]
    with pytest.raises(OSError):
        writer.write_exchange(**exchange(1))
    state._raw = real
    writer.write_exchange(**exchange(2))
    writer.close()
    [path] = warc_files(tmp_path)
    assert check(path)
    assert len(list(members(path))) == 5


def test_failed_warcinfo_write_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = warc._FileState.write

    def disk_full(self: warc._FileState, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    writer = WarcWriter(tmp_path, "hive-07", 10**9, 2, "hive/test", now=clock)
    monkeypatch.setattr(warc._FileState, "write", disk_full)
    with pytest.raises(OSError):
        writer.write_exchange(**exchange(0))
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(warc._FileState, "write", real_write)
    writer.write_exchange(**exchange(1))
    writer.close()
    [path] = warc_files(tmp_path)
    assert check(path)
    assert writer.stats()["warc/records"] == 3


def test_from_config_and_bad_arguments(tmp_path: Path) -> None:
    cfg = config.load(environ={})
    writer = WarcWriter.from_config(cfg.warc, tmp_path, "hive-00", "hive/0.1")
    assert (writer.max_file_bytes, writer.gzip_level) == (
        cfg.warc.max_file_bytes, cfg.warc.gzip_level,
    )
    assert writer.stats() == {"warc/records": 0, "warc/bytes": 0, "warc/files": 0}
    writer.close()
    with pytest.raises(ValueError, match="gzip_level"):
        WarcWriter(tmp_path, "p", 1000, 4, "hive")
    with pytest.raises(ValueError, match="max_file_bytes"):
        WarcWriter(tmp_path, "p", 0, 2, "hive")


def test_pure_helpers() -> None:
    import base64

    for data in (b"", b"abc", os.urandom(1000)):
        expected = base64.b32encode(hashlib.sha1(data).digest()).decode()
        assert sha1_digest(data) == "sha1:" + expected
    assert warc_date(CLOCK) == "2024-06-01T12:00:00.250000Z"
    assert iso_date_to_datetime(warc_date(CLOCK)).microsecond == 250000
    for ts in (0.0, CLOCK + 0.9999996, CLOCK + 59.0000004, 2**31 + 0.5, 4102444799.999999):
        expected = datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        assert warc_date(ts) == expected, ts
    assert http_head("GET / HTTP/1.1", []) == b"GET / HTTP/1.1\r\n\r\n"
    assert http_head("HTTP/1.1 200 OK", [("X", "a\r\nInjected: 1"), ("Y", "\xe9")]) == (
        b"HTTP/1.1 200 OK\r\nX: a  Injected: 1\r\nY: \xe9\r\n\r\n"
    )
    assert rewrite_transfer_encoding([("transfer-encoding", "chunked"), ("A", "b")]) == [
        ("X-Crawler-Transfer-Encoding", "chunked"), ("A", "b"),
    ]
    record = warc_record([("WARC-Type", "resource")], b"abc")
    assert record == b"WARC/1.1\r\nWARC-Type: resource\r\nContent-Length: 3\r\n\r\nabc\r\n\r\n"
    assert zlib.decompress(gzip_member(record, 2), 31) == record


def test_record_ids_are_distinct_version_4_uuids() -> None:
    ids = [record_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    for value in ids[:100]:
        assert value.startswith("<urn:uuid:") and value.endswith(">")
        parsed = uuid.UUID(value[10:-1])
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == value[10:-1]


def test_the_request_record_is_the_request_as_the_server_received_it(tmp_path: Path) -> None:
    """Each request record's block is byte for byte what reached the server: header order,
    case and spacing as sent (a configured ``from:crawler@...`` with no space, an odd-cased
    name, the cookie the page set), never a parse of it written again."""
    def page_with_cookie(server: Server, sock: Any, head: bytes) -> bool:
        if b" /b " in head.partition(b"\r\n")[0]:
            return OK(server, sock, head)
        body = b"<a href='/b'>b</a>"
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nSet-Cookie: s=1\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        return True

    server = Server(page_with_cookie)
    cfg = config.load(environ={}).replace(
        dns={"resolve": ["raw.test=127.0.0.1"], "allow_nets": ["127.0.0.1/32"]},
        politeness={"min_delay": 0.01, "max_delay": 0.05},
        fetch={"threads": 1, "cookies": True,
               "headers": ["X-Odd-CASE:  two spaces", "from:crawler@example.test"]},
    )
    worker = Worker(cfg, tmp_path / "store", warc_dir=tmp_path / "warc", log_dir=tmp_path)
    try:
        worker.add([f"http://raw.test:{server.port}/"], 0.0)
        assert worker.run_until_idle(timeout=30)
    finally:
        worker.close()
        server.close()
    blocks = []
    for path in sorted((tmp_path / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            for record in ArchiveIterator(f, no_record_parse=True):
                if record.rec_type == "request":
                    blocks.append(record.raw_stream.read())
    assert [b.partition(b"\r\n")[0] for b in blocks] == [
        b"GET /robots.txt HTTP/1.1", b"GET / HTTP/1.1", b"GET /b HTTP/1.1"]
    assert b"\r\nX-Odd-CASE:  two spaces\r\nfrom:crawler@example.test\r\n" in blocks[1]
    assert b"\r\nCookie: s=1\r\n" in blocks[2]
    assert blocks == server.requests


def test_digest_text_is_base32() -> None:
    for sha1 in (bytes(20), b"\xff" * 20, *(os.urandom(20) for _ in range(2000))):
        assert warc_records.digest_text(sha1) == "sha1:" + base64.b32encode(sha1).decode()


def test_warc_date_rounds_as_datetime() -> None:
    """Microseconds half to even, a million carried into the next second, as
    datetime.fromtimestamp rounds them."""
    for ts in (CLOCK + 0.0000005, CLOCK + 0.0000015, CLOCK + 0.9999995, 1.4999995, 59.9999999,
               -0.0000005, -1.5, 1e9 + 0.5e-6, *(CLOCK + n / 7 for n in range(200))):
        expected = datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        assert warc_date(ts) == expected, ts


def test_record_ids_carry_into_their_upper_digits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept text of the upper 80 bits follows the counter's carry out of the last 48."""
    ids = warc_records._RecordIds()
    monkeypatch.setattr(ids, "_base", (1 << 48) - 3)
    values = [ids()[10:-1] for _ in range(6)]
    expected = [uuid.UUID(int=(((1 << 48) - 3 + k) & warc_records._UUID_RANDOM)
                          | warc_records._UUID_V4)
                for k in range(1, 7)]
    assert values == [str(value) for value in expected]


@pytest.mark.parametrize("headers", [
    [("Content-Type", "text/html"), ("Content-Length", "5")],
    [("Transfer-Encoding", "chunked"), ("X", "1")],
    [("TRANSFER-encoding", "chunked")],
    [("Vary", "Transfer-Encoding")],
    [("X", "a\r\nInjected: 1"), ("Y", "\xe9")],
    [("X", "\u20ac"), ("Transfer-Encoding\n", "chunked")],
    [],
])
def test_response_head_is_http_head_of_the_renamed_headers(headers: list[tuple[str, str]]) -> None:
    assert warc_records.stored_response_head("HTTP/1.1 200 OK", headers) == http_head(
        "HTTP/1.1 200 OK", rewrite_transfer_encoding(headers))


def test_an_open_files_index_lines_wait_on_disk_past_a_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past CAPTURE_RUN lines, an open file's index lines go to sorted runs (merged when
    there are MERGE_FAN_IN of them); the index written at close is the one read out of
    the file, and no run is left."""
    monkeypatch.setattr(warc, "CAPTURE_RUN", 3)
    monkeypatch.setattr(cdxj, "MERGE_FAN_IN", 4)
    with WarcWriter(tmp_path, "hive-07", 10**9, 1, "hive/test", now=clock) as writer:
        for n in range(40):
            writer.write_exchange(**exchange(39 - n))
            state = writer._file
            assert state is not None and len(state.lines) < 3 and len(state.runs) < 4
        assert any(warc.RUN_INFIX in p.name for p in tmp_path.iterdir())
    [written] = warc_files(tmp_path)
    assert cdxj.index_path(written).read_text().splitlines(keepends=True) == sorted(
        cdxj.index_file(written).lines)
    assert not [p for p in tmp_path.iterdir() if warc.RUN_INFIX in p.name]


def test_a_writers_memory_does_not_follow_its_open_file(tmp_path: Path) -> None:
    """Three runs' worth of records in one open file: what the writer holds stays under a
    run's lines (a worker kept every line of its open file, ~0.5 KB a page, until the
    file reached warc.max_file_bytes)."""
    import tracemalloc

    small = exchange(0, body=b"<p>x</p>", response_headers=[("Content-Type", "text/html")])
    with WarcWriter(tmp_path, "hive-07", 10**12, 1, "hive/test", now=clock) as writer:
        writer.write_exchange(**small)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            for n in range(3 * warc.CAPTURE_RUN):
                writer.write_exchange(**dict(small, url=f"http://a.test/page/{n}"))
            held = tracemalloc.get_traced_memory()[0] - base
        finally:
            tracemalloc.stop()
    assert held < warc.CAPTURE_RUN * 400, held


def test_a_crash_with_runs_is_indexed_from_the_file_and_its_runs_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warc, "CAPTURE_RUN", 2)
    writer = WarcWriter(tmp_path, "hive-07", 10**9, 1, "hive/test", now=clock)
    for n in range(7):
        writer.write_exchange(**exchange(n))
    assert writer._file is not None and writer._file.runs
    writer._file._raw.close()  # the process died: its file stays .open, its runs behind
    with WarcWriter(tmp_path, "hive-07", 10**9, 1, "hive/test", now=clock):
        [recovered] = warc_files(tmp_path)
        assert len(cdxj.index_path(recovered).read_text().splitlines()) == 7
        assert not [p for p in tmp_path.iterdir() if warc.RUN_INFIX in p.name]
