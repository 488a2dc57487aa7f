"""A page whose links cannot be handed on is not done: it is fetched again, never lost."""

from __future__ import annotations

import json
import time
from pathlib import Path

from hive.core.record import UrlRecord
from hive.core.wire import WireError
from hive.procs.worker import Worker
from hive.testweb import WebProcess
from tests.conftest import crawl_config


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
