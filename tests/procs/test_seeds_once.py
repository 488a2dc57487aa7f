"""A seed is canonicalized once, where it enters (hive.procs.seeds.seed_record), and
trusted after: a start's seeds by its screen, ``hive add`` URLs by the supervisor's
handler; the supervisor's outbox keeps the records it was given."""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hive import config
from hive.core import urls
from hive.core.record import SITEMAP, UrlRecord
from hive.core.wire import decode_records
from hive.procs import seeds, supervisor, worker
from hive.procs.children import Child
from hive.procs.endpoints import Endpoints
from hive.procs.seeds import screen
from hive.procs.supervisor import Supervisor
from hive.storage.datadir import DataDir
from hive.storage.modes import read_only
from tests.conftest import wait_for


class Sleepers(Supervisor):
    """A supervisor whose children sleep: its outbox is what this test reads."""

    def _make_children(self, endpoints: Endpoints) -> list[Child]:
        spawn = multiprocessing.get_context("spawn")
        return [Child(name, f"{name}.log", lambda: spawn.Process(target=time.sleep, args=(60,)))
                for name in ("splitter", "worker-00")]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every call of canonicalize by a module a seed passes through, by URL."""
    counted: Counter[str] = Counter()
    real = urls.canonicalize

    def counting(url: str, *args: Any, **kwargs: Any) -> str:
        counted[url] += 1
        return real(url, *args, **kwargs)

    for module in (seeds, supervisor, worker):
        if hasattr(module, "canonicalize"):
            monkeypatch.setattr(module, "canonicalize", counting)
    return counted


@contextlib.contextmanager
def opened(role: Supervisor) -> Iterator[Supervisor]:
    """The supervisor opened, then stopped and closed (so its store may be read)."""
    role.open()
    try:
        yield role
    finally:
        role.request_stop("the test is over", now=True)
        wait_for(lambda: role.loop_once(time.time()) is not None and role.finished, 20.0,
                 interval=0.01)
        role.close()


def outbox(data: Path) -> list[UrlRecord]:
    with read_only(DataDir(data).supervisor) as txn:
        return [r for _, frame in txn.items("outbox") for r in decode_records(frame)]


def test_a_start_seed_is_canonicalized_once_where_it_enters(
        tmp_path: Path, calls: Counter[str]) -> None:
    cfg = config.load(environ={})
    lines = ["HTTP://A.test:80/x%7e", "sitemap:http://B.test/s.xml"]
    screened = screen(lines, cfg)
    assert calls == {"HTTP://A.test:80/x%7e": 1, "http://B.test/s.xml": 1}
    with opened(Sleepers(cfg, tmp_path, 1, seeds=screened.records)):
        pass
    assert calls == {"HTTP://A.test:80/x%7e": 1, "http://B.test/s.xml": 1}, (
        "the supervisor trusts the screened records")
    assert [(r.url, r.host_key, r.kind) for r in outbox(tmp_path)] == [
        ("http://a.test/x~", "a.test", ""), ("http://b.test/s.xml", "b.test", SITEMAP)]


def test_the_supervisor_puts_a_start_record_in_its_outbox_as_given(
        tmp_path: Path) -> None:
    """A record that canonicalizing would change: it was not canonicalized again."""
    as_given = UrlRecord("http://a.test/%7e", "a.test", 0, hint=1)
    with opened(Sleepers(config.load(environ={}), tmp_path, 1, seeds=[as_given])):
        pass
    assert urls.canonicalize(as_given.url) != as_given.url
    assert outbox(tmp_path) == [as_given]


def test_a_hive_add_url_is_canonicalized_once_at_the_supervisor(
        tmp_path: Path, calls: Counter[str]) -> None:
    with opened(Sleepers(config.load(environ={}), tmp_path, 1)) as role:
        queued = role.queue(["http://C.test/%7e", "nonsense"], time.time())
    assert (queued.accepted, dict(queued.refused)) == (1, {"malformed": 1})
    assert calls == {"http://C.test/%7e": 1, "nonsense": 1}
    assert [r.url for r in outbox(tmp_path)] == ["http://c.test/~"]
