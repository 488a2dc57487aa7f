"""hive.fetch.client against real HTTP/1.1 servers on 127.0.0.1 (threads in this process).

Each server is a socket loop whose handler writes the bytes a test needs (keep-alive,
garbage, drips, endless chunks), so every failure mode is produced on the wire.
"""

from __future__ import annotations

import contextlib
import datetime
import gzip
import http.client
import io
import re
import socket
import ssl
import subprocess
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hive.config import load
from hive.errors import ConfigError
from hive.fetch import decoding
from hive.fetch.client import Fetcher, FetchResult
from hive.fetch.decoding import decode_body
from hive.fetch.headers import (
    content_codings,
    content_length,
    parse_retry_after,
    refresh_target,
    resolve_location,
    robots_nofollow,
)
from hive.fetch.pool import Connection
from hive.fetch.response import Headers, read_header_lines
from hive.netspec import Proxy
from hive.outcome import Kind
from tests.proxyserver import ConnectProxy

Handler = Callable[["Server", socket.socket, bytes], bool]  # True: keep the connection open


class Server:
    """A threaded HTTP/1.1 server on 127.0.0.1:0 that records connections and request heads."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.stop = threading.Event()
        self.connections = 0
        self.requests: list[bytes] = []
        self.server_names: list[str | None] = []
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while True:
            sock, _ = self.listener.accept()
            if self.stop.is_set():
                sock.close()
                return
            with self._lock:
                self.connections += 1
                self._socks.append(sock)
                thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
                self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_side=True)
                with self._lock:
                    self._socks.append(sock)
            buffer = b""
            while not self.stop.is_set():
                while b"\r\n\r\n" not in buffer:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                with self._lock:
                    self.requests.append(head + b"\r\n\r\n")
                if not self.handler(self, sock, head):
                    return
        except OSError:
            return
        finally:
            sock.close()

    def close(self) -> None:
        self.stop.set()
        with socket.create_connection(("127.0.0.1", self.port)):
            pass  # wakes the acceptor, which sees stop and returns
        self._acceptor.join(5)
        with self._lock:
            socks, threads = list(self._socks), list(self._threads)
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(5)
        self.listener.close()


def response(status: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items())]
    if "Transfer-Encoding" not in headers:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def replying(data: bytes) -> Handler:
    def handle(server: Server, sock: socket.socket, head: bytes) -> bool:
        sock.sendall(data)
        return True

    return handle


PAGE = b"<html><body><a href='/b'>b</a></body></html>"
OK = replying(response("200 OK", {"Content-Type": "text/html; charset=utf-8"}, PAGE))


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def start(handler: Handler, tls: ssl.SSLContext | None = None) -> Server:
        servers.append(Server(handler, tls))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def make_fetcher() -> Iterator[Callable[..., Fetcher]]:
    fetchers: list[Fetcher] = []

    def make(**overrides: Any) -> Fetcher:
        options: dict[str, Any] = dict(
            user_agent="hive-test/1.0 (+http://hive.test/bot)", connect_timeout=2.0,
            read_timeout=2.0, total_timeout=5.0, max_body_bytes=1_000_000,
            max_decoded_bytes=2_000_000, pool_connections=8,
        )
        options.update(overrides)
        fetchers.append(Fetcher(**options))
        return fetchers[-1]

    yield make
    for fetcher in fetchers:
        fetcher.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def get(fetcher: Fetcher, server: Server, path: str = "/", host: str = "site.test") -> FetchResult:
    return fetcher.fetch(f"http://{host}:{server.port}{path}", "127.0.0.1")


def test_ok_page_reuses_one_keep_alive_connection(serve: Any, make_fetcher: Any) -> None:
    server, fetcher = serve(OK), make_fetcher()
    results = [get(fetcher, server, f"/p{i}") for i in range(3)]
    assert [r.outcome for r in results] == ["ok"] * 3
    first = results[0]
    assert (first.status, first.body, first.raw_body, first.truncated) == (200, PAGE, PAGE, False)
    assert first.content_type == "text/html; charset=utf-8"
    assert first.status_line == "HTTP/1.1 200 OK"
    assert ("Content-Length", str(len(PAGE))) in first.headers
    assert first.address == "127.0.0.1" and first.message == ""
    assert first.started <= first.finished and first.download_time >= 0
    assert server.connections == 1
    stats = fetcher.stats()
    assert stats["fetch/requests"] == 3 and stats["fetch/outcome/ok"] == 3
    assert stats["fetch/bytes"] == 3 * len(PAGE)
    assert (stats["fetch/connections/opened"], stats["fetch/connections/reused"]) == (1, 2)


def test_request_goes_to_the_address_with_the_url_host(serve: Any, make_fetcher: Any) -> None:
    server, fetcher = serve(OK), make_fetcher()
    result = get(fetcher, server, "/a/b?x=1&y=2#frag")
    assert result.outcome == "ok"
    assert server.requests == [result.request_bytes]
    lines = result.request_bytes.decode("ascii").split("\r\n")
    assert lines[0] == "GET /a/b?x=1&y=2 HTTP/1.1"
    assert f"Host: site.test:{server.port}" in lines
    assert "User-Agent: hive-test/1.0 (+http://hive.test/bot)" in lines
    assert any(line.startswith("Accept-Encoding: gzip, deflate") for line in lines)


def test_default_port_is_left_out_of_host(make_fetcher: Any) -> None:
    _, _, _, request = make_fetcher()._request("http://Site.Test:80")
    assert request.startswith(b"GET / HTTP/1.1\r\nHost: site.test\r\n")


def test_a_request_larger_than_the_send_buffer_is_sent_whole() -> None:
    """What one write to the socket leaves over is sent by sendall, bounded by the socket's
    timeout: the peer gets the bytes whole and in order."""
    ours, theirs = socket.socketpair()
    data = bytes(range(256)) * 8192  # 2 MiB
    # More than the send buffer holds: the first write returns short however soon the
    # reader starts, since one write never takes more than the buffer has room for.
    assert ours.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) < len(data)
    received = bytearray()

    def drain() -> None:
        while len(received) < len(data):
            received.extend(theirs.recv(65536))

    reader = threading.Thread(target=drain)
    reader.start()
    ours.settimeout(5.0)
    conn = Connection(("http", "127.0.0.1", 80, "", ""), ours)
    try:
        conn.send(data)
        reader.join(5)
        assert bytes(received) == data
    finally:
        conn.close()
        theirs.close()


def test_a_body_ends_at_its_content_length_on_a_kept_alive_connection(
    serve: Any, make_fetcher: Any
) -> None:
    """The body is read up to Content-Length and no further: the next response on the
    connection starts where it ended, and an empty body reads as one."""
    replies = iter([response("200 OK", {}, b"first"), response("204 No Content", {}),
                    response("200 OK", {}, b""), response("200 OK", {}, b"last")])
    server = serve(lambda srv, sock, head: sock.sendall(next(replies)) or True)
    fetcher = make_fetcher()
    results = [get(fetcher, server, f"/{i}") for i in range(4)]
    assert [(r.outcome, r.body) for r in results] == [
        ("ok", b"first"), ("ok", b""), ("ok", b""), ("ok", b"last"),
    ]
    assert server.connections == 1


def test_404_is_an_http_outcome(serve: Any, make_fetcher: Any) -> None:
    server = serve(replying(response("404 Not Found", {}, b"gone")))
    result = get(make_fetcher(), server)
    assert (result.outcome, result.status, result.body) == ("http_404", 404, b"gone")
    assert result.outcome is Kind.http(404)  # the one enumerated type, not a loose string
    assert result.message == "HTTP/1.1 404 Not Found"


def test_301_is_reported_not_followed(serve: Any, make_fetcher: Any) -> None:
    server = serve(replying(response("301 Moved Permanently", {"Location": "/new?q=1"})))
    result = get(make_fetcher(), server, "/old")
    assert (result.outcome, result.status) == ("redirect", 301)
    assert result.location == f"http://site.test:{server.port}/new?q=1"
    assert len(server.requests) == 1


def test_3xx_without_location_is_an_http_outcome(serve: Any, make_fetcher: Any) -> None:
    result = get(make_fetcher(), serve(replying(response("304 Not Modified", {}))))
    assert (result.outcome, result.location) == ("http_304", None)


def test_429_retry_after_seconds_and_date(serve: Any, make_fetcher: Any) -> None:
    fetcher = make_fetcher()
    seconds = serve(replying(response("429 Too Many Requests", {"Retry-After": "120"})))
    result = get(fetcher, seconds)
    assert (result.outcome, result.retry_after) == ("http_429", 120.0)
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=300)
    date = when.strftime("%a, %d %b %Y %H:%M:%S GMT")
    dated = serve(replying(response("429 Too Many Requests", {"Retry-After": date})))
    result = get(fetcher, dated)
    assert result.outcome == "http_429"
    assert result.retry_after is not None and 295 <= result.retry_after <= 301


def test_parse_retry_after() -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert parse_retry_after(" 7 ", now) == 7.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", now) == 120.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now) == 0.0
    assert parse_retry_after("-5", now) is None
    assert parse_retry_after("soon", now) is None


# Any bytes a server sends in a header value, as the fetcher reads them (Latin-1).
HEADER_VALUE = st.binary(max_size=60).map(lambda b: b.decode("latin-1")) | st.text(max_size=40)
NASTY = st.sampled_from([
    "\u00b2", "\u0661\u0662", "1_0", "+5", "-0", " 7 ", "9" * 400, "1e3", "nan", "inf",
    "Mon, 01 Jan 99999 00:00:00 GMT", "Mon, 01 Jan 0 00:00:00 GMT",
    "Wed, 21 Oct 2015 07:28:00 +9999",
    "http://[::1", "http://[x]/", "//[", "0; url='", "url=", "\x00", "a: nofollow",
])


def test_parse_retry_after_reads_ascii_digits_only() -> None:
    now = 1445412480.0
    for value in ("\u00b2", "\u0661\u0662", "1_0", "+5", "1e3", "nan"):
        assert parse_retry_after(value, now) is None, value
    assert parse_retry_after("9" * 400, now) == 1e9
    assert parse_retry_after("Mon, 01 Jan 99999 00:00:00 GMT", now) is None
    assert content_length(" 12 ") == 12
    assert [content_length(v) for v in ("\u0661\u0662", "1_0", "+5", "-1", "", None)] == [None] * 6


@settings(max_examples=500, deadline=None)
@given(st.one_of(HEADER_VALUE, NASTY), st.floats(0, 4e9))
def test_header_parsers_never_raise(value: str, now: float) -> None:
    seconds = parse_retry_after(value, now)
    assert seconds is None or 0 <= seconds <= 1e9
    length = content_length(value)
    assert length is None or length >= 0
    assert all(isinstance(c, str) for c in content_codings(value))
    for parsed in (resolve_location("http://a.test/p", value),
                   refresh_target("http://a.test/p", value)):
        assert parsed is None or isinstance(parsed, str)
    assert isinstance(robots_nofollow([value, value], "hive"), bool)


@pytest.fixture(scope="module")
def echo_server() -> Iterator[tuple[Server, list[bytes]]]:
    """A server that answers every request with the response held in its list, then closes
    the connection: a body without a length ends there, not at the read timeout."""
    reply = [b""]
    server = Server(lambda srv, sock, head: sock.sendall(reply[0]) or False)
    yield server, reply
    server.close()


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["Retry-After", "Location", "Content-Length", "Content-Encoding",
                     "Content-Type", "Transfer-Encoding", "Connection", "Refresh"]),
    st.one_of(HEADER_VALUE, NASTY).map(lambda v: v.replace("\r", "").replace("\n", "")),
    st.sampled_from(["200 OK", "301 Moved", "429 Too Many Requests", "503 Busy"]),
)
def test_no_header_value_makes_the_fetcher_raise(
    echo_server: tuple[Server, list[bytes]], name: str, value: str, status: str
) -> None:
    server, reply = echo_server
    head = f"HTTP/1.1 {status}\r\n{name}: {value}\r\nConnection: close\r\n\r\n"
    reply[0] = head.encode("latin-1", "replace") + b"body"
    with Fetcher("hive-test/1.0", 2.0, 2.0, 5.0, 10_000, 10_000, 1) as fetcher:
        result = fetcher.fetch(f"http://site.test:{server.port}/", "127.0.0.1")
    assert result.status is not None or result.outcome in ("protocol", "connect")
    assert result.retry_after is None or 0 <= result.retry_after <= 1e9


@pytest.mark.parametrize(
    ("coding", "encode"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda data: zlib.compress(data, wbits=-15)),
    ],
)
def test_encoded_body_is_decoded_and_raw_kept(
    serve: Any, make_fetcher: Any, coding: str, encode: Callable[[bytes], bytes]
) -> None:
    encoded = encode(PAGE * 100)
    server = serve(replying(response("200 OK", {"Content-Encoding": coding}, encoded)))
    result = get(make_fetcher(), server)
    assert (result.outcome, result.body, result.raw_body) == ("ok", PAGE * 100, encoded)
    assert result.decoded


@pytest.mark.parametrize(("coding", "body", "decoded"), [
    ("identity", PAGE, True),
    ("gzip", b"not gzip at all", False),  # a corrupt stream: outcome protocol
    ("compress", PAGE, False),  # a coding hive does not decode: outcome ok, body as received
])
def test_the_result_says_whether_its_body_is_decoded(
    serve: Any, make_fetcher: Any, coding: str, body: bytes, decoded: bool
) -> None:
    """``decoded`` tells the sinks whether ``body`` is the page with its codings undone
    (the text sink reads it instead of decoding again)."""
    server = serve(replying(response("200 OK", {"Content-Encoding": coding}, body)))
    assert get(make_fetcher(), server).decoded is decoded


def test_gzip_bomb_stops_at_max_decoded_bytes(serve: Any, make_fetcher: Any) -> None:
    bomb = gzip.compress(b"\0" * 5_000_000)
    server = serve(replying(response("200 OK", {"Content-Encoding": "gzip"}, bomb)))
    fetcher = make_fetcher(max_decoded_bytes=100_000)
    result = get(fetcher, server)
    assert result.outcome == "decoded_too_large"
    assert result.raw_body == bomb and len(result.body) == 100_000
    assert result.decoded  # the first max_decoded_bytes, decoded
    assert fetcher.stats()["fetch/outcome/decoded_too_large"] == 1


def test_decode_body_edge_cases() -> None:
    members = gzip.compress(b"one ") + gzip.compress(b"two")
    assert decode_body(members, ["gzip"], 100) == (b"one two", None, "")
    assert decode_body(b"plain", ["identity"], 100) == (b"plain", None, "")
    undecoded = (b"zzz", None, "content-encoding 'compress' left undecoded")
    assert decode_body(b"zzz", ["compress"], 100) == undecoded
    body, problem, note = decode_body(b"not gzip", ["gzip"], 100)
    assert (body, problem) == (b"", "protocol") and note.startswith("bad gzip body")
    layered = gzip.compress(zlib.compress(b"inner"))
    assert decode_body(layered, ["deflate", "gzip"], 100) == (b"inner", None, "")


EMPTY_MEMBER = gzip.compress(b"", mtime=0)  # 20 bytes that decode to nothing


def decode_cpu(body: bytes) -> float:
    """The least thread CPU time of three decodings of body as gzip."""
    times = []
    for _ in range(3):
        start = time.thread_time()
        assert decode_body(body, ["gzip"], 1 << 30) == (b"", None, "")
        times.append(time.thread_time() - start)
    return min(times)


def test_decoding_empty_gzip_members_is_linear_in_the_body() -> None:
    # Each member once copied the whole rest of the body: 1 MB took 1.2 s, 9 MB 241 s.
    small = EMPTY_MEMBER * 12_500  # 250 KB
    large = small * 8  # 2 MB: eight times the work if linear, 64 if quadratic
    ratio = decode_cpu(large) / max(decode_cpu(small), 1e-3)
    assert ratio < 20, f"8x the members cost {ratio:.1f}x the CPU"


def test_decoding_stops_at_the_deadline() -> None:
    body = EMPTY_MEMBER * 1_000_000  # 20 MB of members: seconds of CPU
    assert decode_body(body, ["gzip"], 1 << 30, time.monotonic() - 1) == (
        b"", "timeout", "total timeout while decoding gzip",
    )
    start = time.monotonic()
    _, problem, _ = decode_body(body, ["gzip"], 1 << 30, start + 0.2)
    assert problem == "timeout" and time.monotonic() - start < 2.0


def test_more_than_four_codings_are_refused_unread() -> None:
    # Each layer could hold the next (20 bytes more a layer): quadratic work in the layers.
    layered = b"x"
    for _ in range(5):
        layered = gzip.compress(layered)
    assert decode_body(gzip.decompress(layered), ["gzip"] * 4 + ["identity"], 100) == (
        b"x", None, "",
    )
    assert decode_body(layered, ["gzip"] * 5, 100) == (
        b"", "protocol", "5 content codings (at most 4 decoded)",
    )


def test_a_response_slow_to_decode_ends_at_total_timeout(
    serve: Any, make_fetcher: Any
) -> None:
    # A 97 KB transfer whose inner layer is 40 MB of empty gzip members (seconds to decode).
    inner = EMPTY_MEMBER * 2_000_000
    body = gzip.compress(inner)
    server = serve(replying(response("200 OK", {"Content-Encoding": "gzip, gzip"}, body)))
    fetcher = make_fetcher(total_timeout=1.0, max_decoded_bytes=len(inner))
    start = time.monotonic()
    result = get(fetcher, server)
    assert (result.outcome, result.body, result.raw_body) == ("timeout", b"", body)
    assert result.message == "total timeout while decoding gzip"
    assert time.monotonic() - start < 1.0 + 1.5


def test_br_left_undecoded_without_brotli(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decoding, "_brotli", None)
    assert decode_body(b"\x0b\x02\x80hi\x03", ["br"], 100)[1:] == (
        None, "content-encoding 'br' left undecoded",
    )


def test_br_decoded_with_a_bound_when_brotli_is_installed() -> None:
    brotli = pytest.importorskip("brotli")
    if decoding._brotli is None:
        pytest.skip("brotli module without bounded decoding")
    assert decode_body(brotli.compress(PAGE), ["br"], 1000) == (PAGE, None, "")
    body, problem, _ = decode_body(brotli.compress(b"\0" * 5_000_000), ["br"], 100_000)
    assert (len(body), problem) == (100_000, "decoded_too_large")


def chunked(pieces: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def test_chunked_body_is_dechunked_in_raw_body(serve: Any, make_fetcher: Any) -> None:
    head = response("200 OK", {"Transfer-Encoding": "chunked"})
    server = serve(replying(head + chunked([b"Hello, ", b"chunked ", b"world"])))
    fetcher = make_fetcher()
    first, second = get(fetcher, server), get(fetcher, server)
    whole = b"Hello, chunked world"
    assert (first.outcome, first.raw_body, first.body) == ("ok", whole, whole)
    assert second.outcome == "ok" and server.connections == 1


def endless_chunks(server: Server, sock: socket.socket, head: bytes) -> bool:
    sock.sendall(response("200 OK", {"Transfer-Encoding": "chunked"}))
    piece = b"%x\r\n%s\r\n" % (8192, b"a" * 8192)
    while not server.stop.is_set():
        sock.sendall(piece)
    return False


def test_endless_body_stops_at_max_body_bytes(serve: Any, make_fetcher: Any) -> None:
    server = serve(endless_chunks)
    fetcher = make_fetcher(max_body_bytes=100_000)
    result = get(fetcher, server)
    assert (result.outcome, result.status, result.truncated) == ("too_large", 200, True)
    assert result.raw_body == b"a" * 100_000 and result.body == result.raw_body
    robots = f"http://site.test:{server.port}/robots.txt"
    small = fetcher.fetch(robots, "127.0.0.1", max_body_bytes=10)
    assert (small.outcome, small.raw_body) == ("too_large", b"a" * 10)
    assert server.connections == 2  # a cut connection is not reused


def drip(head_first: bool) -> Handler:
    def handle(server: Server, sock: socket.socket, head: bytes) -> bool:
        if head_first:
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        while not server.stop.wait(0.05):
            sock.sendall(b"x")
        return False

    return handle


@pytest.mark.parametrize("head_first", [True, False], ids=["body", "head"])
def test_slow_drip_stops_at_total_timeout(serve: Any, make_fetcher: Any, head_first: bool) -> None:
    server = serve(drip(head_first))
    fetcher = make_fetcher(read_timeout=2.0, total_timeout=0.5)
    t0 = time.monotonic()
    result = get(fetcher, server)
    assert time.monotonic() - t0 < 1.5
    assert result.outcome == "timeout" and result.message.startswith("total timeout (0.5 s)")
    if head_first:
        assert result.status == 200 and result.truncated and 0 < len(result.raw_body) < 1000
    else:
        assert result.status is None and result.status_line == ""


def test_connection_refused(make_fetcher: Any) -> None:
    result = make_fetcher().fetch(f"http://site.test:{closed_port()}/", "127.0.0.1")
    assert (result.outcome, result.status) == ("connect", None)
    assert "ConnectionRefusedError" in result.message


def silent(server: Server, sock: socket.socket, head: bytes) -> bool:
    server.stop.wait(10)
    return False


def test_read_timeout(serve: Any, make_fetcher: Any) -> None:
    server = serve(silent)
    t0 = time.monotonic()
    result = get(make_fetcher(read_timeout=0.3, total_timeout=5.0), server)
    assert time.monotonic() - t0 < 2
    assert result.outcome == "timeout" and result.message.startswith("read timeout (0.3 s)")


@pytest.mark.parametrize(
    "reply",
    [
        b"garbage instead of HTTP\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nbad\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",
    ],
    ids=["garbage", "bad-chunk", "short-body"],
)
def test_malformed_response_is_protocol(serve: Any, make_fetcher: Any, reply: bytes) -> None:
    def once(server: Server, sock: socket.socket, head: bytes) -> bool:
        sock.sendall(reply)
        return False

    result = get(make_fetcher(), serve(once))
    assert result.outcome == "protocol", result.message


def test_closed_without_response_is_connect(serve: Any, make_fetcher: Any) -> None:
    result = get(make_fetcher(), serve(lambda server, sock, head: False))
    assert result.outcome == "connect" and "RemoteDisconnected" in result.message


def test_server_closing_idle_connection_is_replaced(serve: Any, make_fetcher: Any) -> None:
    def close_after(server: Server, sock: socket.socket, head: bytes) -> bool:
        sock.sendall(response("200 OK", {}, b"once"))
        return False  # closes without saying Connection: close

    server = serve(close_after)
    fetcher = make_fetcher()
    assert [get(fetcher, server).outcome for _ in range(3)] == ["ok"] * 3
    assert server.connections == 3


def test_interim_103_is_skipped(serve: Any, make_fetcher: Any) -> None:
    early = b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
    result = get(make_fetcher(), serve(replying(early + response("200 OK", {}, b"final"))))
    assert (result.outcome, result.body) == ("ok", b"final")


def test_proxy_environment_is_ignored(
    serve: Any, make_fetcher: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = f"http://127.0.0.1:{closed_port()}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, proxy)
        monkeypatch.setenv(name.lower(), proxy)
    server = serve(OK)
    result = get(make_fetcher(), server)
    assert result.outcome == "ok" and len(server.requests) == 1


def test_pool_keeps_at_most_pool_connections(serve: Any, make_fetcher: Any) -> None:
    a, b = serve(OK), serve(OK)
    fetcher = make_fetcher(pool_connections=1)
    for _ in range(3):
        assert get(fetcher, a).outcome == "ok" and get(fetcher, b).outcome == "ok"
    assert (a.connections, b.connections) == (3, 3)


def test_threads_share_one_fetcher(serve: Any, make_fetcher: Any) -> None:
    server, fetcher = serve(OK), make_fetcher(pool_connections=4)
    outcomes: list[str] = []

    def work() -> None:
        for _ in range(10):
            outcomes.append(get(fetcher, server).outcome)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert outcomes == ["ok"] * 40
    assert fetcher.stats()["fetch/requests"] == 40
    assert server.connections <= 4


@pytest.mark.parametrize(
    ("url", "address", "fragment"),
    [
        ("ftp://site.test/", "127.0.0.1", "invalid URL: unsupported scheme"),
        ("http:///nohost", "127.0.0.1", "invalid URL: no host"),
        ("http://site.test/a b", "127.0.0.1", "invalid URL: characters"),
        ("http://site.test:99999/", "127.0.0.1", "invalid URL: Port out of range"),
        ("http://site.test/", "localhost", "not an IP address"),
    ],
)
def test_bad_input_is_an_error_outcome(
    make_fetcher: Any, url: str, address: str, fragment: str
) -> None:
    result = make_fetcher().fetch(url, address)
    assert result.outcome == "error" and fragment in result.message


def test_from_config_scales_the_pool_by_threads() -> None:
    cfg = load(environ={}).fetch
    with Fetcher.from_config(cfg) as fetcher:
        assert fetcher._pool._capacity == cfg.pool_connections * cfg.threads
        assert fetcher.total_timeout == cfg.total_timeout


# TLS: a test CA signs a certificate for site.test; the server records the SNI it is sent.


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def cert(subject: str, key: Any, issuer: str, signer: Any, ca: bool) -> Any:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    ca = cert("hive test CA", ca_key, "hive test CA", ca_key, True)
    leaf = cert("site.test", leaf_key, "hive test CA", ca_key, False)
    folder = tmp_path_factory.mktemp("tls")
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    (folder / "cert.pem").write_bytes(leaf.public_bytes(pem))
    (folder / "key.pem").write_bytes(
        leaf_key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return folder / "ca.pem", folder / "cert.pem", folder / "key.pem"


@pytest.fixture
def tls_server(serve: Any, tls_files: tuple[Path, Path, Path]) -> Server:
    _, cert, key = tls_files
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server: Server = serve(OK, context)
    context.sni_callback = lambda sslobj, name, ctx: server.server_names.append(name)
    return server


def test_https_uses_the_url_host_for_sni_and_the_certificate(
    tls_server: Server, tls_files: tuple[Path, Path, Path], make_fetcher: Any
) -> None:
    trusting = ssl.create_default_context(cafile=str(tls_files[0]))
    fetcher = make_fetcher(ssl_context=trusting)
    url = f"https://site.test:{tls_server.port}/"
    assert [fetcher.fetch(url, "127.0.0.1").outcome for _ in range(2)] == ["ok", "ok"]
    assert tls_server.server_names == ["site.test"] and tls_server.connections == 1
    assert f"Host: site.test:{tls_server.port}".encode() in tls_server.requests[0]
    other = fetcher.fetch(f"https://other.test:{tls_server.port}/", "127.0.0.1")
    assert other.outcome == "tls" and "other.test" in other.message


def test_https_with_an_unknown_ca_is_tls(tls_server: Server, make_fetcher: Any) -> None:
    result = make_fetcher().fetch(f"https://site.test:{tls_server.port}/", "127.0.0.1")
    assert result.outcome == "tls" and "certificate verify failed" in result.message


# --- the header block, parsed without the email package ------------------------------------

FIELD_NAME = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", min_size=1,
                     max_size=20)
FIELD_VALUE = st.text(st.characters(min_codepoint=0x21, max_codepoint=0xFF,
                                    blacklist_characters="\x7f"), max_size=30).map(
    lambda v: v.replace(":", ";")
)
WORD = FIELD_VALUE.filter(bool)
FIELDS = st.lists(
    st.tuples(FIELD_NAME, st.one_of(st.just(""), WORD, st.tuples(WORD, WORD).map(" ".join))),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(FIELDS, st.sampled_from([b"\r\n", b"\n"]), st.sampled_from(["", " ", "  "]))
def test_headers_read_as_http_client_reads_them(
    fields: list[tuple[str, str]], newline: bytes, space: str
) -> None:
    block = b"".join(f"{n}:{space}{v}".encode("latin-1") + newline for n, v in fields) + newline
    ours = Headers(read_header_lines(io.BytesIO(block)))
    theirs = http.client.parse_headers(io.BytesIO(block))
    assert ours.items() == theirs.items()
    for name, _ in fields:
        for spelled in (name, name.lower(), name.upper()):
            assert ours.get(spelled) == theirs.get(spelled)
    assert ours.get("no-such-field") is None and ours.get("no-such-field", "x") == "x"


def test_header_block_limits_and_odd_lines() -> None:
    folded = Headers(read_header_lines(io.BytesIO(
        b"X-A: one\r\n  two\r\nno colon here\r\nX-B:\tb \r\n\r\nbody"
    )))
    assert folded.items() == [("X-A", "one two"), ("X-B", "b")]
    with pytest.raises(http.client.LineTooLong):
        read_header_lines(io.BytesIO(b"X: " + b"a" * 70_000 + b"\r\n\r\n"))
    with pytest.raises(http.client.HTTPException, match="more than 100 headers"):
        read_header_lines(io.BytesIO(b"X: a\r\n" * 101 + b"\r\n"))
    assert read_header_lines(io.BytesIO(b"X: a\r\n" * 100 + b"\r\n"))[-1] == b"X: a\r\n"


# --- fetch options: CAs added to the system's, verification off, extra headers -----------


def test_ca_file_is_trusted_besides_the_system_store(
    tls_server: Server, tls_files: tuple[Path, Path, Path], make_fetcher: Any
) -> None:
    fetcher = make_fetcher(ca_file=str(tls_files[0]))
    result = fetcher.fetch(f"https://site.test:{tls_server.port}/", "127.0.0.1")
    assert (result.outcome, result.body) == ("ok", PAGE)
    system = ssl.create_default_context().cert_store_stats()["x509_ca"]
    assert fetcher._tls().cert_store_stats()["x509_ca"] == system + 1


def test_ca_dir_prepared_by_openssl_rehash_is_trusted(
    tls_server: Server, tls_files: tuple[Path, Path, Path], make_fetcher: Any, tmp_path: Path
) -> None:
    (tmp_path / "test-ca.pem").write_bytes(tls_files[0].read_bytes())
    subprocess.run(["openssl", "rehash", str(tmp_path)], check=True, capture_output=True)
    result = make_fetcher(ca_dir=str(tmp_path)).fetch(
        f"https://site.test:{tls_server.port}/", "127.0.0.1"
    )
    assert result.outcome == "ok", result.message


def test_verify_tls_off_fetches_an_unknown_ca_and_says_so_loudly(
    tls_server: Server, make_fetcher: Any, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"https://other.test:{tls_server.port}/"  # neither the CA nor the name is right
    assert make_fetcher().fetch(url, "127.0.0.1").outcome == "tls"
    with caplog.at_level("WARNING", logger="hive.fetch.client"):
        fetcher = make_fetcher(verify_tls=False)
    assert "NOT checked" in caplog.text
    assert fetcher.fetch(url, "127.0.0.1").outcome == "ok"


def test_extra_headers_and_a_cookie_are_sent(serve: Any, make_fetcher: Any) -> None:
    server = serve(OK)
    fetcher = make_fetcher(headers=["From: bot@hive.test", "Accept-Language: fr, en;q=0.5"])
    result = fetcher.fetch(f"http://site.test:{server.port}/", "127.0.0.1", cookie="a=1; b=2")
    assert result.outcome == "ok"
    head = server.requests[0]
    assert head.endswith(b"From: bot@hive.test\r\nAccept-Language: fr, en;q=0.5\r\n"
                         b"Cookie: a=1; b=2\r\n\r\n")
    assert result.request_bytes == head


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        ("headers", ["From bot@hive.test"], "fetch.headers: expected 'Name: value'"),
        ("headers", ["Cookie: a=1"], "fetch.headers: Cookie is set by the fetcher"),
        ("headers", ["X-A: 1\r\nX-B: 2"], "fetch.headers: expected"),
        ("ca_file", "/no/such/ca.pem", "fetch.ca_file: no such file"),
        ("ca_dir", "/no/such/dir", "fetch.ca_dir: no such directory"),
        ("ca_file", __file__, "fetch.ca_file: no CA certificate in"),
    ],
)
def test_bad_fetch_options_are_refused_by_name(key: str, value: object, error: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(error)):
        load(environ={}).replace(fetch={key: value})


# --- a proxy: every request tunnelled by CONNECT to the address judged ----------------------


@pytest.fixture
def proxy() -> Iterator[ConnectProxy]:
    server = ConnectProxy(refuse=frozenset({"127.0.0.9:80"}))
    yield server
    server.close()


def test_http_and_https_go_through_the_proxy_by_connect(
    serve: Any, tls_server: Server, tls_files: tuple[Path, Path, Path],
    proxy: ConnectProxy, make_fetcher: Any,
) -> None:
    plain = serve(OK)
    fetcher = make_fetcher(ca_file=str(tls_files[0]), proxy=Proxy.parse(proxy.url, []))
    for url in (f"http://site.test:{plain.port}/", f"https://site.test:{tls_server.port}/",
                f"http://site.test:{plain.port}/again"):
        result = fetcher.fetch(url, "127.0.0.1", via="127.0.0.1")
        assert (result.outcome, result.body) == ("ok", PAGE), result.message
    # One tunnel a server (the second plain request reused its), to the address given.
    assert proxy.targets == [f"127.0.0.1:{plain.port}", f"127.0.0.1:{tls_server.port}"]
    assert plain.requests[1].startswith(b"GET /again HTTP/1.1\r\nHost: site.test:")
    assert tls_server.server_names == ["site.test"]
    assert fetcher.fetch(f"http://site.test:{plain.port}/", "127.0.0.1").outcome == "ok"
    assert len(proxy.targets) == 2  # direct when not asked to go via the proxy


def test_a_proxy_refusing_the_tunnel_is_a_connect_outcome(
    proxy: ConnectProxy, make_fetcher: Any
) -> None:
    fetcher = make_fetcher(proxy=Proxy.parse(proxy.url.replace("http://", "http://u:p%40@"), []))
    result = fetcher.fetch("http://site.test/", "127.0.0.9", via="127.0.0.1")
    assert result.outcome == "connect" and "403 Forbidden" in result.message
    assert b"Proxy-Authorization: Basic dTpwQA==\r\n" in proxy.heads[0]  # u:p@


def test_proxy_settings_are_checked_by_name() -> None:
    assert Proxy.parse("", ["x"]) is None
    bypass = Proxy.parse("http://10.0.0.5:3128", ["Example.org.", "*.ignored", ""])
    assert bypass is not None and bypass.port == 3128
    assert bypass.bypassed("example.org") and bypass.bypassed("www.example.org")
    assert not bypass.bypassed("notexample.org")
    assert Proxy.parse("http://p.test", ["*"]).bypassed("any.test")  # type: ignore[union-attr]
    for bad in ("socks5://10.0.0.5:1080", "http://[::1", "10.0.0.5:3128", "http://h/path"):
        with pytest.raises(ConfigError, match="fetch.proxy: "):
            load(environ={}).replace(fetch={"proxy": bad})
    with pytest.raises(ConfigError, match="fetch.proxy_allow_nets: bad network"):
        load(environ={}).replace(fetch={"proxy_allow_nets": ["10.0.0.0/33"]})


def test_a_proxy_dripping_its_answer_stops_at_total_timeout(make_fetcher: Any) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip() -> None:
        sock, _ = listener.accept()
        with sock:
            while not stop.wait(0.2):
                with contextlib.suppress(OSError):
                    sock.sendall(b"H")

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    proxy = Proxy.parse(f"http://127.0.0.1:{listener.getsockname()[1]}", [])
    fetcher = make_fetcher(proxy=proxy, total_timeout=1.0, connect_timeout=1.0)
    start = time.monotonic()
    result = fetcher.fetch("http://site.test/", "127.0.0.1", via="127.0.0.1")
    stop.set()
    thread.join(5)
    listener.close()
    assert result.outcome == "timeout" and time.monotonic() - start < 3.0
