"""The HTTP client of a worker: one GET, its bytes kept, its failure turned into data.

Every request a worker makes, pages and robots.txt alike, goes through
:class:`Fetcher`. It owns the connections, the timeouts, the size caps and the
content decoding, and it is the one place where library exceptions become
outcome kinds (:data:`OUTCOME_KINDS`), by one declared table
(:data:`EXCEPTION_KINDS`): :meth:`Fetcher.fetch` never raises for a failed
fetch, it returns a :class:`FetchResult` that says what happened.

Policy:

* **Where it connects.** The caller has resolved the name and checked the
  address; the fetcher connects to exactly that address (an IP literal, nothing
  is looked up here) and uses the URL's host only for ``Host``, TLS SNI and the
  certificate check, or tunnels to that address through the configured proxy
  (hive.netspec). No proxy is taken from the environment and no redirect is
  followed: a 3xx is an outcome whose target the frontier queues as a new URL.
* **No retries but one.** A kept-alive connection that fails before a status
  line arrives is replaced once by a new one (the server may have closed it
  while it sat idle); any other failure is the outcome.
* **Time.** ``connect_timeout`` bounds the TCP connect and the TLS handshake,
  ``read_timeout`` any one wait for bytes, and ``total_timeout`` the whole
  exchange by the wall clock, status line, headers and content decoding
  included, so a server that drips bytes, or sends a body slow to decode,
  cannot hold a fetch thread longer.
* **Size.** The body is read in 64 KiB pieces and cut at ``max_body_bytes``
  (``too_large``, truncated; what arrived is kept). It is decoded afterwards by
  hive.fetch.decoding (gzip, deflate, br where a bounded decoder exists) and
  cut at ``max_decoded_bytes`` (``decoded_too_large``: a decompression bomb).
  A content coding it cannot decode is left as it came and named in
  ``message``. The header block is capped as http.client caps it
  (hive.fetch.response); header values are read by hive.fetch.headers, where
  nothing raises.
* **Connections.** Idle keep-alive connections wait in one pool shared by the
  fetch threads (hive.fetch.pool), ``pool_connections`` in all.

Why ``http.client`` and not ``requests`` or a urllib3 pool: measured with
bench/bench_fetch.py (2000 keep-alive GETs of a 20 KB page over loopback, CPU of
the client process per page), a ``requests.Session`` costs 0.9-1.4 ms (2.1 ms
when it also reads proxy settings from the environment), a bare urllib3
``HTTPConnectionPool.urlopen`` 0.33-0.50 ms, bare ``http.client`` 0.17-0.23 ms,
and this fetcher, deadline, caps and bookkeeping included, 0.19-0.23 ms (4
threads sharing it: 0.19-0.28 ms). The crawler's whole budget is 1.3 ms per
page. Owning the socket also lets one reader bound every receive by the total
deadline, headers included, which neither library offers; ``http.client``
still parses the status line, the headers and the chunked framing.
"""

from __future__ import annotations

import dataclasses
import http.client
import logging
import re
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import cast
from urllib.parse import urlsplit

from hive.config import FetchConfig
from hive.fetch.decoding import accept_encoding, decode_body
from hive.fetch.headers import content_codings, parse_retry_after, resolve_location
from hive.fetch.pool import Connection, IdlePool, PoolKey
from hive.fetch.response import CHUNK, MAX_HEADER_LINE, Response, TotalTimeout
from hive.netspec import Proxy
from hive.outcome import Kind
from hive.outcome import kind as outcome_kind

log = logging.getLogger(__name__)

# Outcome kinds, besides http_<status> for any other status (http_404, http_429, http_503):
#   ok                 a 2xx response, read whole and decoded
#   redirect           a 3xx with a Location (FetchResult.location, resolved)
#   dns                the name did not resolve: the worker's kind, never produced here
#   connect            refused, unreachable, reset, or closed before a response arrived
#   timeout            connect_timeout, read_timeout or total_timeout passed (decoding included)
#   tls                handshake failed or the certificate is not valid for the host
#   too_large          the body passed max_body_bytes and was cut there
#   decoded_too_large  the decoded body passed max_decoded_bytes (a decompression bomb)
#   protocol           not valid HTTP: status line, headers, chunking, short body, bad gzip
#   error              anything else, e.g. a URL that cannot be requested (the message says)
OUTCOME_KINDS: tuple[Kind, ...] = (
    Kind.OK, Kind.REDIRECT, Kind.DNS, Kind.CONNECT, Kind.TIMEOUT, Kind.TLS,
    Kind.TOO_LARGE, Kind.DECODED_TOO_LARGE, Kind.PROTOCOL, Kind.ERROR,
)

