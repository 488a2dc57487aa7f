"""The crawl's outputs: the sink interface, and the sinks one worker writes to.

Scrapy's item pipelines and feed exporters are the model. The fetch pipeline
hands each finished HTTP **exchange** (``Exchange``: the request as sent, the
response as received, and how its URL was reached) to the worker's sinks, in
the order ``outputs.sinks`` names them, and knows nothing of their formats. The
WARC sink (hive.fetch.warc_sink: WARC records, their CDXJ index, revisit
records) is the first. An exchange is every request that got a response, of
any status: pages, robots.txt, each redirect hop, a page asked twice for its
cookie; a request that failed before a status line is none.

**What a sink tells the ones after it.** ``write`` may return the exchange with
what it learned filled in (``Exchange._replace``), and the sinks after it get
that one: the WARC sink fills ``record_id``, the WARC-Record-ID of the response
(or revisit) record it wrote, which the text sink's conversion records refer to
(``WARC-Refers-To``). A sink that returns None passes the exchange on as it got it.

**Threads.** ``write`` runs on the fetch threads, several at once, so a sink
is safe to share between threads. ``persist`` runs on the worker's frontier
thread, once for each outcome it applies, before the commit that records it: a
sink that keeps state in the worker's store moves there what the fetch threads
left it (the WARC sink's payload index does). ``stats`` runs on the frontier
thread too; ``close`` once, after the fetch threads have stopped.

**A failure.** A sink is ``required`` or optional. A required sink's failure is
the fetch's: its exception leaves ``Pipeline.run`` and the worker records the
lease as ``error`` (and stops on a full disk), as a WARC record that could not
be written always did: a page is not done without its archive, so it is
fetched again. An optional sink's failure is counted (``sinks/<name>/failed``)
and logged, its first and then its 10th, 100th, 1,000th... so that a sink
failing on every page cannot flood the log; the exchange still goes to the
sinks after it and the page to its outcome.

**Configuration.** ``outputs.sinks`` names each sink by the dotted path of its
factory, ``module:function``, loaded through hive.plugins (the config checks
that every path loads before any process starts). A factory takes the worker's
``SinkContext`` and returns its ``Sink``, or None when its own configuration
turns it off (the WARC sink when ``warc.enabled`` is false). So a new output is
a module with a ``Sink`` and its factory, and its path in that list.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from hive.config import Config
from hive.core.prior import Prior
from hive.errors import ConfigError
from hive.fetch.warc_records import Truncation
from hive.outcome import Kind
from hive.plugins import load_object

if TYPE_CHECKING:
    from hive.fetch.client import FetchResult
    from hive.fetch.revisits import PayloadIndex

log = logging.getLogger(__name__)


def truncation(result: FetchResult) -> Truncation | None:
    """Why a body is incomplete (WARC-Truncated's words): the size cap, the clock, the
    connection dropped mid-body (reset, or closed short of its length), or else."""
    if not result.truncated:
        return None
    if result.outcome == Kind.TOO_LARGE:
        return "length"
    if result.outcome == Kind.TIMEOUT:
        return "time"
    return "disconnect" if result.outcome in (Kind.CONNECT, Kind.PROTOCOL) else "unspecified"


class Exchange(NamedTuple):
    """One request and its response, as a sink receives it (the module docstring)."""

    url: str  # the canonical URL requested
    address: str  # the IP address the request went to
    request: bytes  # the request head exactly as sent: request line, headers, empty line
    status: int
    status_line: str
    headers: Sequence[tuple[str, str]]  # the response's, as received, in their order
    body: bytes  # as received: de-chunked, still content-encoded
    # the body with its content codings undone, as the fetcher decoded it (cut at
    # fetch.max_decoded_bytes); None when it was not: the fetch failed before the body ended,
    # or a coding could not be undone (a corrupt stream, one hive does not decode)
    decoded: bytes | None
    truncated: Truncation | None  # why the body is incomplete, None if it is whole
    started: float  # when the request was sent
    finished: float  # when the response finished arriving
    content_type: str | None
    via: str  # the URL this one was found on ("" for a seed or a prerequisite)
    hop_path: str  # how it was reached from its seed (hive.core.record)
    prior: Prior | None = None  # what a recrawl's prior crawls knew of the URL
    # its response (or revisit) record's WARC-Record-ID, once the WARC sink has written it
    record_id: str | None = None

    @classmethod
    def of(cls, url: str, address: str, result: FetchResult, via: str,
           hop_path: str, prior: Prior | None = None) -> Exchange:
        """The exchange of a fetch that got a response (``result.status`` is set)."""
        assert result.status is not None
        return cls(
            url, address, result.request_bytes, result.status, result.status_line,
            result.headers, result.raw_body, result.body if result.decoded else None,
            truncation(result), result.started, result.finished, result.content_type, via,
            hop_path, prior,
        )



def failed_key(label: str) -> str:
    """The stats key counting an optional sink's failures: ``sinks/<label>/failed``."""
    return f"sinks/{label}/failed"


def failures(stats: Mapping[str, object]) -> dict[str, int]:
    """An optional sink's failures by its label, read from one worker's stats."""
    out: dict[str, int] = {}
    for key, value in stats.items():
        if (key.startswith("sinks/") and key.endswith("/failed") and isinstance(value, int | float)
                and not isinstance(value, bool)):
            out[key[len("sinks/"):-len("/failed")]] = int(value)
    return out

@dataclass(frozen=True, slots=True)
class SinkContext:
    """What a sink's factory is given: the config, the worker's name (``"00"``: files
    named by it do not collide with another worker's), the directory its archive files
    go in (``DATA/warc/``), and its payload index (hive.fetch.revisits; None when
    revisits are off), which the WARC sink reads and fills."""

    cfg: Config
    name: str
    directory: Path
    payloads: PayloadIndex | None = None


class Sink:
    """One output of the crawl. A sink overrides ``write``; the rest is optional."""

    #: In stats and logs (``sinks/<name>/failed``); the class name if empty.
    name: str = ""
    #: Whether a failure of this sink fails the fetch (the module docstring).
    required: bool = False

    def write(self, exchange: Exchange) -> Exchange | None:
        """Take one exchange (on a fetch thread); return once it is as safe as the sink
        makes it (the WARC sink: in the kernel), with the exchange as the sinks after it
        are to get it if this sink filled something in (the module docstring)."""
        raise NotImplementedError

    def persist(self) -> None:
        """Move into the worker's store what ``write`` left for it (on the frontier thread,
        before its commit)."""

    def stats(self) -> dict[str, float]:
        """Counters for the worker's stats (on the frontier thread)."""
        return {}

    def close(self) -> None:
        """Finish: flush and close files (once, when the fetch threads have stopped)."""


def _label(sink: Sink) -> str:
    return sink.name or type(sink).__name__


class Sinks:
    """The sinks one worker writes to, in order, under the failure rule of the module
    docstring; shared by its threads as the sinks themselves are."""

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self.sinks = tuple(sinks)
        self._failures: Counter[str] = Counter()
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, context: SinkContext) -> Sinks:
        """The sinks ``outputs.sinks`` names, each built by its factory (hive.plugins)."""
        built: list[Sink] = []
        for path in context.cfg.outputs.sinks:
            sink = load_object("outputs.sinks", path)(context)
            if sink is None:
                continue
            if not isinstance(sink, Sink):
                raise ConfigError(f"outputs.sinks: {path!r} made {type(sink).__name__}, "
                                  "not a hive.fetch.sinks.Sink")
            built.append(sink)
        return cls(built)

    def __bool__(self) -> bool:
        return bool(self.sinks)

    def write(self, exchange: Exchange) -> None:
        """Hand one exchange to every sink, in order, each getting it as the one before it
        returned it (a fetch thread)."""
        for sink in self.sinks:
            if sink.required:
                exchange = sink.write(exchange) or exchange
                continue
            try:
                exchange = sink.write(exchange) or exchange
            except Exception as exc:
                self._failed(sink, f"writing {exchange.url}", exc)

    def persist(self) -> None:
        """Let every sink move its pending state into the worker's store (the frontier
        thread); a required sink's failure stops the worker, as a store error does."""
        for sink in self.sinks:
            if sink.required:
                sink.persist()
                continue
            try:
                sink.persist()
            except Exception as exc:
                self._failed(sink, "persisting", exc)

    def _failed(self, sink: Sink, doing: str, exc: Exception) -> None:
        """Count an optional sink's failure; log its first, 10th, 100th, ..."""
        label = _label(sink)
        with self._lock:
            self._failures[label] += 1
            count = self._failures[label]
        if count == 1 or str(count).rstrip("0") == "1":
            log.error("sink %s failed %s (%d failures so far): %s: %s", label, doing, count,
                      type(exc).__name__, exc, exc_info=count == 1)

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for sink in self.sinks:
            out.update(sink.stats())
        with self._lock:
            for label, count in self._failures.items():
                out[failed_key(label)] = count
        return out

    def close(self) -> None:
        """Close every sink, in order; an optional sink's failure is counted and logged,
        a required sink's raised once the others are closed."""
        error: Exception | None = None
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:
                if sink.required:
                    error = error or exc
                else:
                    self._failed(sink, "closing", exc)
        if error is not None:
            raise error
