"""The crawl's outputs as sinks (hive.fetch.sinks), on a real worker crawling the test web.

A new output is one module and one line of configuration: the example sinks here
are added by naming their factories in ``outputs.sinks``, nothing else. Each gets
every exchange the WARC sink gets, in the configured order; an optional sink that
fails is counted and logged and loses no page; a required one fails the fetch.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from hive import config
from hive.errors import ConfigError
from hive.fetch.sinks import Exchange, Sink, SinkContext, Sinks
from hive.procs.worker import Worker
from hive.testweb import Web, WebProcess
from tests.conftest import WEB_ADDRESS, crawl_config, wait_for

WARC = "hive.fetch.warc_sink:build"
HERE = "tests.io.test_sinks"

# What the ordered sinks saw, in the order they saw it: (sink, URL).
ORDER: list[tuple[str, str]] = []
_ORDER_LOCK = threading.Lock()


class Recorder(Sink):
    """The example of hive/ARCHITECTURE.md's "A new output": each exchange's URL and
    status, kept in memory (a real output would write a file under context.directory)."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def write(self, exchange: Exchange) -> None:
        with self._lock:
            self.seen.append((exchange.url, exchange.status))

    def stats(self) -> dict[str, float]:
        with self._lock:
            return {"recorder/exchanges": len(self.seen)}


def recorder(context: SinkContext) -> Recorder:
    return Recorder()


class Ordered(Sink):
    def __init__(self, name: str) -> None:
        self.name = name

    def write(self, exchange: Exchange) -> None:
        with _ORDER_LOCK:
            ORDER.append((self.name, exchange.url))


def first(context: SinkContext) -> Ordered:
    return Ordered("first")


def second(context: SinkContext) -> Ordered:
    return Ordered("second")


class Broken(Sink):
    """An optional sink that fails on every exchange."""

    name = "broken"

    def write(self, exchange: Exchange) -> None:
        raise OSError(f"no room for {exchange.url}")


def broken(context: SinkContext) -> Broken:
    return Broken()


class BrokenRequired(Broken):
    name = "broken_required"
    required = True


def broken_required(context: SinkContext) -> BrokenRequired:
    return BrokenRequired()


def not_a_sink(context: SinkContext) -> object:
    return object()


@pytest.fixture(scope="module")
def small_web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebProcess]:
    log = tmp_path_factory.mktemp("web") / "requests.jsonl"
    with WebProcess(Web(seed=11, hosts=3, pages=6, hostile=False), log,
                    host=WEB_ADDRESS) as server:
        yield server


def crawl(
    server: WebProcess, directory: Path, sinks: list[str]
) -> tuple[Worker, dict[str, float]]:
    """A worker with these sinks that crawled the small web (closed: its files are final),
    and its stats at the end."""
    cfg = crawl_config(server, outputs={"sinks": sinks})
    worker = Worker(cfg, directory / "store", warc_dir=directory / "warc", log_dir=directory)
    try:
        worker.add(server.seeds(), time.time())
        assert worker.run_until_idle(timeout=60)
        stats = worker.stats()
    finally:
        worker.close()
    return worker, stats