_MAX_INTERIM = 5  # 1xx responses (102, 103) skipped before the final one
_DEFAULT_PORTS = {"http": 80, "https": 443}
_NOT_IN_TARGET = re.compile(r"[\x00-\x20\x7f]")
# A URL as hive.core.urls.canonicalize writes it, with (scheme, host, port or None, target)
# as _any_request reads them: a host of name characters, a port without leading zeros,
# a target of printable ASCII with no fragment.
_CANONICAL = re.compile(r"(https?)://([a-z0-9._-]+)(?::([1-9][0-9]{0,4}))?(/[!\"$-~]*)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class FetchResult:
    """What one GET produced; a failure is a result too (see ``outcome``)."""

    url: str
    outcome: Kind  # one of OUTCOME_KINDS or http_<status>
    status: int | None  # None when no status line arrived
    message: str  # why, for failures; "" for a plain success
    headers: list[tuple[str, str]]  # response headers as received, in order
    body: bytes  # content-decoded; empty when the fetch failed, a prefix when cut
    raw_body: bytes  # as received: still content-encoded, de-chunked
    content_type: str  # the Content-Type value as sent, "" if none
    location: str | None  # a 3xx Location resolved against url
    retry_after: float | None  # seconds from `finished`, from Retry-After
    started: float  # time.time() before connecting
    finished: float  # time.time() when the response had arrived (or failed)
    download_time: float  # seconds from start to finish (monotonic clock)
    address: str  # the peer address connected to
    request_bytes: bytes  # request line and headers exactly as sent
    status_line: str  # e.g. "HTTP/1.1 200 OK"; "" if none arrived
    truncated: bool  # raw_body is not the whole body (size cap or failure)
    # body is raw_body with every content coding undone (cut at max_decoded_bytes); False when
    # the fetch failed before its body ended or a coding could not be undone
    decoded: bool
    # the connection to ``address`` failed before any byte of the request went out, as
    # another of the host's addresses may not (what ``fallbacks`` are tried after)
    unconnected: bool = False


class ProxyRefused(ConnectionError):
    """The proxy would not open a tunnel (an outcome ``connect``)."""


class _Progress:
    """How far one exchange got; kept when it fails part way."""

    __slots__ = ("phase", "status", "status_line", "headers", "chunks", "size", "truncated",
                 "opened", "reused")

    def __init__(self) -> None:
        self.phase = "url"
        self.status: int | None = None
        self.status_line = ""
        self.headers: list[tuple[str, str]] = []
        self.chunks: list[bytes] = []
        self.size = 0
        self.truncated = False
        self.opened = 0
        self.reused = 0


class Fetcher:
    """Fetches one URL at a time per calling thread; safe to share between threads."""

    def __init__(
        self,
        user_agent: str,
        connect_timeout: float,
        read_timeout: float,
        total_timeout: float,
        max_body_bytes: int,
        max_decoded_bytes: int,
        pool_connections: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        ca_file: str = "",
        ca_dir: str = "",
        verify_tls: bool = True,
        headers: Sequence[str] = (),
        proxy: Proxy | None = None,
        connect_attempts: int = 1,
    ) -> None:
        if _CONTROL.search(user_agent):
            raise ValueError(f"user agent must be one line of printable text: {user_agent!r}")
        for line in headers:
            if _CONTROL.search(line) or ":" not in line:
                raise ValueError(f"a request header must be one 'Name: value' line: {line!r}")
        self.connect_timeout = connect_timeout
        self.connect_attempts = max(1, connect_attempts)
        self.read_timeout = read_timeout
        self.total_timeout = total_timeout
        self.max_body_bytes = max_body_bytes
        self.max_decoded_bytes = max_decoded_bytes
        self._ssl = ssl_context
        self._ssl_lock = threading.Lock()
        self.ca_file, self.ca_dir, self.verify_tls = ca_file, ca_dir, verify_tls
        self.proxy = proxy
        if not verify_tls:
            log.warning(
                "fetch.verify_tls is false: https certificates and host names are NOT checked;"
                " anyone on the path can impersonate any site (for archiving only)"
            )
        codings = accept_encoding()
        extra = "".join(f"{line}\r\n" for line in headers)
        self._request_tail = (
            f"User-Agent: {user_agent}\r\nAccept: */*\r\nAccept-Encoding: {codings}\r\n{extra}"
        ).encode("latin-1")
        self._pool = IdlePool(pool_connections)
        self._stats_lock = threading.Lock()
        self._stats: dict[str, int] = {
            "fetch/requests": 0, "fetch/bytes": 0,
            "fetch/connections/opened": 0, "fetch/connections/reused": 0,
            "fetch/connections/fallbacks": 0,
        }

    @classmethod
    def from_config(cls, cfg: FetchConfig) -> Fetcher:
        # The config counts idle connections per fetch thread; the pool is shared by the threads.
        return cls(
            cfg.user_agent, cfg.connect_timeout, cfg.read_timeout, cfg.total_timeout,
            cfg.max_body_bytes, cfg.max_decoded_bytes, cfg.pool_connections * cfg.threads,
            ca_file=cfg.ca_file, ca_dir=cfg.ca_dir, verify_tls=cfg.verify_tls,
            headers=cfg.headers, proxy=Proxy.parse(cfg.proxy, cfg.no_proxy),
            connect_attempts=cfg.connect_attempts,
        )

    def fetch(
        self, url: str, address: str, *, max_body_bytes: int | None = None,
        cookie: str | None = None, via: str = "", conditional: str = "",
        fallbacks: Sequence[str] = (),
    ) -> FetchResult:
        """GET url from address (an IP literal); never raises for a failed fetch.

        ``fallbacks``: the host's other addresses (IP literals, in the order to try them:
        hive.fetch.dns.happy_eyeballs), each tried in turn when the connection to the one
        before fails (refused, unreachable, timed out; not a TLS failure, nor anything
        after the connection stood), up to ``connect_attempts`` addresses in all and
        within the one ``total_timeout``; the result's ``address`` is the last one tried.
        Not when tunnelling through a proxy, which the connection is to.

        ``max_body_bytes`` overrides the fetcher's cap for this request (robots.txt);
        ``cookie`` is a Cookie header value to send; ``via`` the address (an IP
        literal) of the configured proxy to tunnel through, "" to connect directly;
        ``conditional`` the header lines of a conditional request, each ending in CRLF
        (a recrawl's validators, hive.core.prior: free of control characters).
        """
        started = time.time()
        t0 = time.monotonic()
        limit = self.max_body_bytes if max_body_bytes is None else max_body_bytes
        progress = _Progress()
        request = b""
        failure: tuple[Kind, str] | None = None
        try:
            scheme, host, port, request = self._request(url)
            if cookie and not _CONTROL.search(cookie):
                request += f"Cookie: {cookie}\r\n".encode("latin-1", "replace")
            if conditional:
                request += conditional.encode("latin-1", "replace")
            request += b"\r\n"
            tries = [address, *fallbacks][: 1 if via else self.connect_attempts]
            for n, address in enumerate(tries, 1):
                progress = _Progress()
                progress.phase = "connect"
                key = (scheme, address, port, host if scheme == "https" else "", via)
                try:
                    self._exchange(key, request, t0 + self.total_timeout, limit, progress)
                except (OSError, TotalTimeout) as exc:
                    if (n == len(tries) or not _next_address(exc, progress)
                            or time.monotonic() >= t0 + self.total_timeout):
                        raise
                    with self._stats_lock:
                        self._stats["fetch/connections/fallbacks"] += 1
                    continue
                break
        except Exception as exc:  # the boundary: every failure becomes an outcome kind
            failure = self._classify(exc, progress.phase)
            progress.truncated = progress.truncated or progress.phase == "body"
            unconnected = _next_address(exc, progress)
        else:
            unconnected = False
        times = (started, time.time(), time.monotonic() - t0)
        result = self._result(
            url, address, request, progress, failure, times, t0 + self.total_timeout
        )
        if unconnected:
            result = dataclasses.replace(result, unconnected=True)
        with self._stats_lock:
            stats = self._stats
            stats["fetch/requests"] += 1
            stats["fetch/bytes"] += len(result.raw_body)
            stats["fetch/connections/opened"] += progress.opened
            stats["fetch/connections/reused"] += progress.reused
            name = "fetch/outcome/" + result.outcome  # a str: no Enum.__format__ per fetch
            stats[name] = stats.get(name, 0) + 1
        return result

    def stats(self) -> dict[str, int]:
        """Counters: fetch/requests, fetch/bytes (bodies as received), fetch/outcome/<kind>,
        fetch/connections/opened, fetch/connections/reused and fetch/connections/fallbacks
        (connections tried at a host's next address after its last one failed)."""
        with self._stats_lock:
            return dict(self._stats)

    def close(self) -> None:
        """Close the idle connections; connections in use close when their fetch ends."""
        self._pool.close()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _request(self, url: str) -> tuple[str, str, int, bytes]:
        """(scheme, host, port, request bytes) for url; ValueError if it cannot be sent."""
        # A canonical URL, the only kind a crawl fetches, is read by one match; anything
        # else, allowed or not, is left to the general reading below.
        match = _CANONICAL.fullmatch(url)
        if match is None:
            return self._any_request(url)
        scheme, host, port_text, target = match.groups()
        default = _DEFAULT_PORTS[scheme]
        port = default if port_text is None else int(port_text)
        if port > 65535:
            return self._any_request(url)  # refused there, in urlsplit's words
        host_header = host if port == default else f"{host}:{port}"
        head = f"GET {target} HTTP/1.1\r\nHost: {host_header}\r\n".encode("ascii")
        return scheme, host, port, head + self._request_tail

    def _any_request(self, url: str) -> tuple[str, str, int, bytes]:
        """What ``_request`` answers for any URL, canonical or not."""
        parts = urlsplit(url)
        scheme, host = parts.scheme, parts.hostname
        if scheme not in _DEFAULT_PORTS:
            raise ValueError(f"unsupported scheme {scheme!r}")
        if not host:
            raise ValueError("no host")
        port = parts.port or _DEFAULT_PORTS[scheme]
        # The URL's own bytes after the authority: urlsplit would lose an empty query's
        # "?", and "/a?" must be asked for as itself (its WARC record names it so).
        target = url.partition("#")[0][len(scheme) + 3 + len(parts.netloc) :]
        if not target.startswith("/"):
            target = "/" + target
        host_header = f"[{host}]" if ":" in host else host
        if port != _DEFAULT_PORTS[scheme]:
            host_header = f"{host_header}:{port}"
        if not (target + host).isascii() or _NOT_IN_TARGET.search(target + host):
            raise ValueError("characters not allowed in a request")
        head = f"GET {target} HTTP/1.1\r\nHost: {host_header}\r\n".encode("ascii")
        return scheme, host, port, head + self._request_tail

    def _tls(self) -> ssl.SSLContext:
        """The TLS context, made at the first https connection if none was given: loading
        the system's CA certificates costs about 50 ms of CPU, which an http crawl saves.
        ``ca_file`` and ``ca_dir`` add to the system's CAs."""
        if self._ssl is None:
            with self._ssl_lock:
                if self._ssl is None:
                    context = ssl.create_default_context()
                    if self.ca_file or self.ca_dir:
                        context.load_verify_locations(self.ca_file or None, self.ca_dir or None)
                    if not self.verify_tls:
                        context.check_hostname = False
                        context.verify_mode = ssl.CERT_NONE
                    context.set_alpn_protocols(["http/1.1"])
                    self._ssl = context
        return self._ssl

    def _connect(self, key: PoolKey, deadline: float) -> Connection:
        scheme, address, port, tls_name, via = key
        peer = (via, self.proxy.port) if via and self.proxy is not None else (address, port)
        family = socket.AF_INET6 if ":" in peer[0] else socket.AF_INET
        try:
            socket.inet_pton(family, peer[0])  # an IP literal: connect() must not look a name up
        except OSError:
            raise ValueError(f"not an IP address: {peer[0]!r}") from None
        timeout = min(self.connect_timeout, deadline - time.monotonic())
        if timeout <= 0:
            raise TotalTimeout
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(peer)
            if via and self.proxy is not None:
                self._tunnel(sock, self.proxy.connect_head(address, port), deadline)
            if scheme == "https":
                sock = self._tls().wrap_socket(sock, server_hostname=tls_name)
        except TimeoutError:
            sock.close()
            if timeout < self.connect_timeout:
                raise TotalTimeout from None
            raise
        except BaseException:
            sock.close()
            raise
        return Connection(key, sock)

    @staticmethod
    def _tunnel(sock: socket.socket, head: bytes, deadline: float) -> None:
        """Ask the proxy for a tunnel; raise ProxyRefused unless it answers 2xx.

        The answer is read a byte at a time up to its blank line (a hundred bytes,
        once per tunnel), so no byte of the tunnel is left in a buffer; the
        socket's timeout, the connect timeout, bounds each wait, and the total
        deadline the whole answer."""
        sock.sendall(head)
        answer = bytearray()
        while not answer.endswith(b"\r\n\r\n"):
            if time.monotonic() > deadline:
                raise TotalTimeout
            byte = sock.recv(1)
            if not byte or len(answer) > MAX_HEADER_LINE:
                raise ProxyRefused("the proxy closed or sent no answer to CONNECT")
            answer += byte
        status_line = bytes(answer).split(b"\r\n", 1)[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].startswith("2"):
            raise ProxyRefused(f"the proxy answered CONNECT with {status_line!r}")

    def _exchange(
        self, key: PoolKey, request: bytes, deadline: float, limit: int, progress: _Progress
    ) -> None:
        conn = self._pool.take(key)
        reused = conn is not None
        if conn is None:
            conn = self._connect(key, deadline)
            progress.opened += 1
        else:
            progress.reused += 1
        try:
            try:
                response = self._send(conn, request, deadline, progress)
            except (ConnectionError, http.client.BadStatusLine):
                if not reused:
                    raise
                # The server closed the idle connection as it was reused: one new connection.
                conn.close()
                progress.phase = "connect"
                conn = self._connect(key, deadline)
                progress.opened += 1
                response = self._send(conn, request, deadline, progress)
            progress.status = response.status
            version = "1.1" if response.version == 11 else "1.0"
            progress.status_line = f"HTTP/{version} {response.status} {response.reason}"
            progress.headers = response.msg.items()
            progress.phase = "body"
            while True:
                # read1: one receive at a time, so a failure keeps every byte that arrived.
                piece = response.read1(min(CHUNK, limit - progress.size + 1))
                if not piece:
                    break
                progress.size += len(piece)
                if progress.size > limit:
                    progress.chunks.append(piece[: len(piece) - (progress.size - limit)])
                    progress.size = limit
                    progress.truncated = True
                    return
                progress.chunks.append(piece)
                if response.length == 0:
                    break  # the Content-Length is in: read1 would answer b"" without a receive
            if response.length:
                raise http.client.IncompleteRead(b"", response.length)
            if not response.will_close:
                self._pool.give(conn)
                conn = None
        finally:
            if conn is not None:
                conn.close()

    def _send(
        self, conn: Connection, request: bytes, deadline: float, progress: _Progress
    ) -> http.client.HTTPResponse:
        """Send the request and read up to the final response's headers."""
        raw = conn.raw
        raw.read_timeout = self.read_timeout
        raw.deadline = deadline
        progress.phase = "send"
        raw.bound_wait()
        conn.send(request)
        progress.phase = "head"
        for _ in range(_MAX_INTERIM + 1):
            # http.client reads through conn.makefile(), that is the deadline-bound reader.
            response = Response(cast(socket.socket, conn), method="GET")
            response.begin()
            if not 102 <= response.status < 200:
                break
        return response

    def _classify(self, exc: Exception, phase: str) -> tuple[Kind, str]:
        """The outcome kind (``EXCEPTION_KINDS``) and message for an exception raised in
        phase."""
        if phase == "url":
            return Kind.ERROR, f"invalid URL: {exc}"
        kind = exception_kind(exc, CONNECT_EXCEPTION_KINDS if phase == "connect" else None)
        where = _PHASES[phase]
        if isinstance(exc, TotalTimeout):
            return kind, f"total timeout ({self.total_timeout:g} s) while {where}"
        if kind is Kind.TIMEOUT:
            if phase == "connect":
                return kind, f"connect timeout ({self.connect_timeout:g} s)"
            return kind, f"read timeout ({self.read_timeout:g} s) while {where}"
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return kind, f"{detail} (while {where})"

    def _result(
        self, url: str, address: str, request: bytes, progress: _Progress,
        failure: tuple[Kind, str] | None, times: tuple[float, float, float], deadline: float,
    ) -> FetchResult:
        started, finished, download_time = times
        raw = b"".join(progress.chunks)
        content_type = ""
        location: str | None = None
        retry_after: float | None = None
        codings: list[str] = []
        for name, value in progress.headers:
            lower = name.lower()
            if lower == "content-type" and not content_type:
                content_type = value.strip()
            elif lower == "location" and location is None:
                location = value
            elif lower == "retry-after" and retry_after is None:
                retry_after = parse_retry_after(value, finished)
            elif lower == "content-encoding":
                codings.extend(content_codings(value))
        status = progress.status
        if location is not None:
            redirecting = status is not None and 300 <= status < 400
            location = resolve_location(url, location) if redirecting else None
        body = b""
        decoded = False
        kind: Kind
        if failure is not None:
            kind, message = failure
        else:
            assert status is not None
            body, problem, message = decode_body(raw, codings, self.max_decoded_bytes, deadline)
            decoded = problem is Kind.DECODED_TOO_LARGE or (problem is None and not message)
            if progress.truncated:
                kind, message = Kind.TOO_LARGE, f"body cut at {len(raw)} bytes"
            elif problem is not None:
                kind = problem
            elif 200 <= status < 300:
                kind = Kind.OK
            elif location is not None:
                kind = Kind.REDIRECT
            else:
                kind, message = outcome_kind(f"http_{status}"), message or progress.status_line
        return FetchResult(
            url=url, outcome=kind, status=status, message=message,
            headers=progress.headers, body=body, raw_body=raw, content_type=content_type,
            location=location, retry_after=retry_after, started=started, finished=finished,
            download_time=download_time, address=address, request_bytes=request,
            status_line=progress.status_line, truncated=progress.truncated, decoded=decoded,
        )


# Exceptions to outcome kinds, declared: an exception takes the kind of the first class
# of its MRO that the table names (so a subclass may map apart from its base, and a
# class deriving from two named ones takes the one its MRO puts first: http.client's
def _next_address(exc: BaseException, progress: _Progress) -> bool:
    """Whether a failure is the connection's to its address, which another of the host's
    addresses may not share: the TCP connect refused, unreachable or timed out, before any
    byte of a request went out (a TLS failure is the server's, whatever its address)."""
    return (progress.phase == "connect" and not progress.reused
            and not isinstance(exc, ssl.SSLError | TotalTimeout))


# RemoteDisconnected is a ConnectionResetError before it is a BadStatusLine); one that
# names none is DEFAULT_KIND. What a kind means: OUTCOME_KINDS above.
ExceptionKinds = dict[type[BaseException], Kind]
EXCEPTION_KINDS: ExceptionKinds = {
    TotalTimeout: Kind.TIMEOUT,  # the exchange's total_timeout (a TimeoutError)
    TimeoutError: Kind.TIMEOUT,  # connect_timeout, read_timeout (socket.timeout is one)
    ssl.SSLError: Kind.TLS,  # the handshake, the certificate (an OSError)
    ConnectionError: Kind.CONNECT,  # refused, reset, aborted, a broken pipe, ProxyRefused
    http.client.HTTPException: Kind.PROTOCOL,  # the status line, headers, chunking, short body
}
# While connecting (the TCP connect, the proxy's tunnel, the TLS handshake) any other
# OSError, such as no route to the host, is the connect's failure too.
CONNECT_EXCEPTION_KINDS: ExceptionKinds = {**EXCEPTION_KINDS, OSError: Kind.CONNECT}
DEFAULT_KIND = Kind.ERROR


def exception_kind(exc: BaseException, table: ExceptionKinds | None = None) -> Kind:
    """The outcome kind of ``exc`` by ``table`` (``EXCEPTION_KINDS`` unless given), checked
    in its class's MRO order; DEFAULT_KIND if the table names none of its classes."""
    kinds = EXCEPTION_KINDS if table is None else table
    for cls in type(exc).__mro__:
        found = kinds.get(cls)
        if found is not None:
            return found
    return DEFAULT_KIND


_PHASES = {
    "connect": "connecting",
    "send": "sending the request",
    "head": "reading the status line and headers",
    "body": "reading the body",
}
