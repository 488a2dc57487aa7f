"""One WARC record read back by its position: the gzip member at an offset of a WARC file.

An index line (hive/fetch/cdxj.py) gives a capture's file, offset and length; this
module reads what the line leaves out from the record itself: the WARC and HTTP heads
(``WARC-Truncated``, ``Location``) and, for a page, its body, content codings undone,
and the ``<title>`` in it. Policy:

* **Bounded**: a record is inflated only up to ``limit`` bytes (the heads:
  ``HEAD_BYTES``, as the index reads them; a page: ``PAGE_BYTES``), and no more of the
  file is read than the member's length; a body past the limit is cut there.
* **Nothing raises on what is in a file**: a member that does not inflate, or a record
  whose heads do not end within the limit, is None; a body whose codings cannot be
  undone has no title.
"""

from __future__ import annotations

from typing import IO, NamedTuple, cast

from isal import isal_zlib
from selectolax.lexbor import LexborHTMLParser

from hive.fetch import cdxj, decoding, headers, parse

HEAD_BYTES = cdxj.HEAD_BYTES
# A page's title is looked for in its first 1 MiB (decoded); the rest is not inflated.
PAGE_BYTES = 1 << 20
# The longest title kept, in characters (a page can put a book in its <title>).
TITLE_CHARS = 1000
_PIECE = 1 << 16
_HEAD_END = b"\r\n\r\n"
_INFLATE_ERROR = cast(type[Exception], isal_zlib.error)


class Record(NamedTuple):
    """A record's WARC fields and, for a response or revisit, its HTTP status line and
    fields (names lowercased, the first of a name kept) and what follows them, up to the
    limit it was read with (``body_cut``: the limit cut it)."""

    warc: dict[str, str]
    status_line: str
    http: dict[str, str]
    body: bytes
    body_cut: bool
    http_lines: tuple[str, ...] = ()  # the HTTP head's field lines as stored, in order

    @property
    def truncated(self) -> str | None:
        """Its ``WARC-Truncated`` reason, if it has one."""
        return self.warc.get("warc-truncated") or None

    def redirect(self) -> str | None:
        """Where a redirect points: its ``Location``, resolved against its target URI."""
        value = self.http.get("location")
        if value is None:
            return None
        return headers.resolve_location(self.warc.get("warc-target-uri", ""), value)

    def title(self) -> str | None:
        """The text of the page's ``<title>``, blanks collapsed; None if it has none."""
        content_type = self.http.get("content-type")
        codings = headers.content_codings(self.http.get("content-encoding", ""))
        body, problem, _ = decoding.decode_body(self.body, codings, PAGE_BYTES)
        coded = any(coding not in ("", "identity") for coding in codings)
        if problem not in (None, "decoded_too_large") or (self.body_cut and coded):
            return None  # a coded body cut short does not decode to its end: no guess
        _, charset = parse.media_type(content_type)
        encoding = parse.page_encoding(body, charset)
        document = body if encoding == "utf-8" else body.decode(encoding, "replace")
        node = LexborHTMLParser(document).css_first("title")
        if node is None:
            return None
        text = " ".join(node.text(deep=True).split())[:TITLE_CHARS]
        return text or None


def read(f: IO[bytes], offset: int, length: int, limit: int = HEAD_BYTES) -> Record | None:
    """The record whose gzip member is ``length`` bytes at ``offset`` of ``f``, inflated up
    to ``limit`` bytes; None if the member does not inflate or its heads are not whole."""
    f.seek(offset)
    inflater = isal_zlib.decompressobj(31)
    out = bytearray()
    pending = b""
    remaining = length
    while len(out) < limit and not inflater.eof:
        if not pending:
            if remaining <= 0:
                break
            pending = f.read(min(_PIECE, remaining))
            if not pending:
                break
            remaining -= len(pending)
        try:
            out += inflater.decompress(pending, limit - len(out))
        except _INFLATE_ERROR:
            return None
        pending = inflater.unconsumed_tail
    cut = not inflater.eof
    data = bytes(out)
    warc_end = data.find(_HEAD_END)
    if not data.startswith(b"WARC/") or warc_end < 0:
        return None
    warc = fields(data[:warc_end], "utf-8")
    block = data[warc_end + 4 :]
    if not block.startswith(b"HTTP/"):
        return Record(warc, "", {}, block, cut)
    http_end = block.find(_HEAD_END)
    if http_end < 0:
        return None
    line_end = block.find(b"\r\n")
    status_line = block[:line_end].decode("latin-1")
    head = block[:http_end]
    http = fields(head, "latin-1")
    lines = tuple(head.decode("latin-1").split("\r\n")[1:])
    return Record(warc, status_line, http, block[http_end + 4 :], cut, lines)


def fields(head: bytes, encoding: str) -> dict[str, str]:
    """The ``Name: value`` lines of a message head (its first line left out), names
    lowercased, the first occurrence of a name kept: a WARC head is read as UTF-8 (bytes
    that are not replaced), an HTTP head as Latin-1 (any byte is a character)."""
    found: dict[str, str] = {}
    for line in head.decode(encoding, "replace").split("\r\n")[1:]:
        name, colon, value = line.partition(":")
        if colon:
            found.setdefault(name.strip().lower(), value.strip())
    return found
