"""Reading one HTTP response off a socket: every wait bounded, the header block capped.

:class:`DeadlineReader` is what the response is read through: each receive
waits at most ``read_timeout``, and less as the exchange's total deadline
nears; past it, it raises :class:`TotalTimeout`. So a server that drips bytes,
headers included, cannot hold a fetch thread past ``total_timeout``.
:class:`Response` is http.client's response with the header block parsed by
:class:`Headers` (a third of the fetch's Python time went to the email
package), at most MAX_HEADERS lines of at most MAX_HEADER_LINE bytes each, as
http.client bounds them; http.client still parses the status line and reads
the body (length, chunked, until close).
"""

from __future__ import annotations

import http.client
import io
import math
import socket
import time
from typing import Any

from hive.fetch.headers import content_length

CHUNK = 65536  # bytes asked of the socket at once; the body is read in pieces this large


class TotalTimeout(TimeoutError):
    """The exchange's total_timeout passed."""


class DeadlineReader(io.RawIOBase):
    """Raw reads from one socket, each wait bounded by read_timeout and the deadline."""

    # In slots, not in the dict an io object has: they are read at every receive.
    __slots__ = ("sock", "read_timeout", "deadline", "_timeout")

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.read_timeout = 0.0
        self.deadline = math.inf
        self._timeout = sock.gettimeout()

    def readable(self) -> bool:
        return True

    def bound_wait(self) -> None:
        """Set the socket timeout for the next wait: read_timeout, or less near the deadline."""
        wait = min(self.read_timeout, self.deadline - time.monotonic())
        if wait <= 0:
            raise TotalTimeout
        if wait != self._timeout:
            self.sock.settimeout(wait)
            self._timeout = wait

    def readinto(self, buffer: Any) -> int:
        self.bound_wait()
        try:
            return self.sock.recv_into(buffer)
        except TimeoutError:
            if self._timeout is not None and self._timeout < self.read_timeout:
                raise TotalTimeout from None
            raise


MAX_HEADER_LINE = 65536  # as http.client's _MAXLINE
MAX_HEADERS = 100  # as http.client's _MAXHEADERS


class Headers:
    """A response's header fields in order, looked up by name without regard to case.

    What http.client needs of its ``msg`` (``get``) and what the fetcher keeps
    (``items``), parsed from the raw lines rather than by the email package,
    which cost a third of the fetch's Python time. A line starting with a space
    or tab continues the field before it (obsolete folding); a line without a
    colon is dropped, as RFC 9112 lets a recipient do.
    """

    __slots__ = ("_fields", "_first")

    def __init__(self, lines: list[bytes]) -> None:
        fields: list[tuple[str, str]] = []
        for raw in lines:
            line = raw.decode("iso-8859-1").rstrip("\r\n")
            if not line:
                continue
            if line[0] in " \t":
                if fields:
                    name, value = fields[-1]
                    fields[-1] = (name, f"{value} {line.strip()}".strip())
                continue
            name, colon, value = line.partition(":")
            if colon:
                fields.append((name, value.strip(" \t")))
        self._fields = fields
        self._first: dict[str, str] = {}
        for name, value in reversed(fields):
            self._first[name.lower()] = value

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._first.get(name.lower(), default)

    def items(self) -> list[tuple[str, str]]:
        return list(self._fields)


def read_header_lines(fp: Any) -> list[bytes]:
    """The lines of a header block up to its blank line: lines of at most MAX_HEADER_LINE
    bytes, at most MAX_HEADERS of them (as http.client reads them)."""
    lines: list[bytes] = []
    while True:
        line = fp.readline(MAX_HEADER_LINE + 1)
        if len(line) > MAX_HEADER_LINE:
            raise http.client.LineTooLong("header line")
        if line in (b"\r\n", b"\n", b""):
            return lines
        lines.append(line)
        if len(lines) > MAX_HEADERS:
            raise http.client.HTTPException(f"got more than {MAX_HEADERS} headers")


class Response(http.client.HTTPResponse):
    """http.client's response with the header block parsed by :class:`Headers`.

    ``begin`` is http.client's (Python 3.11), less its debug output, with
    ``parse_headers`` replaced; reading the body (length, chunked, until close)
    stays http.client's.
    """

    # http.client's attributes, kept in slots rather than in the instance dict an
    # io object has: reading and writing them was a sixth of the response's cost.
    __slots__ = (
        "fp", "debuglevel", "_method", "headers", "msg", "version", "status", "reason",
        "code", "chunked", "chunk_left", "length", "will_close",
    )

    def begin(self) -> None:
        if self.headers is not None:
            return
        while True:
            version, status, reason = self._read_status()
            if status != http.client.CONTINUE:
                break
            read_header_lines(self.fp)
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = Headers(read_header_lines(self.fp))
        encoding = self.headers.get("transfer-encoding")
        self.chunked = bool(encoding and encoding.lower() == "chunked")
        self.chunk_left = None
        self.will_close = self._check_close()
        self.length = None if self.chunked else content_length(self.headers.get("content-length"))
        if status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) \
                or 100 <= status < 200 or self._method == "HEAD":
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True
