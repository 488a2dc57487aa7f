"""Seeds before a start: read from a file, screened as the workers would refuse them.

A start's seeds are read and screened before any process starts, so that a
start with nothing to crawl says why on the terminal and exits with
``ExitCode.NOTHING`` instead of starting a hive that ends at once:

- **Reading.** A seeds file is read as bytes and decoded line by line: a line
  that is not UTF-8 is refused with its number and the others go on. Blank
  lines and lines starting with ``#`` are skipped.
- **Screening.** Each URL is canonicalized (``hive.core.urls``), once: a seed
  becomes a record here (``seed_record``), where it enters, and the supervisor's
  outbox, the splitter and the owner trust that record's URL and host key. A
  ``hive add`` URL enters at the supervisor's ``add`` handler, and a URL given to a
  worker run alone (tests, benchmarks) at ``Worker.add``, through the same
  ``seed_record``. A URL whose host
  is an IP literal or named by ``dns.resolve`` is checked against the address
  guard (``hive.fetch.dns``), which is what the worker will do at fetch time. Names
  that need a DNS lookup are not looked up here: a start must not wait on a
  million lookups, and the answer may change by fetch time. A line
  ``sitemap:<url>`` is a sitemap (``hive.core.record.seed_kind``) and keeps its
  prefix, canonical after it.

Refusals are data (``Refusal``); what to show of them is the caller's, and
``Refusal.shown`` bounds a URL to ``SHOWN_CHARS`` characters.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from hive.config import Config
from hive.core.record import SITEMAP, SITEMAP_PREFIX, UrlRecord, seed_kind
from hive.core.urls import canonicalize, host_key
from hive.errors import URLError
from hive.fetch.dns import AddressGuard, DnsCache, DnsFailure

# The most of a refused seed a message shows.
SHOWN_CHARS = 200


@dataclass(frozen=True, slots=True)
class Refusal:
    """A seed refused before the start: what it was (or where) and why."""

    seed: str
    reason: str
    address: bool = False  # refused for its address: --allow-private or --allow-net would take it

    def __str__(self) -> str:
        return f"{shown(self.seed)}: {self.reason}"


@dataclass(slots=True)
class Seeds:
    """Seeds read (``urls`` as read) or screened (``urls`` canonical, and ``records``,
    what the supervisor puts in its outbox), and the refusals, in order."""

    urls: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    records: list[UrlRecord] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.urls) + len(self.refused)

    def all_refused(self) -> str:
        """Why not one seed is left, in a line: the count and the first reason, with a hint."""
        first = self.refused[0]
        hint = "; use --allow-private" if first.address else ""
        return f"all {self.total} seeds refused: {first.reason}{hint}"


def shown(text: str) -> str:
    """At most SHOWN_CHARS characters of ``text``, as it would be printed."""
    return repr(text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "...")


def read_lines(data: bytes, source: str) -> Seeds:
    """The URLs in a seeds file's bytes; a line that is not UTF-8 is refused by its number."""
    seeds = Seeds()
    for _, line in _lines(data.splitlines(), source):
        if isinstance(line, Refusal):
            seeds.refused.append(line)
        else:
            seeds.urls.append(line)
    return seeds


def _lines(raw: Iterable[bytes], source: str) -> Iterator[tuple[int, str | Refusal]]:
    """(number, URL) for each line that holds one, (number, Refusal) for one not UTF-8;
    blank lines and ``#`` comments are skipped."""
    for number, data in enumerate(raw, start=1):
        try:
            line = data.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            yield number, Refusal(f"{source} line {number}", f"not UTF-8 (byte {exc.start + 1})")
            continue
        if line and not line.startswith("#"):
            yield number, line


def url_chunks(lines: Iterable[bytes], source: str, max_bytes: int) -> Iterator[Seeds]:
    """The URLs of ``lines`` (bytes, as read), in chunks whose JSON list fits ``max_bytes``.

    Reads as it goes, so any number of URLs takes the memory of one chunk. A line
    that is not UTF-8, or whose JSON alone would not fit a chunk, is refused by its
    number in the chunk that reached it.
    """
    chunk, size = Seeds(), 2
    for number, line in _lines(lines, source):
        if isinstance(line, Refusal):
            chunk.refused.append(line)
            continue
        cost = len(json.dumps(line)) + 2
        if cost + 2 > max_bytes:
            chunk.refused.append(Refusal(f"{source} line {number}",
                                         f"longer than {max_bytes} bytes"))
            continue
        if size + cost > max_bytes:
            yield chunk
            chunk, size = Seeds(), 2
        chunk.urls.append(line)
        size += cost
    if chunk.total:
        yield chunk


def _unresolved(host: str, timeout: float) -> tuple[list[str], float | None]:
    """The screen's resolver: names that need DNS are not looked up before the start."""
    raise DnsFailure("error", "not looked up")


def seed_record(line: str, max_length: int, hint: int = 1) -> UrlRecord:
    """The record of a seed or ``hive add`` line (``sitemap:<url>`` a sitemap), its URL
    canonicalized: the one place a seed is; URLError if it is refused."""
    kind, url = seed_kind(line.strip())
    canonical = canonicalize(url, max_length=max_length)
    return UrlRecord(canonical, host_key(canonical), 0, hint=hint, kind=kind)


def screen(urls: Iterable[str], cfg: Config, seeds: Seeds | None = None) -> Seeds:
    """Canonicalize ``urls`` and check the addresses known without DNS; into ``seeds``."""
    out = seeds if seeds is not None else Seeds()
    dns = DnsCache.from_config(cfg.dns, resolver=_unresolved)
    guard = AddressGuard.from_config(cfg.dns)
    now = time.time()
    for line in urls:
        try:
            record = seed_record(line, cfg.scope.max_url_length)
        except URLError as exc:
            out.refused.append(Refusal(line, exc.reason))
            continue
        resolution = dns.lookup(urlsplit(record.url).hostname or "", now)
        if resolution.ok and resolution.addresses:
            refusal = guard.check(resolution.addresses[0])
            if refusal is not None:
                out.refused.append(Refusal(line, refusal, address=True))
                continue
        out.records.append(record)
        out.urls.append(SITEMAP_PREFIX + record.url if record.kind == SITEMAP else record.url)
    return out
