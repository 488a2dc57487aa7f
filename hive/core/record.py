"""UrlRecord: the unit every layer passes around, and its compact byte form.

A record is a canonical URL with what the frontier and the crawl log need to
know about how it was found. Its byte form is used by the store (front and back
queue values) and, inside batches, by the wire; it is a fixed header followed by
NUL-separated UTF-8 strings, so decoding never evaluates anything::

    >HBBB  depth, hops (redirects followed to reach it), attempts, hint
    url \\0 host_key \\0 via
"""

from __future__ import annotations

import struct

_HEAD = struct.Struct(">HBBB")
MAX_DEPTH = 0xFFFF
MAX_SMALL = 0xFF


class UrlRecord:
    """A canonical URL plus its provenance; ``hint`` is a priority level (0: none)."""

    __slots__ = ("url", "host_key", "depth", "via", "hops", "attempts", "hint")

    def __init__(
        self,
        url: str,
        host_key: str,
        depth: int = 0,
        via: str = "",
        hops: int = 0,
        attempts: int = 0,
        hint: int = 0,
    ) -> None:
        self.url = url
        self.host_key = host_key
        self.depth = depth
        self.via = via
        self.hops = hops
        self.attempts = attempts
        self.hint = hint

    def encode(self) -> bytes:
        depth, hops, attempts, hint = self.depth, self.hops, self.attempts, self.hint
        head = _HEAD.pack(
            depth if depth < MAX_DEPTH else MAX_DEPTH,
            hops if hops < MAX_SMALL else MAX_SMALL,
            attempts if attempts < MAX_SMALL else MAX_SMALL,
            hint if hint < MAX_SMALL else MAX_SMALL,
        )
        return head + f"{self.url}\0{self.host_key}\0{self.via}".encode()

    @classmethod
    def decode(cls, data: bytes) -> UrlRecord:
        """Inverse of encode; raises ValueError on malformed bytes."""
        if len(data) < _HEAD.size:
            raise ValueError("url record: too short")
        depth, hops, attempts, hint = _HEAD.unpack_from(data)
        parts = data[_HEAD.size :].decode("utf-8").split("\0")
        if len(parts) != 3 or not parts[0] or not parts[1]:
            raise ValueError("url record: expected url, host key and via")
        return cls(parts[0], parts[1], depth, parts[2], hops, attempts, hint)

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
        return f"UrlRecord({self.url!r}, depth={self.depth}, attempts={self.attempts})"
