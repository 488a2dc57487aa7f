"""The text sink: each HTML page's main text and language, as WET records.

An optional sink (hive.fetch.sinks), off by default: ``outputs.sinks`` turns it on
with ``hive.fetch.text_sink:build``. For each exchange with status 200 and an HTML
Content-Type (``text/html``, ``application/xhtml+xml``) it takes the body as the
fetcher decoded it (``Exchange.decoded``: content codings undone within
``fetch.max_decoded_bytes``, once for the whole pipeline), reads the page in
its encoding (hive.fetch.parse.page_encoding), takes its main text and language
(hive.fetch.text, at most ``text.max_chars`` characters) and writes one WARC/1.1
``conversion`` record, in the layout of Common Crawl's WET files:

* ``WARC-Target-URI`` and ``WARC-Date`` are the response record's (the date the fetch
  started, as the WARC sink writes it); ``WARC-Refers-To`` is that record's
  WARC-Record-ID, which the WARC sink, before this one, hands on in the exchange
  (``Exchange.record_id``; left out when no WARC sink ran), and
  ``WARC-Refers-To-Target-URI`` and ``WARC-Refers-To-Date`` name it too;
* ``WARC-Identified-Content-Language``: the page's language as an ISO 639-3 code, as
  Common Crawl writes it (hive.fetch.text), left out when the text is too short to tell;
* ``Content-Type: text/plain`` and a ``WARC-Block-Digest``; the block is the text in
  UTF-8.

The records go to the worker's own files, ``hive-NN-text-<time>-<seq>.warc.wet.gz`` in
the WARC directory, written by a WarcWriter of that prefix and suffix (rotation at
``warc.max_file_bytes``, ``.open`` while written, crash recovery; no CDXJ index), so
readers of ``*.warc.gz`` never take them for captures.

Counted (``text/…``): pages converted, truncated at ``max_chars``, and skipped by
reason (``not_ok``: another status; ``not_html``; ``incomplete``: a fetch that failed
before its body ended, so it was never decoded; ``binary``: a body that sniffs as
binary, as hive.fetch.parse sniffs it, whatever its label; ``empty``: no text). A
whole body whose content coding could not be undone (corrupt, or unknown) raises UnreadablePage,
which the sinks count as this sink's failure (``sinks/text/failed``) while the crawl
goes on.

Without the ``text`` extra, importing this module is a ConfigError naming
``outputs.sinks``: the config loads every sink's path before any process starts.
"""

from __future__ import annotations

import threading
from collections import Counter

from hive import __version__
from hive.errors import ConfigError
from hive.fetch import text
from hive.fetch.headers import content_codings
from hive.fetch.parse import HTML_TYPES, media_type, page_encoding, sniff_binary
from hive.fetch.sinks import Exchange, Sink, SinkContext
from hive.fetch.warc import WarcWriter
from hive.fetch.warc_records import one_line, record_id, sha1_digest, warc_date

if not text.available():
    raise ConfigError(f"outputs.sinks: {__name__}:build needs the text extra: {text.EXTRA}")

WET_SUFFIX = ".warc.wet.gz"


class UnreadablePage(ValueError):
    """A page whose content coding could not be undone: a corrupt stream, too many codings,
    or one hive.fetch.decoding does not know (``br`` without brotli, ``compress``)."""


def conversion_fields(exchange: Exchange, page: text.PageText) -> list[tuple[str, str]]:
    """The WARC fields of a page's conversion record (the module docstring)."""
    url, when = one_line(exchange.url), warc_date(exchange.started)
    fields = [
        ("WARC-Type", "conversion"),
        ("WARC-Record-ID", record_id()),
        ("WARC-Date", when),
        ("WARC-Target-URI", url),
    ]
    if exchange.record_id is not None:
        fields.append(("WARC-Refers-To", one_line(exchange.record_id)))
    fields += [("WARC-Refers-To-Target-URI", url), ("WARC-Refers-To-Date", when)]
    if page.language is not None:
        fields.append(("WARC-Identified-Content-Language", page.language))
    return fields


class TextSink(Sink):
    """Main text and language of each HTML page, as conversion records in WET files."""

    name = "text"

    def __init__(self, writer: WarcWriter, max_chars: int) -> None:
        self.writer = writer
        self.max_chars = max_chars
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _count(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1

    def write(self, exchange: Exchange) -> None:
        """Write the page's conversion record, or count why there is none."""
        if exchange.status != 200:
            self._count("skipped/not_ok")
            return
        kind, charset = media_type(exchange.content_type)
        if kind not in HTML_TYPES:
            self._count("skipped/not_html")
            return
        html = exchange.decoded
        if html is None:
            if exchange.truncated is not None:
                self._count("skipped/incomplete")
                return
            codings = [coding for name, value in exchange.headers
                       if name.lower() == "content-encoding" for coding in content_codings(value)]
            raise UnreadablePage(f"{exchange.url}: content coding {', '.join(codings)} "
                                 "not undone (the crawl log says why)")
        if sniff_binary(html):
            self._count("skipped/binary")
            return
        page = text.page_text(html, page_encoding(html, charset), self.max_chars)
        if not page.text.strip():
            self._count("skipped/empty")
            return
        block = page.text.encode("utf-8", "replace")  # a lone surrogate, were there one
        self.writer.write_record([
            *conversion_fields(exchange, page),
            ("Content-Type", "text/plain"),
            ("WARC-Block-Digest", sha1_digest(block)),
        ], block)
        self._count("converted")
        if page.truncated:
            self._count("truncated")

    def stats(self) -> dict[str, float]:
        with self._lock:
            out: dict[str, float] = {f"text/{key}": n for key, n in self._counts.items()}
        for key, value in self.writer.stats().items():
            out["text/" + key.removeprefix("warc/")] = value
        return out

    def close(self) -> None:
        self.writer.close()


def build(context: SinkContext) -> TextSink:
    """The text sink of one worker: files ``hive-<name>-text-…`` in its WARC directory."""
    cfg = context.cfg
    writer = WarcWriter(
        context.directory, f"hive-{context.name}-text", cfg.warc.max_file_bytes,
        cfg.warc.gzip_level, f"hive/{__version__}", suffix=WET_SUFFIX, indexed=False,
        info=[("description", "the main text and language of each HTML page "
                              "(hive.fetch.text: Resiliparse, py3langid)")],
    )
    return TextSink(writer, cfg.text.max_chars)
