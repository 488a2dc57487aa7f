"""Content decoding: undoing a response body's content codings, within a size cap.

A body is decoded once it has been read (hive.fetch.client): gzip, deflate
as zlib or raw, br only where a ``brotli`` >= 1.2 module is importable, which
bounds its output. The output is cut at a limit (``max_decoded_bytes``: a
decompression bomb is an outcome, not an allocation), decoding stops at the
exchange's deadline, and it is linear in the body, however many gzip members
it holds; at most MAX_CODINGS layers are undone. A content coding it cannot
decode is left as it came and named.
"""

from __future__ import annotations

import importlib
import math
import time
import zlib
from typing import Any

from hive.outcome import Kind

FIRST_PIECE = 256  # the first piece of a gzip member fed to the inflater (see _inflate)
MAX_PIECE = 65536  # the largest piece of a member fed to the inflater at once
MAX_CODINGS = 4  # content codings decoded in one response; real servers apply one

# Brotli is decoded only by a module that bounds its output (brotli >= 1.2);
# without it, "br" is not advertised and a br body is left undecoded.
_brotli: Any
try:
    _brotli = importlib.import_module("brotli")
except ImportError:
    _brotli = None
if _brotli is not None and not hasattr(_brotli.Decompressor, "can_accept_more_data"):
    _brotli = None
_DECODE_ERRORS: tuple[type[Exception], ...] = (
    (zlib.error,) if _brotli is None else (zlib.error, _brotli.error)
)


class _PastDeadline(TimeoutError):
    """The deadline passed while decoding."""


def accept_encoding() -> str:
    """The content codings this module decodes, as an Accept-Encoding value."""
    return "gzip, deflate, br" if _brotli is not None else "gzip, deflate"


def decode_body(
    raw: bytes, codings: list[str], limit: int, deadline: float = math.inf
) -> tuple[bytes, Kind | None, str]:
    """Undo the content codings (listed in the order applied), producing at most limit bytes
    by the monotonic ``deadline``.

    Returns (body, problem, note): problem is None, ``decoded_too_large`` (body is
    then the first limit bytes), ``timeout`` (the deadline passed; body empty) or
    ``protocol`` (a corrupt stream or more than MAX_CODINGS codings; body empty);
    note says why, or names a coding left undecoded (body is then raw). The work
    is linear in the input: each coding reads its input once, in pieces.
    """
    if not codings:
        return raw, None, ""
    applied = [coding for coding in codings if coding not in ("", "identity")]
    if len(applied) > MAX_CODINGS:
        return b"", Kind.PROTOCOL, f"{len(applied)} content codings (at most {MAX_CODINGS} decoded)"
    body = raw
    for coding in reversed(applied):
        try:
            if coding in ("gzip", "x-gzip"):
                body, over = _inflate(body, 31, limit, deadline)
            elif coding == "deflate":
                # RFC 9110 means zlib; some servers send raw deflate, which browsers accept too.
                body, over = _inflate(body, 15 if _is_zlib(body) else -15, limit, deadline)
            elif coding == "br" and _brotli is not None:
                body, over = _unbrotli(body, limit)
            else:
                return raw, None, f"content-encoding {coding!r} left undecoded"
        except _DECODE_ERRORS as exc:
            return b"", Kind.PROTOCOL, f"bad {coding} body: {exc}"
        except _PastDeadline:
            return b"", Kind.TIMEOUT, f"total timeout while decoding {coding}"
        if over:
            return body, Kind.DECODED_TOO_LARGE, f"decoded body over {limit} bytes"
    return body, None, ""


def _is_zlib(data: bytes) -> bool:
    """Whether data starts with a zlib header (RFC 1950: method 8, header check bits)."""
    return len(data) >= 2 and data[0] & 0x0F == 8 and int.from_bytes(data[:2], "big") % 31 == 0


def _inflate(data: bytes, wbits: int, limit: int, deadline: float) -> tuple[bytes, bool]:
    """Decompress zlib (15), raw deflate (-15) or gzip (31, members in sequence) up to limit.

    Returns (output, over): over is True when the output would pass limit, which
    it stops short of. A stream cut short yields what it holds. Raises
    _PastDeadline once the monotonic deadline has passed.

    Linear in the input however many members it holds: each member is fed in
    pieces that start at FIRST_PIECE bytes and double up to MAX_PIECE, so what the
    inflater copies back past a member's end (``unused_data``) is at most about
    twice the member plus FIRST_PIECE, never the rest of the body.
    """
    view = memoryview(data)
    end = len(view)
    out: list[bytes] = []
    size = pos = 0
    while pos < end:
        inflater = zlib.decompressobj(wbits)
        piece = FIRST_PIECE
        while pos < end and not inflater.eof:
            if time.monotonic() > deadline:
                raise _PastDeadline
            pending: bytes | memoryview = view[pos : pos + piece]
            pos += len(pending)
            piece = min(piece * 2, MAX_PIECE)
            while pending:
                produced = inflater.decompress(pending, limit - size + 1)
                if produced:
                    out.append(produced)
                    size += len(produced)
                    if size > limit:
                        return b"".join(out)[:limit], True
                # With a max_length, an empty piece means all input was consumed.
                pending = inflater.unconsumed_tail if produced else b""
        # At most a window's worth remains buffered once the input is consumed.
        tail = inflater.flush()
        out.append(tail)
        size += len(tail)
        if size > limit:
            return b"".join(out)[:limit], True
        pos -= len(inflater.unused_data)
        if wbits != 31 or bytes(view[pos : pos + 2]) != b"\x1f\x8b":
            break
    return b"".join(out), False


def _unbrotli(data: bytes, limit: int) -> tuple[bytes, bool]:
    """Brotli-decode up to limit bytes (brotli >= 1.2 bounds each step's output)."""
    decoder = _brotli.Decompressor()
    out = [decoder.process(data, output_buffer_limit=limit + 1)]
    size = len(out[0])
    while size <= limit and not decoder.can_accept_more_data():
        piece = decoder.process(b"", output_buffer_limit=limit - size + 1)
        if not piece:
            break
        out.append(piece)
        size += len(piece)
    if size > limit:
        return b"".join(out)[:limit], True
    return b"".join(out), False
