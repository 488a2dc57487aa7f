"""The WARC/1.1 record format as hive writes it: dates, digests, record IDs, heads, records.

Pure functions and values, no files: the writer (hive.fetch.warc) builds each
record pair from these on every fetch, so each is shaped for that path (a date
formatted once per second, a base32 digest without base64's pure-Python loop,
record IDs without a system call each, a response head built as one string).
``Truncation`` names why a body is incomplete, as ``WARC-Truncated`` spells it.
A record's text is Latin-1 (the bytes an HTTP client decoded), UTF-8 if it holds
wider characters; a CR or LF inside a field would end it early and corrupt the
record, so it becomes a space.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from isal import isal_zlib

Truncation = Literal["length", "time", "disconnect", "unspecified"]
Headers = Sequence[tuple[str, str]]


def _warc_second(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")


# The last second formatted and its text, one tuple so that a thread reads a matching pair.
_last_second: tuple[int, str] = (0, _warc_second(0))


def warc_date(ts: float) -> str:
    """A WARC-Date with microseconds, as WARC/1.1 allows: ``2024-05-01T12:00:00.250000Z``.

    strftime runs once per second of the clock; the microseconds are appended. They are
    rounded as datetime.fromtimestamp rounds them (half to even, a million carried into
    the second), so the text is its strftime's without a datetime built per call."""
    global _last_second
    fraction, whole = math.modf(ts)
    micro = round(fraction * 1e6)
    if micro >= 1_000_000:
        micro -= 1_000_000
        whole += 1
    elif micro < 0:
        micro += 1_000_000
        whole -= 1
    second = int(whole)
    cached, text = _last_second
    if cached != second:
        text = _warc_second(second)
        _last_second = (second, text)
    return f"{text}.{micro:06d}Z"


def sha1_digest(data: bytes) -> str:
    """``sha1:`` and the base32 SHA-1 of data, the customary WARC digest form."""
    return digest_text(hashlib.sha1(data).digest())


