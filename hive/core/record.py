"""UrlRecord: the unit every layer passes around, and its compact byte form.

A record is a canonical URL with what the frontier and the crawl log need to
know about how it was found. Its byte form is used by the store (front and back
queue values) and, inside batches, by the wire; it is a fixed header followed by
NUL-separated UTF-8 strings, so decoding never evaluates anything::

    >HBBB  depth, hops (redirects followed to reach it), attempts, hint
    url \\0 host_key \\0 via [\\0 kind]

``kind`` says what the URL is fetched as: a page (``PAGE``, the empty string,
written as nothing at all, so a page's bytes are those of records written
before kinds existed, and those decode as pages), a sitemap (``SITEMAP``), a
feed (``FEED``), or a page that a sitemap of another origin lists (``LISTED``:
its ``via`` is that sitemap, which the page's own robots.txt must name before
it is fetched, hive.fetch.pipeline). A sitemap's ``depth`` counts the index
levels above it (0: named by robots.txt or a seed); a page it lists is one deeper.

A seed or ``hive add`` line ``sitemap:<url>`` is a sitemap (``seed_kind``).
"""

from __future__ import annotations

import struct

_HEAD = struct.Struct(">HBBB")
MAX_DEPTH = 0xFFFF
MAX_SMALL = 0xFF
PAGE = ""
SITEMAP = "s"
FEED = "f"
LISTED = "l"
KINDS = frozenset({PAGE, SITEMAP, FEED, LISTED})
SITEMAP_PREFIX = "sitemap:"


def seed_kind(line: str) -> tuple[str, str]:
    """(kind, URL) of a seed or ``hive add`` line: ``sitemap:<url>`` is a sitemap."""
    if line[: len(SITEMAP_PREFIX)].lower() == SITEMAP_PREFIX:
        return SITEMAP, line[len(SITEMAP_PREFIX) :].strip()
    return PAGE, line


class UrlRecord:
    """A canonical URL plus its provenance; ``hint`` is a priority level (0: none)."""

    __slots__ = ("url", "host_key", "depth", "via", "hops", "attempts", "hint", "kind")

    def __init__(
        self,
        url: str,
        host_key: str,
        depth: int = 0,
        via: str = "",
        hops: int = 0,
        attempts: int = 0,
        hint: int = 0,
        kind: str = PAGE,
    ) -> None:
        self.url = url
        self.host_key = host_key
        self.depth = depth
        self.via = via
        self.hops = hops
        self.attempts = attempts
        self.hint = hint
        self.kind = kind

    def encode(self) -> bytes:
        depth, hops, attempts, hint = self.depth, self.hops, self.attempts, self.hint
        head = _HEAD.pack(
            depth if depth < MAX_DEPTH else MAX_DEPTH,
            hops if hops < MAX_SMALL else MAX_SMALL,
            attempts if attempts < MAX_SMALL else MAX_SMALL,
            hint if hint < MAX_SMALL else MAX_SMALL,
        )
        tail = f"\0{self.kind}" if self.kind else ""
        return head + f"{self.url}\0{self.host_key}\0{self.via}{tail}".encode()

    @classmethod
    def decode(cls, data: bytes) -> UrlRecord:
        """Inverse of encode; raises ValueError on malformed bytes."""
        if len(data) < _HEAD.size:
            raise ValueError("url record: too short")
        depth, hops, attempts, hint = _HEAD.unpack_from(data)
        parts = data[_HEAD.size :].decode("utf-8").split("\0")
        if not 3 <= len(parts) <= 4 or not parts[0] or not parts[1]:
            raise ValueError("url record: expected url, host key, via and maybe a kind")
        kind = parts[3] if len(parts) == 4 else PAGE
        if kind not in KINDS or (len(parts) == 4 and not kind):
            raise ValueError(f"url record: unknown kind {kind[:8]!r}")
        return cls(parts[0], parts[1], depth, parts[2], hops, attempts, hint, kind)

    @staticmethod
    def host_key_of(data: bytes) -> str:
        """The host key of a record's byte form, without decoding the rest of it."""
        parts = data[_HEAD.size :].split(b"\0", 2)
        if len(parts) != 3 or not parts[1]:
            raise ValueError("url record: expected url, host key and via")
        return parts[1].decode("utf-8")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, UrlRecord):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash(self.url)

    def __repr__(self) -> str:
        kind = f", kind={self.kind!r}" if self.kind else ""
        return f"UrlRecord({self.url!r}, depth={self.depth}, attempts={self.attempts}{kind})"
