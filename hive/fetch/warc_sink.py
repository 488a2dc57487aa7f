"""The WARC sink, the crawl's first output: each exchange as WARC records, indexed.

Each exchange (hive.fetch.sinks) becomes a request record and a response record
in the worker's WARC files (hive.fetch.warc, which also writes each finished
file's CDXJ index beside it, hive.fetch.cdxj), or a request and a ``revisit``
record when its whole payload was archived before (the worker's payload index,
hive.fetch.revisits: looked up and filled here on the fetch threads, moved into
the store by ``persist`` on the frontier thread); a recrawl's 304 becomes a request and
a ``server-not-modified`` revisit of the prior crawl's capture, and a recrawl's 200 whose
payload the prior crawl archived an ``identical-payload-digest`` revisit of it. The sink
is **required**: a record that cannot be written fails the fetch, so no page is done
without its archive. It hands the sinks after it the exchange with its response record's
ID (``Exchange.record_id``). ``build``, its factory, is named in ``outputs.sinks`` by
default and makes nothing when ``warc.enabled`` is false.
"""

from __future__ import annotations

import hashlib
import threading

from hive import __version__
from hive.config import Config
from hive.core.prior import Prior
from hive.fetch.revisits import PayloadIndex
from hive.fetch.sinks import Exchange, Sink, SinkContext
from hive.fetch.warc import NOT_MODIFIED_PROFILE, Original, WarcWriter
from hive.fetch.warc_records import digest_text


def warcinfo_fields(cfg: Config) -> list[tuple[str, str]]:
    """What a warcinfo record says of the crawl: its robots policy and the headers it sends."""
    fields = [
        ("robots", "obey" if cfg.robots.enabled else "ignore"),
        ("http-header-user-agent", cfg.fetch.user_agent),
    ]
    for line in cfg.fetch.headers:
        name, _, value = line.partition(":")
        if name.strip().lower() == "from":
            fields.append(("http-header-from", value.strip()))
    return fields


class WarcSink(Sink):
    """WARC records of every exchange, a revisit for a payload archived before."""

    name = "warc"
    required = True

    def __init__(self, writer: WarcWriter, payloads: PayloadIndex | None = None) -> None:
        self.writer = writer
        self.payloads = payloads
        self.not_modified_records = 0
        self._lock = threading.Lock()

    def write(self, exchange: Exchange) -> Exchange:
        """Write the exchange's records: a revisit if its whole payload was archived before,
        or if it is a recrawl's 304 (``not_modified``). Returns the exchange with the record
        ID of its response (or revisit) record."""
        prior = exchange.prior
        if prior is not None and exchange.status == 304 and prior.date:
            return exchange._replace(record_id=self.not_modified(exchange, prior))
        body, index, truncated = exchange.body, self.payloads, exchange.truncated
        sha1 = hashlib.sha1(body).digest()
        indexed = index is not None and truncated is None and len(body) >= index.min_bytes
        original = index.find(sha1) if index is not None and indexed else None
        known = original is not None
        if (not known and indexed and prior is not None and prior.date
                and prior.digest == digest_text(sha1)):
            # A recrawl's page whose payload the prior crawl archived: a revisit of that.
            original = Original(prior.original_uri, prior.date, prior.record_id)
        where = self.writer.write_exchange(
            url=exchange.url, ip=exchange.address, request=exchange.request,
            status_line=exchange.status_line, response_headers=exchange.headers,
            body=body, truncated=truncated, date=exchange.started, payload_sha1=sha1,
            original=original, via=exchange.via, hop_path=exchange.hop_path,
        )
        if index is not None and indexed:
            if original is None:
                index.archived(sha1, Original(exchange.url, where.date, where.record_id))
            else:
                if not known:  # later repeats of it refer to the prior capture too
                    index.archived(sha1, original)
                index.revisited(len(body))
        return exchange._replace(record_id=where.record_id)

    def not_modified(self, exchange: Exchange, prior: Prior) -> str:
        """A 304 as a server-not-modified revisit of the prior capture, its block the head
        the 304 confirms (hive.core.prior.Prior.refreshed_head; the 304's own if the prior
        head is unknown); returns the revisit record's ID."""
        status_line, headers = exchange.status_line, list(exchange.headers)
        refreshed = prior.refreshed_head(headers)
        if refreshed is not None:
            status_line, headers = refreshed
        where = self.writer.write_exchange(
            url=exchange.url, ip=exchange.address, request=exchange.request,
            status_line=status_line, response_headers=headers, body=b"",
            date=exchange.started, via=exchange.via, hop_path=exchange.hop_path,
            original=Original(prior.original_uri, prior.date, prior.record_id,
                              NOT_MODIFIED_PROFILE, prior.digest),
        )
        with self._lock:
            self.not_modified_records += 1
        return where.record_id

    def persist(self) -> None:
        if self.payloads is not None:
            self.payloads.persist()

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = dict(self.writer.stats())
        if self.not_modified_records:
            out["revisits/not_modified"] = self.not_modified_records
        if self.payloads is not None:
            out.update(self.payloads.stats())
        return out

    def close(self) -> None:
        self.writer.close()


def build(context: SinkContext) -> WarcSink | None:
    """The WARC sink of one worker (files ``hive-<name>-…``), None if ``warc.enabled`` is off."""
    cfg = context.cfg
    if not cfg.warc.enabled:
        return None
    writer = WarcWriter.from_config(
        cfg.warc, context.directory, f"hive-{context.name}", f"hive/{__version__}",
        info=warcinfo_fields(cfg),
    )
    return WarcSink(writer, context.payloads)