def archived(directory: Path) -> Counter[tuple[str, int]]:
    """(target URI, HTTP status) of every response and revisit record in the WARC files."""
    found: Counter[tuple[str, int]] = Counter()
    for path in sorted((directory / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type in ("response", "revisit"):
                    status = int(record.http_headers.get_statuscode())
                    found[(record.rec_headers.get_header("WARC-Target-URI"), status)] += 1
    return found


def outcomes(directory: Path) -> Counter[str]:
    lines = (directory / "crawl-00.jsonl").read_text().splitlines()
    return Counter(json.loads(line)["outcome"] for line in lines)


def test_a_new_output_is_one_line_of_configuration(small_web: WebProcess, tmp_path: Path) -> None:
    """The example sink, named in outputs.sinks after the WARC sink, receives every exchange
    the WARC holds (robots.txt included), and its stats join the worker's."""
    worker, stats = crawl(small_web, tmp_path, [WARC, f"{HERE}:recorder"])
    example = worker.sinks.sinks[1]
    assert isinstance(example, Recorder)
    seen = Counter(example.seen)
    assert seen == archived(tmp_path)
    assert any(url.endswith("/robots.txt") for url, _ in seen)
    assert len(seen) > 3 * 6 // 2
    assert stats["recorder/exchanges"] == len(example.seen)


def test_sinks_take_each_exchange_in_their_configured_order(
    small_web: WebProcess, tmp_path: Path
) -> None:
    ORDER.clear()
    crawl(small_web, tmp_path, [f"{HERE}:second", f"{HERE}:first"])
    assert ORDER
    # The fetch threads interleave, but each exchange reaches "second" before "first".
    for i, (name, url) in enumerate(ORDER):
        if name == "first":
            assert ("second", url) in ORDER[:i], url
    assert Counter(n for n, _ in ORDER) == {"first": len(ORDER) // 2, "second": len(ORDER) // 2}


def test_an_optional_sink_that_fails_is_counted_and_logged_and_loses_no_page(
    small_web: WebProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every exchange still reaches the WARC sink after it, every page ends as without it;
    each failure is counted, and only the 1st, 10th, 100th... are logged."""
    with caplog.at_level(logging.ERROR, logger="hive.fetch.sinks"):
        _, stats = crawl(small_web, tmp_path, [f"{HERE}:broken", WARC])
    warc = archived(tmp_path)
    failures = sum(warc.values())
    assert failures > 10
    assert stats["sinks/broken/failed"] == failures
    assert outcomes(tmp_path)["error"] == 0
    logged = [r for r in caplog.records if "sink broken failed" in r.getMessage()]
    assert len(logged) == sum(1 for n in (1, 10, 100, 1000) if n <= failures)
    assert logged[0].exc_info is not None


def test_a_required_sink_that_fails_fails_the_fetch(small_web: WebProcess, tmp_path: Path) -> None:
    """As a WARC that cannot be written does: the lease ends ``error``, its page not done."""
    cfg = crawl_config(small_web, outputs={"sinks": [f"{HERE}:broken_required"]})
    worker = Worker(cfg, tmp_path / "store", log_dir=tmp_path)
    try:
        worker.add(small_web.seeds()[:1], time.time())

        def errored() -> bool:
            worker.wait(worker.loop_once(time.time()))
            return worker.counts["worker/outcome/error"] >= 1

        wait_for(errored, timeout=30)
        assert worker.counts["worker/outcome/ok"] == 0
    finally:
        worker.close()


def test_the_warc_sink_is_off_with_warc_enabled_false() -> None:
    cfg = config.load(environ={}).replace(warc={"enabled": False})
    assert cfg.outputs.sinks == [WARC]
    assert not Sinks.from_config(SinkContext(cfg, "00", Path("/nonexistent")))


@pytest.mark.parametrize(("sinks", "message"), [
    (["warc"], "outputs.sinks: expected 'module:function'"),
    ([f"{HERE}:missing"], "outputs.sinks: cannot load"),
    (["no.such.module:build"], "outputs.sinks: cannot load"),
    ([WARC, WARC], "outputs.sinks: 'hive.fetch.warc_sink:build' is named twice"),
])
def test_a_bad_sink_path_is_a_config_error_naming_the_key(sinks: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config.load(environ={}).replace(outputs={"sinks": sinks})


def test_a_factory_that_makes_no_sink_is_a_config_error(tmp_path: Path) -> None:
    cfg = config.load(environ={}).replace(outputs={"sinks": [f"{HERE}:not_a_sink"]})
    with pytest.raises(ConfigError, match="outputs.sinks: .*not_a_sink.* not a hive.fetch"):
        Sinks.from_config(SinkContext(cfg, "00", tmp_path))
