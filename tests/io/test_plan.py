"""A recrawl's plan at a worker (hive.procs.plan): its URLs queued at their depth, hop path
and change level, what it says of each kept for the fetch, malformed lines counted and
logged, the plan read a batch a turn, once, and on from where a restart left it."""

from __future__ import annotations

import time
from pathlib import Path

from hive import config
from hive.core.prior import Prior
from hive.core.record import UrlRecord
from hive.core.ring import Ring
from hive.core.urls import host_key
from hive.frontier.priority import change_level
from hive.procs.resize import resize
from hive.procs.worker import Worker
from hive.storage.datadir import DataDir

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


def read(worker: Worker, lines: int = 2) -> int:
    """Read the worker's plan to its end, ``lines`` a step, as its turns do; the steps."""
    assert worker.plan is not None
    steps = 0
    while not worker.plan.step(worker.frontier, worker._owns, time.time(), lines):
        steps += 1
        assert steps < 100
    return steps + 1


def test_a_plan_queues_its_urls_by_change_rate_and_keeps_their_priors(tmp_path: Path) -> None:
    plan = tmp_path / "recrawl.jsonl"
    priors = a_plan(plan)
    worker = start(tmp_path, plan)
    try:
        assert not worker.idle  # a plan not read yet is work to do
        assert read(worker) == 3  # six lines, two a step
        assert worker.plan is not None and worker.plan.done
        stats = worker.stats()
        assert stats["recrawl/plan/queued"] == 4
        assert stats["recrawl/plan/malformed"] == 2
        assert stats["recrawl/plan/malformed/fields"] == 2
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
        assert read(again) == 1
        assert "recrawl/plan/queued" not in again.stats()
        assert len(queued(again)) == 4
    finally:
        again.close()


def test_a_restart_goes_on_reading_where_the_last_commit_left(tmp_path: Path) -> None:
    plan = tmp_path / "recrawl.jsonl"
    a_plan(plan)
    worker = start(tmp_path, plan)
    try:
        assert worker.plan is not None
        assert not worker.plan.step(worker.frontier, worker._owns, time.time(), 3)
        assert worker.stats()["recrawl/plan/queued"] == 2
    finally:
        worker.close()
    again = start(tmp_path, plan)
    try:
        read(again)
        stats = again.stats()
        assert stats["recrawl/plan/queued"] == 2 and stats["recrawl/plan/malformed"] == 1
        assert set(queued(again)) == {p.url for p in a_plan(tmp_path / "copy.jsonl")}
    finally:
        again.close()


def test_plain_order_queues_planned_urls_as_first_found(tmp_path: Path) -> None:
    plan = tmp_path / "recrawl.jsonl"
    a_plan(plan)
    worker = start(tmp_path, plan, order="plain")
    try:
        read(worker)
        levels = {url: level for url, (level, _) in queued(worker).items()}
        # The default prioritizer's: 1 + depth.
        assert levels["http://a.test/often"] == levels["http://a.test/once"] == 2
        assert levels["http://a.test/never"] == 3
    finally:
        worker.close()


def test_after_a_resize_every_worker_reads_the_plan_again_for_its_hosts(tmp_path: Path) -> None:
    """A plan read by two workers, then the hive shrunk to one: the one left queues, and
    keeps the priors of, the planned URLs of the hosts it took over (their priors were in
    the store the resize retired)."""
    plan = tmp_path / "recrawl.jsonl"
    urls = [f"http://h{i}.test/p" for i in range(12)]
    plan.write_bytes(b"".join(Prior(url).encode() + b"\n" for url in urls))
    data = tmp_path / "data"
    dd = DataDir(data)
    cfg = config.load(environ={}).replace(recrawl={"plan": str(plan)}, fetch={"threads": 1})
    two = Ring(2, cfg.hive.vnodes, cfg.hive.ring_seed)
    for i in (0, 1):
        worker = Worker(cfg, dd.worker(i), worker_id=i, ring=two, log_dir=tmp_path)
        try:
            read(worker)
            assert worker.plan is not None
            mine = [url for url in urls if two.owner(host_key(url)) == i]
            assert mine and all(worker.plan.load(url) == Prior(url) for url in mine)
        finally:
            worker.close()
    dd.update_state(ring=two.params, procs=2)
    resize(data, cfg, 1)
    one = Ring(1, cfg.hive.vnodes, cfg.hive.ring_seed)
    worker = Worker(cfg, dd.worker(0), worker_id=0, ring=one, log_dir=tmp_path)
    try:
        assert worker.plan is not None
        read(worker)
        assert [url for url in urls if worker.plan.load(url) != Prior(url)] == []
        assert worker.frontier.pending == len(urls)
    finally:
        worker.close()
