"""Streaming, hardened reading of a fetched XML document (sitemaps, feeds), in bounded memory.

This module owns how untrusted XML is read: :class:`StreamReader` takes the
body in pieces (as fetched, possibly gzipped), undoes gzip incrementally, and
drives expat one piece at a time, calling a grammar's ``start``/``end`` for
each element. No tree of the document is ever built: what a reader holds is
one element's kept text, the element depth, and the items the last piece
completed. Policy:

* **gzip**: a body that starts with the gzip magic is inflated as it arrives
  (members in sequence), never more than ``CHUNK`` bytes per step; a body that
  does not is read as it is. The *decoded* bytes are capped at ``max_bytes``
  (the caller passes the smaller of the protocol's limit and
  ``fetch.max_decoded_bytes``, the cap the HTTP client puts on any page); past
  it reading stops and ``truncated`` is ``max_bytes``: a gzip bomb costs what
  the cap allows and no more.
* **No DTD**: a ``DOCTYPE`` with an internal subset is refused before any of
  its declarations is read, so no entity is ever declared (no billion laughs,
  no quadratic blowup, no XXE). A ``DOCTYPE`` naming only an external DTD (old
  RSS 0.91 feeds) is accepted, but the DTD is never fetched or read (parameter
  entity parsing is off); an entity it would have defined is skipped, and text
  that contained one is dropped as ``entity`` rather than kept wrong.
* **Bounded shape**: elements nested deeper than ``max_depth`` and more than
  ``max_elements`` elements end reading with an error; so does a single token
  (a start tag, a comment) longer than ``MAX_TOKEN`` bytes, which expat would
  otherwise buffer whole. Text is kept only where the grammar asks, up to the
  length it gives; longer text is dropped (``end`` gets None).
* **Never raises**: a malformed document yields what parsed before the fault,
  and ``error`` describes the fault (with expat's line and column).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar
from xml.parsers import expat

CHUNK = 65536
GZIP_MAGIC = b"\x1f\x8b"
MAX_DEPTH = 64  # a sitemap needs 3 levels, an Atom entry with XHTML content a dozen
MAX_TOKEN = 1 << 20  # bytes expat may buffer for one unfinished token
# ``read`` feeds received bytes this many at a time: the items one feed completes are held
# together, and 4 KiB of gzip inflate to ~100 KB of sitemap (~1,000 entries).
# bench/bench_sitemaps.py, 50,000 URLs gzipped: peak 0.4 MiB read this way, 3.4 MiB by 64 KiB.
READ_PIECE = 4096
_WHITESPACE = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"

Item = TypeVar("Item")


class Stop(Exception):
    """Raised by a grammar to end reading: a limit (``truncated``) or a fault (``error``)."""

    def __init__(self, reason: str, *, truncated: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.truncated = truncated


class Inflater:
    """Received bytes in, decoded bytes out: gunzipped if they start as gzip does, at most
    ``limit`` of them in all, in pieces of at most CHUNK bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.over = False
        self.gzip: bool | None = None  # unknown until two bytes have arrived
        self._head = b""
        self._member: zlib._Decompress | None = None

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Decoded pieces of data; raises Stop on corrupt gzip."""
        if self.over:
            return
        if self.gzip is None:
            data = self._head + data
            if len(data) < len(GZIP_MAGIC):
                self._head = data
                return
            self._head = b""
            self.gzip = data.startswith(GZIP_MAGIC)
        if self.gzip:
            yield from self._inflate(data)
        else:
            for start in range(0, len(data), CHUNK):
                yield from self._emit(data[start : start + CHUNK])

    def close(self) -> Iterator[bytes]:
        """What is left; raises Stop if a gzip stream was cut short."""
        if self.gzip is None:
            self.gzip = False
            yield from self._emit(self._head)
        elif self.gzip and self._member is not None and not self.over:
            raise Stop("gzip stream cut short")

    def _emit(self, piece: bytes) -> Iterator[bytes]:
        room = self.limit - self.size
        if len(piece) > room:
            piece, self.over = piece[:room], True
        self.size += len(piece)
        if piece:
            yield piece

    def _inflate(self, data: bytes) -> Iterator[bytes]:
        pending = data
        while pending and not self.over:
            if self._member is None:
                if not pending.startswith(GZIP_MAGIC[: len(pending)]):
                    raise Stop(f"bad gzip data: {len(pending)} bytes after the last member")
                self._member = zlib.decompressobj(31)
            try:
                # max_length bounds one step's output (a bomb inflates 1000-fold).
                out = self._member.decompress(pending, CHUNK)
            except zlib.error as exc:
                raise Stop(f"bad gzip data: {exc}") from None
            yield from self._emit(out)
            if self._member.eof:
                pending = self._member.unused_data
                self._member = None
            else:
                # With a max_length, no output means all input was consumed.
                pending = self._member.unconsumed_tail if out else b""


class StreamReader(Generic[Item]):
    """Reads one document fed in pieces; a subclass is the grammar (``start``, ``end``).

    ``feed`` and ``close`` return the items the grammar completed meanwhile
    (grammars append to ``self.items``); after a Stop or a fault they return
    nothing more. ``truncated`` names the limit that stopped reading, ``error``
    the fault; both None for a document read whole.
    """

    def __init__(
        self, *, max_bytes: int, max_elements: int, max_depth: int = MAX_DEPTH
    ) -> None:
        self.max_elements = max_elements
        self.max_depth = max_depth
        self.items: list[Item] = []
        self.truncated: str | None = None
        self.error: str | None = None
        self.is_xml: bool | None = None  # unknown until the first non-blank byte
        self.elements = 0
        self._inflater = Inflater(max_bytes)
        self._parser: expat.XMLParserType | None = None
        self._depth = 0
        self._text: list[str] | None = None
        self._text_depth = 0
        self._text_room = 0
        self._text_fault = ""
        self.text_fault = ""  # why end() got no text: "too_long", "entity" or ""
        self._event_at = 0
        self._fed = 0

    # The grammar.
    def start(self, depth: int, name: str, attrs: dict[str, str]) -> int:
        """An element opens (``name`` is "namespace local" or "local"); returns how many
        characters of its text to keep (0: none)."""
        raise NotImplementedError

    def end(self, depth: int, name: str, text: str | None) -> None:
        """An element closes; ``text`` is its kept text, None if none was kept (then
        ``text_fault`` says whether it was too long or held a skipped entity)."""
        raise NotImplementedError

    def text_piece(self, piece: bytes) -> None:
        """A decoded piece of a document that does not start with ``<``."""
        raise Stop("not an XML document")

    def finish(self) -> None:
        """The whole document was read (no truncation, no error so far)."""

    # Reading.
    @property
    def done(self) -> bool:
        return self.truncated is not None or self.error is not None

    def read(self, body: bytes | Iterable[bytes]) -> Iterator[Item]:
        """Every item of a whole body (bytes, or pieces of it), fed READ_PIECE bytes at a time."""
        pieces = [body] if isinstance(body, bytes | bytearray | memoryview) else body
        for data in pieces:
            for start in range(0, len(data), READ_PIECE):
                yield from self.feed(bytes(data[start : start + READ_PIECE]))
                if self.done:
                    return
        yield from self.close()

    def feed(self, data: bytes) -> list[Item]:
        if not self.done:
            self._guard(lambda: self._feed(data))
        return self._take()

    def close(self) -> list[Item]:
        if not self.done:
            self._guard(self._close)
        return self._take()

    def _feed(self, data: bytes) -> None:
        for piece in self._inflater.feed(data):
            self._decoded(piece)

    def _take(self) -> list[Item]:
        items, self.items = self.items, []
        return items

    def _close(self) -> None:
        for piece in self._inflater.close():
            self._decoded(piece)
        if self._inflater.over:
            return
        if self._parser is not None:
            self._parser.Parse(b"", True)
        elif self.is_xml is None:
            raise Stop("empty document")
        self.finish()

    def _guard(self, step: Callable[[], None]) -> None:
        try:
            step()
        except Stop as stop:
            if stop.truncated:
                self.truncated = stop.reason
            else:
                self.error = stop.reason
        except expat.ExpatError as exc:
            self.error = f"malformed XML: {expat.ErrorString(exc.code)}: line {exc.lineno}, " \
                         f"column {exc.offset}"
        if self._inflater.over and not self.done:
            self.truncated = "max_bytes"

    def _decoded(self, piece: bytes) -> None:
        if self.is_xml is None:
            piece = piece.removeprefix(_BOM).lstrip(_WHITESPACE)
            if not piece:
                return
            self.is_xml = piece.startswith(b"<")
            if self.is_xml:
                self._parser = self._new_parser()
        if self._parser is None:
            self.text_piece(piece)
            return
        self._fed += len(piece)
        self._parser.Parse(piece, False)
        if self._fed - self._event_at > MAX_TOKEN:
            raise Stop(f"a token longer than {MAX_TOKEN} bytes")

    def _new_parser(self) -> expat.XMLParserType:
        parser = expat.ParserCreate(namespace_separator=" ")
        # No external DTD or parameter entity is ever read.
        parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        parser.buffer_text = True
        parser.StartDoctypeDeclHandler = self._on_doctype
        parser.StartElementHandler = self._on_start
        parser.EndElementHandler = self._on_end
        parser.CharacterDataHandler = self._on_text
        parser.SkippedEntityHandler = self._on_skipped
        return parser

    def _mark(self) -> None:
        assert self._parser is not None
        self._event_at = self._parser.CurrentByteIndex

    def _on_doctype(
        self, name: str, system_id: str | None, public_id: str | None, internal: int
    ) -> None:
        self._mark()
        if internal:
            raise Stop("a DTD internal subset (entity declarations) is not read")

    def _on_start(self, name: str, attrs: dict[str, str]) -> None:
        self._mark()
        self.elements += 1
        if self.elements > self.max_elements:
            raise Stop(f"more than {self.max_elements} elements")
        self._depth += 1
        if self._depth > self.max_depth:
            raise Stop(f"elements nested deeper than {self.max_depth}")
        room = self.start(self._depth, name, attrs)
        if room > 0:
            self._text, self._text_depth, self._text_room = [], self._depth, room
            self._text_fault = ""

    def _on_end(self, name: str) -> None:
        self._mark()
        text = None
        self.text_fault = ""
        if self._text is not None and self._text_depth == self._depth:
            self.text_fault = self._text_fault
            if not self._text_fault:
                text = "".join(self._text)
            self._text = None
        self.end(self._depth, name, text)
        self._depth -= 1

    def _on_text(self, data: str) -> None:
        self._mark()
        if self._text is None or self._text_fault:
            return
        self._text_room -= len(data)
        if self._text_room < 0:
            self._text_fault = "too_long"
            self._text = []
        else:
            self._text.append(data)

    def _on_skipped(self, name: str, is_parameter_entity: int) -> None:
        self._mark()
        if self._text is not None:
            self._text_fault = "entity"
