"""A recrawl's plan at a worker (hive.procs.plan): its URLs queued at their depth, hop path
and change level, what it says of each kept for the fetch, malformed lines counted and
logged, and the plan read once."""

from __future__ import annotations

import time
from pathlib import Path

from hive import config
from hive.core.prior import Prior
from hive.core.record import UrlRecord
from hive.frontier.priority import change_level
from hive.procs.worker import Worker

DAY = 86400.0


def a_plan(path: Path) -> list[Prior]:
    now = time.time()
    priors = [
        Prior("http://a.test/often", depth=1, path="L", via="http://a.test/", seen=3, changed=2,
              span=2 * DAY, last=now - DAY, etag='"1"'),
        Prior("http://a.test/never", depth=2, path="LL", via="http://a.test/often", seen=3,
              span=2 * DAY, last=now - DAY),
        Prior("http://a.test/once", depth=1, path="L", last=now - DAY),
        Prior("http://b.test/map.xml", kind="s"),
    ]
    lines = [p.encode() for p in priors]
    lines.insert(1, b'{"url": "http://a.test/x", "depth": "deep"}')
    lines.insert(3, b"not json")
    path.write_bytes(b"\n".join(lines) + b"\n")
    return priors


def queued(worker: Worker) -> dict[str, tuple[int, UrlRecord]]:
    """Each queued record by URL, with its front-queue level."""
    store = worker.frontier.store
    out = {}
    for key in store.keys("front"):
        value = store.get("front", key)
        assert value is not None
        record = UrlRecord.decode(value)
        out[record.url] = (key[0], record)
    return out


def start(tmp_path: Path, plan: Path, order: str = "change_rate") -> Worker:
    cfg = config.load(environ={}).replace(recrawl={"plan": str(plan), "order": order},
                                          fetch={"threads": 1})
    return Worker(cfg, tmp_path / "store", warc_dir=tmp_path / "warc", log_dir=tmp_path)


def test_a_plan_queues_its_urls_by_change_rate_and_keeps_their_priors(tmp_path: Path) -> None:
    plan = tmp_path / "recrawl.jsonl"
    priors = a_plan(plan)
    worker = start(tmp_path, plan)
    try:
        assert worker.counts["recrawl/plan/queued"] == 4
        assert worker.counts["recrawl/plan/malformed"] == 2
        assert worker.counts["recrawl/plan/malformed/fields"] == 2
        found = queued(worker)
        levels = {url: level for url, (level, _) in found.items()}
        assert levels["http://a.test/often"] < levels["http://a.test/once"] < levels[
            "http://a.test/never"]
        assert levels["http://a.test/never"] == change_level(0.0, 8)
        _, never = found["http://a.test/never"]
        assert (never.depth, never.path, never.via) == (2, "LL", "http://a.test/often")
        assert found["http://b.test/map.xml"][1].kind == "s"
        assert worker.plan is not None
        assert worker.plan.load("http://a.test/often") == priors[0]
        assert worker.plan.load("http://a.test/unplanned") is None
    finally:
        worker.close()
    # Read once: a restart queues nothing again.
    again = start(tmp_path, plan)
    try:
        assert "recrawl/plan/queued" not in again.counts
        assert len(queued(again)) == 4
    finally:
        again.close()


def test_plain_order_queues_planned_urls_as_first_found(tmp_path: Path) -> None:
    plan = tmp_path / "recrawl.jsonl"
    a_plan(plan)
    worker = start(tmp_path, plan, order="plain")
    try:
        levels = {url: level for url, (level, _) in queued(worker).items()}
        # The default prioritizer's: 1 + depth.
        assert levels["http://a.test/often"] == levels["http://a.test/once"] == 2
        assert levels["http://a.test/never"] == 3
    finally:
        worker.close()