def _spread_steps() -> list[tuple[int, int, int]]:
    """(high mask, low mask, shift) of each step that moves the 5-bit groups of a 160-bit
    number into bytes of their own: two 128-bit lanes of 80 bits, halved five times."""

    def lanes(lane: int, width: int) -> int:
        return sum(((1 << width) - 1) << start for start in range(0, 256, lane))

    steps = []
    width, lane = 80, 128
    while width > 5:
        low = lanes(lane, width // 2)
        steps.append((lanes(lane, width) ^ low, low, lane // 2 - width // 2))
        width, lane = width // 2, lane // 2
    return steps


_SPREAD = _spread_steps()
_LOW_80 = (1 << 80) - 1
# Bytes 0-31 to the base32 digits, every other byte (those of "sha1:") to itself.
_B32_DIGITS = bytes.maketrans(bytes(range(32)), b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")


def digest_text(sha1: bytes) -> str:
    """``sha1:`` and the base32 form of a SHA-1 digest."""
    # base64.b32encode is pure Python before 3.13 (~6 us). Five mask-and-shift steps on
    # the whole number give each digit a byte, which one translate spells (~1.4 us).
    n = int.from_bytes(sha1, "big")
    spread = ((n >> 80) << 128) | (n & _LOW_80)
    for high, low, shift in _SPREAD:
        spread = ((spread & high) << shift) | (spread & low)
    return (b"sha1:" + spread.to_bytes(32, "big")).translate(_B32_DIGITS).decode("ascii")


class _RecordIds:
    """Version-4 UUIDs for WARC-Record-ID without a system call each.

    uuid.uuid4() reads 16 bytes from os.urandom per record, a system call that
    also lets go of the GIL. Here 122 random bits come from os.urandom once
    per process (and again in a forked child), and each ID adds a counter to them:
    unique, well-formed (version 4, RFC 4122 variant), not unpredictable, which
    a record ID need not be. The text of the upper 80 bits, which the counter
    changes once in 2**48 IDs, is kept; an ID formats only its last 12 digits.
    """

    def __init__(self) -> None:
        self._reseed()
        os.register_at_fork(after_in_child=self._reseed)

    def _reseed(self) -> None:
        self._base = int.from_bytes(os.urandom(16), "big")
        # next() on a count is atomic under the GIL: no lock.
        self._count = itertools.count(1)
        # (upper 80 bits, their text), one tuple so that a thread reads a matching pair.
        self._upper: tuple[int, str] = (-1, "")

    def __call__(self) -> str:
        n = ((self._base + next(self._count)) & _UUID_RANDOM) | _UUID_V4
        upper, text = self._upper
        if n >> 48 != upper:
            upper = n >> 48
            h = f"{upper:020x}"
            text = f"<urn:uuid:{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:]}-"
            self._upper = (upper, text)
        return f"{text}{n & _LOW_48:012x}>"


_UUID_V4 = (4 << 76) | (2 << 62)
_UUID_RANDOM = ((1 << 128) - 1) ^ (0xF << 76) ^ (0x3 << 62)
_LOW_48 = (1 << 48) - 1
record_id = _RecordIds()


def head_lines(first_line: str, fields: Sequence[tuple[str, str]]) -> bytes:
    """first_line and ``Name: value`` lines joined by CRLF (no trailing CRLF).

    A CR or LF inside a name or value would end the head early and corrupt the
    record, so it is replaced by a space. Text is encoded as Latin-1, which gives
    back the bytes an HTTP client decoded; UTF-8 if it holds wider characters.
    """
    text = "\r\n".join([first_line, *[f"{name}: {value}" for name, value in fields]])
    if text.count("\n") != len(fields) or text.count("\r") != len(fields):
        lines = [first_line, *[f"{name}: {value}" for name, value in fields]]
        text = "\r\n".join(line.replace("\r", " ").replace("\n", " ") for line in lines)
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


def http_head(first_line: str, headers: Headers) -> bytes:
    """An HTTP message head: the first line, ``Name: value`` lines and the empty line."""
    return head_lines(first_line, headers) + b"\r\n\r\n"


def rewrite_transfer_encoding(headers: Headers) -> list[tuple[str, str]]:
    """Headers with Transfer-Encoding renamed, because the stored body is already de-chunked."""
    return [
        ("X-Crawler-Transfer-Encoding" if name.lower() == "transfer-encoding" else name, value)
        for name, value in headers
    ]


def one_line(value: str) -> str:
    """value with each CR and LF replaced by a space, as head_lines cleans a field."""
    return value.replace("\r", " ").replace("\n", " ")


def encode_text(text: str) -> bytes:
    """A head's text as head_lines encodes it: Latin-1, UTF-8 if it holds wider characters."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


def stored_response_head(status_line: str, headers: Headers) -> bytes:
    """``http_head(status_line, rewrite_transfer_encoding(headers))``, built as one string.

    A name that lowercases to ``transfer-encoding`` leaves that word in the lowercased
    text, so a head without it (nearly every one) needs no renaming and no lower() per
    header; any other head takes the general path."""
    text = "\r\n".join([status_line, *[f"{name}: {value}" for name, value in headers], "", ""])
    if (
        "transfer-encoding" in text.lower()
        or text.count("\n") != len(headers) + 2
        or text.count("\r") != len(headers) + 2
    ):
        return http_head(status_line, rewrite_transfer_encoding(headers))
    return encode_text(text)


def warc_record(fields: Sequence[tuple[str, str]], block: bytes) -> bytes:
    """An uncompressed WARC/1.1 record: version line, fields, Content-Length, block, CRLFCRLF."""
    head = head_lines("WARC/1.1", [*fields, ("Content-Length", str(len(block)))])
    return b"".join([head, b"\r\n\r\n", block, b"\r\n\r\n"])


def metadata_record(url: str, when: str, concurrent_to: str, via: str, hop_path: str) -> bytes:
    """The uncompressed metadata record that says how url was reached: ``via`` (omitted
    when empty) and ``hopsFromSeed``, concurrent to the record ``concurrent_to``.

    One f-string, not warc_record's list of fields: this runs once per response. No
    ``WARC-Warcinfo-ID``: the record always follows its response, in its file, and the
    field is 60 bytes that do not compress. A CR or LF (which a canonical URL never
    holds) would end a field early, so it becomes a space.
    """
    if "\r" in url or "\n" in url or "\r" in via or "\n" in via or "\n" in hop_path:
        url, via, hop_path = (
            value.replace("\r", " ").replace("\n", " ") for value in (url, via, hop_path)
        )
    block = (
        f"via: {via}\r\nhopsFromSeed: {hop_path}\r\n" if via else f"hopsFromSeed: {hop_path}\r\n"
    ).encode()
    return (
        f"WARC/1.1\r\nWARC-Type: metadata\r\nWARC-Record-ID: {record_id()}\r\n"
        f"WARC-Date: {when}\r\nWARC-Target-URI: {url}\r\n"
        f"WARC-Concurrent-To: {concurrent_to}\r\n"
        f"Content-Type: application/warc-fields\r\nContent-Length: {len(block)}\r\n\r\n"
    ).encode() + block + b"\r\n\r\n"


def gzip_member(data: bytes, level: int) -> bytes:
    """data as one complete gzip member (wbits 31: gzip header and trailer), by ISA-L."""
    return isal_zlib.compress(data, level, wbits=31)

