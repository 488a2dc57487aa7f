"""What is sent is the canonical URL's bytes, and the WARC record names what was sent;
session ids are sent, and one page under many sessions is fetched once."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from hive import config
from hive.core.urls import canonicalize
from hive.errors import URLError
from hive.fetch.client import _CANONICAL, Fetcher
from hive.frontier.verify import verify_store
from hive.procs.worker import Worker

PAGE = b"""<!doctype html><title>spellings</title>
<a href="/a?">empty query</a> <a href="/a">no query</a> <a href="/b?%zz&x=%4">lone percent</a>
<a href="/s?PHPSESSID=0123456789abcdef&p=1">a session</a>
<a href="/s?p=1&PHPSESSID=fedcba9876543210">another</a>
<a href="/s;jsessionid=A1B2?p=1">one more</a>
<a href="/s?p=1&sid=42">not a session</a>
"""


@pytest.fixture
def site() -> Iterator[tuple[int, list[str]]]:
    """A server on 127.0.0.1 answering every page with PAGE and recording request lines."""
    lines: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            lines.append(self.requestline)
            status, body = (404, b"") if self.path == "/robots.txt" else (200, PAGE)
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], lines
    finally:
        server.shutdown()
        server.server_close()


def test_each_spelling_is_asked_for_as_itself(site: tuple[int, list[str]], tmp_path: Path) -> None:
    port, lines = site
    cfg = config.load(environ={}).replace(
        dns={"resolve": ["site.test=127.0.0.1"], "allow_nets": ["127.0.0.1/32"]},
        politeness={"min_delay": 0.01, "max_delay": 0.05},
        fetch={"threads": 2},
    )
    worker = Worker(cfg, tmp_path / "store", warc_dir=tmp_path / "warc", log_dir=tmp_path)
    worker.add([f"http://site.test:{port}/"], time.time())
    finished = worker.run_until_idle(timeout=30)
    worker.close()
    assert finished
    pages = sorted(line for line in lines if "robots.txt" not in line)
    assert pages == [
        "GET / HTTP/1.1", "GET /a HTTP/1.1", "GET /a? HTTP/1.1", "GET /b?%zz&x=%4 HTTP/1.1",
        "GET /s?PHPSESSID=0123456789abcdef&p=1 HTTP/1.1", "GET /s?p=1&sid=42 HTTP/1.1",
    ]
    assert verify_store(tmp_path / "store", session_ids=cfg.scope.session_ids).ok
    sent = []
    for path in (tmp_path / "warc").glob("*.warc.gz"):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type == "request":
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    target = uri[len(f"http://site.test:{port}") :]
                    assert record.http_headers.protocol == "GET"  # warcio: the method
                    assert record.http_headers.statusline == f"{target} HTTP/1.1", uri
                    sent.append(target)
    assert sorted(sent) == [
        "/", "/a", "/a?", "/b?%zz&x=%4", "/robots.txt", "/s?PHPSESSID=0123456789abcdef&p=1",
        "/s?p=1&sid=42",
    ]


URL_PIECES = st.sampled_from([
    "http://", "https://", "HTTP://", "ftp://", "a", "Z", "0", "-", ".", "_", ":", "/", "?", "#",
    "@", "[", "]", "%", "~", '"', " ", "\t", "\n", "\x00", "\x7f", "é", ":80", ":443", ":0",
    ":080", ":8080", ":65535", ":65536", ":99999",
])


@settings(max_examples=2000, deadline=None)
@given(st.sampled_from(["http://", "https://", ""]), st.lists(URL_PIECES, max_size=12))
def test_the_canonical_fast_path_asks_as_the_general_reading(
    prefix: str, pieces: list[str]
) -> None:
    """The request a URL makes (or the ValueError it raises) is the same whether the
    canonical-URL match reads it or urlsplit does."""
    fetcher = Fetcher("ua", 1, 1, 1, 1, 1, 1)
    url = prefix + "".join(pieces)

    def read(how: Callable[[str], tuple[str, str, int, bytes]]) -> object:
        try:
            return how(url)
        except ValueError as exc:
            return str(exc)

    assert read(fetcher._request) == read(fetcher._any_request)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(["http", "https"]), st.from_regex(r"[a-z0-9-]{1,8}(\.[a-z0-9-]{1,8}){0,2}",
       fullmatch=True), st.sampled_from(["", ":80", ":443", ":8080"]),
       st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=20))
def test_canonical_urls_take_the_fast_path(scheme: str, host: str, port: str, path: str) -> None:
    try:
        url = canonicalize(f"{scheme}://{host}{port}/{path}")
    except URLError:
        return
    fetcher = Fetcher("ua", 1, 1, 1, 1, 1, 1)
    assert _CANONICAL.fullmatch(url) is not None, url
    assert fetcher._request(url) == fetcher._any_request(url)
