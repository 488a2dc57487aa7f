"""UrlRecord: the unit every layer passes around, and its compact byte form.

A record is a canonical URL with what the frontier and the crawl log need to
know about how it was found. Its byte form is used by the store (front and back
queue values) and, inside batches, by the wire; it is a fixed header followed by
NUL-separated UTF-8 strings, so decoding never evaluates anything::

    >HBBB  depth, hops (redirects followed to reach it), attempts, hint
    url \\0 host_key \\0 via [\\0 path]

**The hop path** (``path``, Heritrix's "hopsPath" or pathFromSeed) says how a URL
was reached from its seed, one letter a hop: ``L`` a link, ``E`` an embed (a page
requisite: hive.fetch.requisites), ``R`` a redirect; a seed's is empty. It keeps
its last ``MAX_PATH_LETTERS`` letters: a longer path is written as Heritrix writes
it, ``N+`` and its last letters, ``N`` the hops left out. A URL is an embed when
the run of non-link hops that ends its path holds an ``E`` (a page's stylesheet,
the image that stylesheet names, either one's redirect target); ``embed_hops``
counts the ``E`` of that run, which bounds chains such as CSS ``@import``.

The path is the fourth string, written only when it is not empty: a record
written before paths existed (queued in a store, kept in an outbox) has three
strings and decodes with an empty path, and a seed's record is written as then.
"""

from __future__ import annotations

import struct

_HEAD = struct.Struct(">HBBB")
MAX_DEPTH = 0xFFFF
MAX_SMALL = 0xFF
HOP_LINK, HOP_EMBED, HOP_REDIRECT = "L", "E", "R"
# Enough for any embed chain and the last links before it; a path costs its letters in
# every queued record, so it is not the whole path of a deep crawl.
MAX_PATH_LETTERS = 16


def extend_path(path: str, hop: str) -> str:
    """The hop path of a URL reached from one with ``path`` by one more ``hop``."""
    plus = path.find("+")
    if len(path) - plus - 1 < MAX_PATH_LETTERS:
        return path + hop
    dropped = int(path[:plus]) if plus >= 0 else 0
    return f"{dropped + 1}+{path[plus + 2:]}{hop}"


def path_hops(path: str) -> int:
    """How many hops a hop path stands for, those it left out included."""
    plus = path.find("+")
    return (int(path[:plus]) if plus >= 0 else 0) + len(path) - plus - 1


def embed_hops(path: str) -> int:
    """The embed hops in the run of non-link hops that ends ``path`` (0: not an embed)."""
    count = 0
    for letter in reversed(path):
        if letter == HOP_LINK or letter == "+":
            break
        count += letter == HOP_EMBED
    return count


class UrlRecord:
    """A canonical URL plus its provenance; ``hint`` is a priority level (0: none),
    ``path`` the hop path (see the module docstring)."""

    __slots__ = ("url", "host_key", "depth", "via", "hops", "attempts", "hint", "path")

    def __init__(
        self,
        url: str,
        host_key: str,
        depth: int = 0,
        via: str = "",
        hops: int = 0,
        attempts: int = 0,
        hint: int = 0,
        path: str = "",
    ) -> None:
        self.url = url
        self.host_key = host_key
        self.depth = depth
        self.via = via
        self.hops = hops
        self.attempts = attempts
        self.hint = hint
        self.path = path

    def encode(self) -> bytes:
        depth, hops, attempts, hint = self.depth, self.hops, self.attempts, self.hint
        head = _HEAD.pack(
            depth if depth < MAX_DEPTH else MAX_DEPTH,
            hops if hops < MAX_SMALL else MAX_SMALL,
            attempts if attempts < MAX_SMALL else MAX_SMALL,
            hint if hint < MAX_SMALL else MAX_SMALL,
        )
        if self.path:
            return head + f"{self.url}\0{self.host_key}\0{self.via}\0{self.path}".encode()
        return head + f"{self.url}\0{self.host_key}\0{self.via}".encode()

    @classmethod
    def decode(cls, data: bytes) -> UrlRecord:
        """Inverse of encode; raises ValueError on malformed bytes."""
        if len(data) < _HEAD.size:
            raise ValueError("url record: too short")
        depth, hops, attempts, hint = _HEAD.unpack_from(data)
        parts = data[_HEAD.size :].decode("utf-8").split("\0")
        if not 3 <= len(parts) <= 4 or not parts[0] or not parts[1] or parts[3:] == [""]:
            raise ValueError("url record: expected url, host key, via and a hop path if any")
        path = parts[3] if len(parts) == 4 else ""
        return cls(parts[0], parts[1], depth, parts[2], hops, attempts, hint, path)

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
        return (f"UrlRecord({self.url!r}, depth={self.depth}, attempts={self.attempts}, "
                f"path={self.path!r})")
