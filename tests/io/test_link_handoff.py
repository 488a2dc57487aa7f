"""A page whose links cannot be handed on is not done: it is fetched again, never lost."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hive.core.record import UrlRecord
from hive.core.ring import Ring
from hive.core.urls import host_key
from hive.core.wire import WireError
from hive.procs.worker import Worker
from hive.testweb import WebProcess
from tests.conftest import crawl_config

pytestmark = pytest.mark.slow


def test_a_page_whose_links_cannot_be_handed_on_is_fetched_again(
    web_server: WebProcess, tmp_path: Path
) -> None:
    cfg = crawl_config(web_server, scope={"mode": "host"}, frontier={"max_depth": 0})
    handed: list[list[str]] = []

    def on_links(records: list[UrlRecord], now: float) -> None:
        handed.append([record.url for record in records])
        if len(handed) == 1:
            raise WireError("too_many_records", "the outbox refused them")

    worker = Worker(cfg, tmp_path / "store", warc_dir=tmp_path / "warc", log_dir=tmp_path,
                    on_links=on_links)
    seed = web_server.seeds()[0]
    worker.add([seed], time.time())
    finished = worker.run_until_idle(timeout=30)
    stats = worker.stats()
    worker.close()
    assert finished, stats
    log = [json.loads(line) for line in (tmp_path / "crawl-00.jsonl").read_text().splitlines()]
    assert [e["outcome"] for e in log if e["url"] == seed] == ["handoff_failed", "ok"]
    assert len(handed) == 2 and handed[0] == handed[1] and handed[0], "the same links, again"
    assert stats["links/handoff_failed"] == 1


def test_links_to_owned_hosts_are_admitted_here_and_only_the_others_handed_on(
    web_server: WebProcess, tmp_path: Path
) -> None:
    """The ring does not change while a hive runs, so the splitter would route a link to
    an owned host straight back: the worker admits it itself."""
    # A lone worker of a two-worker ring: no peer grants it the test web's address when
    # the other worker owns it, so the address limits are off here (what is tested is where
    # links go; tests/test_address_politeness.py tests the limits across workers).
    cfg = crawl_config(web_server, frontier={"max_depth": 1},
                       politeness={"ip_concurrency": 0})
    ring = Ring(2)
    seed = web_server.seeds()[0]
    me = ring.owner(host_key(seed))
    handed: list[UrlRecord] = []
    worker = Worker(cfg, tmp_path / "store", warc_dir=tmp_path / "warc", log_dir=tmp_path,
                    worker_id=me, ring=ring,
                    on_links=lambda records, now: handed.extend(records))
    worker.add([seed], time.time())
    finished = worker.run_until_idle(timeout=60)
    stats = worker.stats()
    worker.close()
    assert finished, stats
    assert handed, "the seed page links to hosts the other worker owns"
    assert {ring.owner(record.host_key) for record in handed} == {1 - me}
    lines = (tmp_path / f"crawl-{me:02d}.jsonl").read_text().splitlines()
    log = [json.loads(line) for line in lines]
    fetched = {e["url"] for e in log if e["outcome"] == "ok"}
    assert fetched - {seed}, "links to the seed's own host were admitted and fetched here"
    assert all(ring.owner(host_key(url)) == me for url in fetched)
    assert stats["links/admitted_here"] >= len(fetched - {seed})
