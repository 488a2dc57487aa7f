"""Seeding a worker's payload index from a prior crawl's CDXJ (``--dedup-from``,
hive.procs.dedup): a batch of lines a turn of the real worker's loop, which reports and
leases nothing meanwhile, on from the committed place after a kill -9, and again from its
start after a resize."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hive import config
from hive.config import Config
from hive.core.ring import Ring
from hive.fetch.revisits import decode
from hive.procs.dedup import SEED_BATCH
from hive.procs.resize import resize
from hive.procs.worker import Worker
from hive.storage.datadir import DataDir

pytestmark = pytest.mark.slow

LINES = 2 * SEED_BATCH + 321
MALFORMED = (17, SEED_BATCH + 5)  # line numbers


def a_prior_index(path: Path) -> dict[bytes, str]:
    """A CDXJ of LINES lines, two of them malformed; the digest -> URL of the others."""
    entries, lines = {}, []
    for n in range(1, LINES + 1):
        if n in MALFORMED:
            lines.append(f"not a cdxj line {n}\n")
            continue
        sha1 = n.to_bytes(20, "big")
        url = f"http://h{n % 50}.test/p/{n}"
        entries[sha1] = url
        digest = base64.b32encode(sha1).decode()
        lines.append(f'x 20260101000000 {{"url": "{url}", "digest": "sha1:{digest}"}}\n')
    path.write_text("".join(lines))
    return entries


def cfg_for(index: Path) -> Config:
    return config.load(environ={}).replace(warc={"dedup_from": str(index)},
                                           fetch={"threads": 1})


def open_worker(tmp_path: Path, index: Path) -> Worker:
    return Worker(cfg_for(index), tmp_path / "store", warc_dir=tmp_path / "warc",
                  log_dir=tmp_path)


def held(worker: Worker) -> dict[bytes, str]:
    out = {}
    for key in worker.frontier.store.keys("payloads"):
        value = worker.frontier.store.get("payloads", key)
        assert value is not None
        original = decode(value)
        assert original is not None
        out[key] = original.uri
    return out


def seed_to_end(worker: Worker) -> int:
    """Turn the worker's loop until the seeding is done; the turns."""
    assert worker.seeding is not None
    turns = 0
    while not worker.seeding.done:
        worker.loop_once(time.time())
        turns += 1
        assert turns <= LINES // SEED_BATCH + 2
    return turns


def test_a_large_index_is_seeded_a_batch_a_turn_while_the_worker_reports(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    index = tmp_path / "prior.cdxj"
    entries = a_prior_index(index)
    worker = open_worker(tmp_path, index)
    try:
        worker.add(["http://h1.test/"], time.time())
        assert held(worker) == {}, "nothing is read before the worker's loop turns"
        worker.loop_once(time.time())
        stats = worker.stats()
        assert stats["revisits/seeded"] == SEED_BATCH - 1  # line 17 is malformed
        assert stats["revisits/seed/malformed/fields"] == 1
        assert len(held(worker)) == SEED_BATCH - 1
        # Nothing is leased while the index is being read: a page fetched before its
        # prior capture's line would be archived whole.
        assert worker.in_flight == 0 and worker.frontier.pending == 1 and not worker.idle
        worker.stopping = True  # h1.test is not to be fetched
        turns = 1 + seed_to_end(worker)
        assert turns == LINES // SEED_BATCH + 1
        stats = worker.stats()
        assert stats["revisits/seeded"] == len(entries)
        assert stats["revisits/seed/malformed"] == len(MALFORMED)
        assert held(worker) == entries
        assert f"{index}:17: line skipped, malformed/fields" in caplog.text
        assert f"{index}:{SEED_BATCH + 5}: line skipped, malformed/fields" in caplog.text
    finally:
        worker.close()
    again = open_worker(tmp_path, index)
    try:
        again.loop_once(time.time())
        assert again.stats().get("revisits/seeded", 0) == 0, "read whole once, not again"
    finally:
        again.close()


KILLED_AFTER_TWO_TURNS = """
import os, signal, sys, time
from pathlib import Path
from hive.procs.worker import Worker
from hive.storage.datadir import DataDir
from tests.io.test_dedup_seeding import cfg_for
tmp = Path(sys.argv[1])
worker = Worker(cfg_for(tmp / "prior.cdxj"), tmp / "store", warc_dir=tmp / "warc",
                log_dir=tmp)
worker.loop_once(time.time())
worker.loop_once(time.time())
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_worker_killed_mid_seeding_goes_on_from_the_committed_place(tmp_path: Path) -> None:
    index = tmp_path / "prior.cdxj"
    entries = a_prior_index(index)
    done = subprocess.run([sys.executable, "-c", KILLED_AFTER_TWO_TURNS, str(tmp_path)],
                          env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)},
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    worker = open_worker(tmp_path, index)
    try:
        committed = held(worker)
        assert len(committed) == 2 * SEED_BATCH - len(MALFORMED)
        seed_to_end(worker)
        stats = worker.stats()
        # Only the lines after the committed place are read again.
        assert stats["revisits/seeded"] == len(entries) - len(committed)
        assert stats.get("revisits/seed/malformed", 0) == 0
        assert held(worker) == entries
    finally:
        worker.close()


def test_after_a_resize_every_worker_reads_the_index_again_for_its_hosts(tmp_path: Path) -> None:
    """Worker 0 read the index whole, worker 1 one batch of it, and the hive shrunk to one:
    the one left holds every entry, those of the lines worker 1 had not read included."""
    index = tmp_path / "prior.cdxj"
    entries = a_prior_index(index)
    data = tmp_path / "data"
    dd = DataDir(data)
    cfg = cfg_for(index)
    two = Ring(2, cfg.hive.vnodes, cfg.hive.ring_seed)
    for i in (0, 1):
        worker = Worker(cfg, dd.worker(i), worker_id=i, ring=two, log_dir=tmp_path)
        try:
            if i == 0:
                seed_to_end(worker)
            else:
                worker.loop_once(time.time())
        finally:
            worker.close()
    dd.update_state(ring=two.params, procs=2)
    resize(data, cfg, 1)
    one = Ring(1, cfg.hive.vnodes, cfg.hive.ring_seed)
    worker = Worker(cfg, dd.worker(0), worker_id=0, ring=one, log_dir=tmp_path)
    try:
        seed_to_end(worker)
        assert held(worker) == entries
    finally:
        worker.close()
