"""The WARC sink, the crawl's first output: each exchange as WARC records, indexed.

Each exchange (hive.fetch.sinks) becomes a request record and a response record
in the worker's WARC files (hive.fetch.warc, which also writes each finished
file's CDXJ index beside it, hive.fetch.cdxj), or a request and a ``revisit``
record when its whole payload was archived before (the worker's payload index,
hive.fetch.revisits: looked up and filled here on the fetch threads, moved into
the store by ``persist`` on the frontier thread). The sink is **required**: a
record that cannot be written fails the fetch, so no page is done without its
archive. ``build``, its factory, is named in ``outputs.sinks`` by default and
makes nothing when ``warc.enabled`` is false.
"""

from __future__ import annotations

import hashlib

from hive import __version__
from hive.config import Config
from hive.fetch.revisits import PayloadIndex
from hive.fetch.sinks import Exchange, Sink, SinkContext
from hive.fetch.warc import Original, WarcWriter


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

    def write(self, exchange: Exchange) -> None:
        """Write the exchange's records: a revisit if its whole payload was archived before."""
        body, index, truncated = exchange.body, self.payloads, exchange.truncated
        sha1 = hashlib.sha1(body).digest()
        indexed = index is not None and truncated is None and len(body) >= index.min_bytes
        original = index.find(sha1) if index is not None and indexed else None
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
                index.revisited(len(body))

    def persist(self) -> None:
        if self.payloads is not None:
            self.payloads.persist()

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = dict(self.writer.stats())
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
