"""What a prior crawl knew of a URL (``Prior``), and what a recrawl makes of it. Pure.

A recrawl (``hive start --recrawl-from``) starts from a *plan*: one ``Prior`` per URL
the prior crawls fetched (hive.export.recrawl reads them from their WARCs and crawl
logs), one JSON line each, which the URL's owner keeps in its store (``prior``,
hive/storage/schema.py) and reads again when the URL is fetched. A ``Prior`` holds:

* **how the URL was reached**: its depth, hop path (hive.core.record), the URL it was
  found on and its kind, so it is queued again as it was;
* **its last capture**: the WARC-Date, record ID and target URI of the record that holds
  its payload (a revisit's original, not the revisit), its status, payload digest,
  redirect target, and the HTTP head it was served with (status line and fields);
* **its validators**: ``ETag`` and ``Last-Modified``, sent back as ``If-None-Match``
  and ``If-Modified-Since`` (``conditional_lines``);
* **its history** across crawls: ``seen`` captures, ``changed`` of them found changed
  against the one before, over ``span`` seconds from the first to the last.

**Which change** a fetch of it shows (``classify``): ``unchanged`` (a 304, the same
payload digest, the same status or redirect target), ``changed`` (a new digest, a
success where it failed), ``moved`` (a redirect to another target, or one where it had a
page), ``gone`` (404 or 410 where it had a page or a redirect); a URL without a prior is
``new`` if it answers a page or a redirect (a new dead link is no change). Other
statuses (429, 5xx) and failures say nothing of the page: no change.

**A 304 archived** (``refreshed_head``): its revisit record's block is the head a cache
holds after validating the stored response (RFC 9111 section 4.3.4): the prior status
line and fields, each field the 304 sent replacing the stored one but for those
section 3.2 keeps (Content-Length and the connection's fields). A replay tool serves a
revisit's own head with its original's payload, so a literal ``304`` head would replay
as an empty 304; this head replays as the page the server confirmed, and every field the
server sent is in it as sent (the request record holds the conditional request).

**Change rate** (``change_probability``): Cho and Garcia-Molina's estimator for an
*incomplete* change history ("Estimating frequency of change", ACM TOIT 3(3), 2003,
section 4): a crawler that looks at a page every ``I`` seconds learns only *whether* it
changed in between, not how often, so the naive rate ``X / (n I)`` (``X`` changes
seen in ``n`` intervals) underestimates a page that changes more often than it is
looked at, and says 0 for one never seen to change. Their estimator of the change
frequency ratio ``r = lambda I``, ``r = -ln((n - X + 0.5) / (n + 0.5))``, is nearly
unbiased for a Poisson process of rate ``lambda`` and stays finite when every interval
showed a change (``X = n``). Intervals between hive's crawls are not equal; ``I`` is
their mean (``span / n``), which the same paper finds a good stand-in when intervals
vary little, as those of a recrawl schedule do. The probability that the page changed
since its last capture, ``t`` seconds ago, is then ``1 - exp(-lambda t)``. A URL seen
only once has no interval: it gets ``UNKNOWN``, between the pages known to change and
those known not to (Fetterly et al. and Ntoulas et al. found about half of pages
changing within the span of a recrawl schedule; a page never seen to change is ranked
below an unknown one, one seen to change often above it).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import IO, Any

from hive.core.record import KINDS

UNKNOWN = 0.5
NEW, CHANGED, UNCHANGED, GONE, MOVED = "new", "changed", "unchanged", "gone", "moved"
CHANGES = (NEW, CHANGED, UNCHANGED, GONE, MOVED)
# How a change was known.
NOT_MODIFIED, SAME_DIGEST, NEW_DIGEST, STATUS, REDIRECT, NOT_IN_PRIOR = (
    "304", "same_digest", "new_digest", "status", "redirect", "not_in_prior")
# Fields a 304 never replaces in the stored head (RFC 9111 sections 3.1 and 3.2).
_KEPT = frozenset({"content-length", "connection", "keep-alive", "proxy-connection",
                   "transfer-encoding", "x-crawler-transfer-encoding", "te", "upgrade",
                   "trailer", "proxy-authenticate", "proxy-authorization"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_GONE = (404, 410)
_CANONICAL = re.compile(r"https?://[^/\s]+/")
# A plan line is at most this long (a Prior's head is cut well below it, hive.export.recrawl).
MAX_PLAN_LINE = 64 << 10


@dataclass(frozen=True, slots=True)
class Prior:
    """What the prior crawls knew of one URL (see the module docstring)."""

    url: str
    depth: int = 0
    path: str = ""
    via: str = ""
    kind: str = ""
    date: str = ""  # WARC-Date of the capture holding its payload
    record_id: str = ""
    uri: str = ""  # that capture's target URI ("" means url)
    status: int = 0
    digest: str = ""  # "sha1:BASE32" of the payload
    location: str = ""  # a redirect's target
    etag: str = ""
    last_modified: str = ""
    head: str = ""  # status line and fields it was served with, CRLF-separated
    seen: int = 1
    changed: int = 0
    span: float = 0.0
    last: float = 0.0  # when it was last captured, seconds since the epoch

    def encode(self) -> bytes:
        """Its plan line and store value: compact JSON of the fields not at their default."""
        out: dict[str, Any] = {"url": self.url}
        for name, default in _DEFAULTS.items():
            value = getattr(self, name)
            if value != default:
                out[name] = value
        return json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> Prior:
        """Inverse of encode; ValueError naming what is wrong."""
        try:
            found = json.loads(data)
        except ValueError as exc:
            raise ValueError(f"not JSON: {exc}") from None
        if not isinstance(found, dict) or not isinstance(found.get("url"), str):
            raise ValueError("not an object with a url")
        types = _TYPES
        for name, value in found.items():
            kind = types.get(name)
            if kind is None:
                unknown = sorted(set(found) - set(types))
                raise ValueError(f"unknown fields: {', '.join(unknown)}")
            if type(value) is not kind:
                if kind is float and type(value) is int:
                    found[name] = float(value)
                else:
                    raise ValueError(f"{name}: expected {kind.__name__}, got {value!r}")
        return cls(**found)

    @property
    def original_uri(self) -> str:
        return self.uri or self.url

    def conditional_lines(self) -> list[str]:
        """The request's conditional header lines: If-None-Match for an ETag, If-Modified-Since
        for a Last-Modified (a value with a control character is not sent)."""
        lines = []
        if self.etag and not _CONTROL.search(self.etag):
            lines.append(f"If-None-Match: {self.etag}")
        if self.last_modified and not _CONTROL.search(self.last_modified):
            lines.append(f"If-Modified-Since: {self.last_modified}")
        return lines

    def refreshed_head(
        self, headers: list[tuple[str, str]],
    ) -> tuple[str, list[tuple[str, str]]] | None:
        """The status line and fields a 304 with ``headers`` confirms (the module docstring);
        None if the stored head is unknown."""
        if not self.head:
            return None
        status_line, *lines = self.head.split("\r\n")
        stored = [(name, value.strip()) for name, _, value in
                  (line.partition(":") for line in lines if ":" in line)]
        fresh = {name.lower() for name, _ in headers if name.lower() not in _KEPT}
        kept = [(name, value) for name, value in stored if name.lower() not in fresh]
        return status_line, kept + [(n, v) for n, v in headers if n.lower() in fresh]

    def change_probability(self, now: float) -> float:
        """The probability that it changed since its last capture (the module docstring)."""
        intervals = self.seen - 1
        if intervals < 1 or self.span <= 0:
            return UNKNOWN
        changes = min(self.changed, intervals)
        ratio = -math.log((intervals - changes + 0.5) / (intervals + 0.5))
        rate = ratio / (self.span / intervals)
        return 1.0 - math.exp(-rate * max(now - self.last, 0.0))


_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclass_fields(Prior) if f.name != "url"}
_TYPES: dict[str, type] = {
    "url": str, "depth": int, "path": str, "via": str, "kind": str, "date": str,
    "record_id": str, "uri": str, "status": int, "digest": str, "location": str, "etag": str,
    "last_modified": str, "head": str, "seen": int, "changed": int, "span": float,
    "last": float,
}


def classify(
    prior: Prior | None, status: int | None, digest: str, location: str | None,
) -> tuple[str, str] | None:
    """(change, evidence) of a fetch that answered ``status`` (its payload's ``digest``, a
    redirect's resolved ``location``), against the ``prior``; None if it says nothing."""
    if status is None:
        return None
    if prior is None:  # a new page, or a new redirect; a new dead link is none
        return (NEW, NOT_IN_PRIOR) if 200 <= status < 300 or (
            300 <= status < 400 and location) else None
    if status == 304:
        return UNCHANGED, NOT_MODIFIED
    had = prior.status
    if status in _GONE:
        return (UNCHANGED if had in _GONE else GONE), STATUS
    if 300 <= status < 400 and location:
        if 300 <= had < 400 and prior.location == location:
            return UNCHANGED, REDIRECT
        return MOVED, REDIRECT
    if 200 <= status < 300:
        if not 200 <= had < 300:
            return CHANGED, STATUS
        return (UNCHANGED, SAME_DIGEST) if digest == prior.digest else (CHANGED, NEW_DIGEST)
    return None


def read_plan(f: IO[bytes]) -> Iterator[tuple[int, Prior | None, str]]:
    """Each line of a plan: (its number, its Prior, "") or (its number, None, why it is not
    one: ``too_long``, ``fields``, ``url``). A line is read up to MAX_PLAN_LINE bytes; the
    rest of a longer one is read past, never held."""
    number = 0
    while line := f.readline(MAX_PLAN_LINE + 1):
        number += 1
        if len(line) > MAX_PLAN_LINE and not line.endswith(b"\n"):
            while (rest := f.readline(MAX_PLAN_LINE)) and not rest.endswith(b"\n"):
                pass
            yield number, None, "too_long"
            continue
        if not line.strip():
            continue
        try:
            prior = Prior.decode(line)
        except ValueError:
            yield number, None, "fields"
            continue
        if prior.kind not in KINDS or prior.depth < 0 or prior.seen < 1 or prior.changed < 0:
            yield number, None, "fields"
        elif not _CANONICAL.match(prior.url):
            yield number, None, "url"
        else:
            yield number, prior, ""
