"""UrlRecord: the unit every layer passes around, and its compact byte form.

A record is a canonical URL with what the frontier and the crawl log need to
know about how it was found. Its byte form is used by the store (front and back
queue values) and, inside batches, by the wire; it is a fixed header followed by
NUL-separated UTF-8 strings, so decoding never evaluates anything::

    >HBBB  depth, hops (redirects followed to reach it), attempts, hint
    url \\0 host_key \\0 via [\\0 kind [\\0 path [\\0 score]]]

``kind`` says what the URL is fetched as: a page (``PAGE``, the empty string,
written as nothing at all, so a page's bytes are those of records written
before kinds existed, and those decode as pages), a sitemap (``SITEMAP``), a
feed (``FEED``), or a page that a sitemap of another origin lists (``LISTED``:
its ``via`` is that sitemap, which the page's own robots.txt must name before
it is fetched, hive.fetch.pipeline). A sitemap's ``depth`` counts the index
levels above it (0: named by robots.txt or a seed); a page it lists is one deeper.

A seed or ``hive add`` line ``sitemap:<url>`` is a sitemap (``seed_kind``).

**The hop path** (``path``, Heritrix's "hopsPath" or pathFromSeed) says how a URL
was reached from its seed, one letter a hop: ``L`` a link, ``E`` an embed (a page
requisite: hive.fetch.requisites), ``R`` a redirect; a seed's is empty. It keeps
its last ``MAX_PATH_LETTERS`` letters: a longer path is written as Heritrix writes
it, ``N+`` and its last letters, ``N`` the hops left out. A URL is an embed when
the run of non-link hops that ends its path holds an ``E`` (a page's stylesheet,
the image that stylesheet names, either one's redirect target); ``embed_hops``
counts the ``E`` of that run, which bounds chains such as CSS ``@import``. A
robots.txt, fetched because a URL of its host is due and never queued, has the path
``P`` (Heritrix's prerequisite) in the WARC's metadata records.

**The score** (``score``) is the quantized score (1..255, written in decimal;
0, none, is not written) of the page the URL was found on, when a scorer
(``priority.scorer``, hive.fetch.scoring) scored it: its owner keeps the best
one as evidence of the URL's worth (hive.frontier.evidence).

The optional strings are written only when needed: the kind when it is not a
page's or when a path or a score follows it (then it may be empty), the path
when it is not empty or a score follows it, the score when it is not 0. A record
written before any existed (queued in a store, kept in an outbox) has three strings
and decodes as a page with an empty path, and a seed page's record is written as
then.
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
HOP_LINK, HOP_EMBED, HOP_REDIRECT = "L", "E", "R"
HOP_PREREQUISITE = "P"
# A score in [0, 1] as a record carries it: 1..255 in steps of 1/254 (0 is none).
SCORE_STEPS = 254
# Enough for any embed chain and the last links before it; a path costs its letters in
# every queued record, so it is not the whole path of a deep crawl.
MAX_PATH_LETTERS = 16


def seed_kind(line: str) -> tuple[str, str]:
    """(kind, URL) of a seed or ``hive add`` line: ``sitemap:<url>`` is a sitemap."""
    if line[: len(SITEMAP_PREFIX)].lower() == SITEMAP_PREFIX:
        return SITEMAP, line[len(SITEMAP_PREFIX) :].strip()
    return PAGE, line


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


def quantize(score: float) -> int:
    """A score in [0, 1] as a record carries it: 1..255."""
    return 1 + round(min(max(score, 0.0), 1.0) * SCORE_STEPS)


def unquantize(code: int) -> float | None:
    """The score a quantized one stands for (None for 0, no score)."""
    return None if not code else (code - 1) / SCORE_STEPS


def separators(kind: str, path: str, score: int = 0) -> int:
    """The NULs a record of this kind, path and score holds after its header."""
    return 5 if score else 4 if path else 3 if kind else 2


def check_parts(parts: list[bytes]) -> str:
    """What is wrong with a record's strings (its bytes after the header split at NUL),
    or "": the one rule ``decode`` and the wire's routing (hive.core.wire) share."""
    count = len(parts)
    if not 3 <= count <= 6 or not parts[0] or not parts[1]:
        return "expected url, host key, via, and a kind, path and score if any"
    if count >= 4 and (parts[3].decode("ascii", "replace") not in KINDS
                       or (count == 4 and not parts[3])):
        return f"bad kind {parts[3][:8]!r}"
    if count == 5 and not parts[4]:
        return "an empty path ends it"
    if count == 6 and not (parts[5].isdigit() and 1 <= int(parts[5][:4]) <= MAX_SMALL):
        return f"bad score {parts[5][:8]!r}"
    return ""


class UrlRecord:
    """A canonical URL plus its provenance; ``hint`` is a priority level (0: none),
    ``kind`` what it is fetched as, ``path`` the hop path, ``score`` its finding page's
    quantized score (see the module docstring)."""

    __slots__ = (
        "url", "host_key", "depth", "via", "hops", "attempts", "hint", "kind", "path", "score")

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
        path: str = "",
        score: int = 0,
    ) -> None:
        self.url = url
        self.host_key = host_key
        self.depth = depth
        self.via = via
        self.hops = hops
        self.attempts = attempts
        self.hint = hint
        self.kind = kind
        self.path = path
        self.score = score

    def encode(self) -> bytes:
        depth, hops, attempts, hint = self.depth, self.hops, self.attempts, self.hint
        head = _HEAD.pack(
            depth if depth < MAX_DEPTH else MAX_DEPTH,
            hops if hops < MAX_SMALL else MAX_SMALL,
            attempts if attempts < MAX_SMALL else MAX_SMALL,
            hint if hint < MAX_SMALL else MAX_SMALL,
        )
        path = self.path
        if self.score:
            tail = f"\0{self.kind}\0{path}\0{self.score}"
        else:
            tail = f"\0{self.kind}\0{path}" if path else f"\0{self.kind}" if self.kind else ""
        return head + f"{self.url}\0{self.host_key}\0{self.via}{tail}".encode()

    @classmethod
    def decode(cls, data: bytes) -> UrlRecord:
        """Inverse of encode; raises ValueError on malformed bytes."""
        if len(data) < _HEAD.size:
            raise ValueError("url record: too short")
        depth, hops, attempts, hint = _HEAD.unpack_from(data)
        parts = data[_HEAD.size :].decode("utf-8").split("\0")
        count = len(parts)
        if not 3 <= count <= 6 or not parts[0] or not parts[1]:
            raise ValueError("url record: expected url, host key, via, and a kind, path and "
                             "score if any")
        kind = parts[3] if count >= 4 else PAGE
        path = parts[4] if count >= 5 else ""
        if kind not in KINDS or (count == 4 and not kind) or (count == 5 and not path):
            raise ValueError(f"url record: bad kind {kind[:8]!r} or path {path[:8]!r}")
        score = 0
        if count == 6:
            text = parts[5]
            if not (text.isdigit() and text.isascii() and 1 <= int(text[:4]) <= MAX_SMALL):
                raise ValueError(f"url record: bad score {text[:8]!r}")
            score = int(text)
        return cls(parts[0], parts[1], depth, parts[2], hops, attempts, hint, kind, path, score)

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
        path = f", path={self.path!r}" if self.path else ""
        score = f", score={self.score}" if self.score else ""
        return (f"UrlRecord({self.url!r}, depth={self.depth}, attempts={self.attempts}"
                f"{kind}{path}{score})")
