"""Damaged stores and state files: named and refused, never SIGBUS or a traceback.

Each case damages a real store the frontier committed (truncated, overwritten,
zeroed meta pages, flipped bytes, deleted) or the data directory's hive.json,
then runs the real command line in a process of its own, so a crash by signal
shows as a negative exit code.
"""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest

from hive import config
from hive.core.record import UrlRecord
from hive.core.wire import encode_records
from hive.errors import HiveError, StoreError
from hive.frontier.frontier import Frontier
from hive.frontier.verify import verify_data_dir
from hive.outcome import Outcome
from hive.storage.datadir import DataDir
from hive.storage.schema import U64
from hive.storage.store import Store, check_file
from tests.frontier.conftest import rec, small_config
from tests.frontier.test_verify import build

ROOT = Path(__file__).resolve().parents[2]


def data_dir(tmp_path: Path, procs: int = 1) -> Path:
    """A stopped hive's data directory: hive.json and ``procs`` stores with committed work."""
    data = tmp_path / "data"
    for i in range(procs):
        build(data / f"worker-{i:02d}")
    hive = config.load(environ={}).hive
    state = {"pid": None, "procs": procs,
             "ring": {"procs": procs, "vnodes": hive.vnodes, "seed": hive.ring_seed}}
    (data / "hive.json").write_text(json.dumps(state))
    return data


def hive(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def assert_refused(result: subprocess.CompletedProcess[str], *names: str) -> None:
    """Exit 1 (not a signal), a message naming each of ``names``, no traceback."""
    out = result.stdout + result.stderr
    assert result.returncode == 1, (result.returncode, out)
    assert "Traceback" not in out, out
    for name in names:
        assert name in out, out


def truncate(path: Path) -> None:
    size = path.stat().st_size
    assert size > 4 * 4096, "the store must span more pages than its two meta pages"
    os.truncate(path, size // 2)


def overwrite(path: Path) -> None:
    with path.open("r+b") as f:
        f.write(random.Random(1).randbytes(3 * 4096))


def zero_meta(path: Path) -> None:
    with path.open("r+b") as f:
        f.write(bytes(2 * 4096))


DAMAGE = {"truncated": truncate, "overwritten": overwrite, "zeroed meta pages": zero_meta}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_store_is_refused_before_it_is_mapped(tmp_path: Path, damage: str) -> None:
    data = data_dir(tmp_path)
    store = data / "worker-00"
    check_file(store)
    DAMAGE[damage](store / "data.mdb")
    with pytest.raises(StoreError, match="data.mdb is damaged"):
        check_file(store)
    with pytest.raises(StoreError, match="data.mdb is damaged"):
        Store(store)
    report = verify_data_dir(data)[0]
    assert not report.ok and "data.mdb is damaged" in report.summary()


@pytest.mark.slow
@pytest.mark.parametrize("damage", DAMAGE)
def test_verify_and_start_name_a_damaged_store(tmp_path: Path, damage: str) -> None:
    data = data_dir(tmp_path)
    DAMAGE[damage](data / "worker-00" / "data.mdb")
    assert_refused(hive("verify", "--data", str(data)), "worker-00/data.mdb is damaged")
    assert_refused(hive("start", "--data", str(data), "--quiet"),
                   "worker-00/data.mdb is damaged")


def newest_meta(path: Path) -> tuple[int, int, int]:
    """(offset of the newest meta page, its page size, its last page) in ``data.mdb``."""
    data = path.read_bytes()[:2 * 4096 + 256]
    metas = []
    for offset in (0, 4096):
        last, txnid = struct.unpack_from("<QQ", data, offset + 136)
        metas.append((txnid, offset, struct.unpack_from("<I", data, offset + 40)[0], last))
    _, offset, psize, last = max(metas)
    return offset, psize, last


def test_a_store_whose_last_pages_were_never_written_is_whole(tmp_path: Path) -> None:
    """LMDB counts in its last page the pages a transaction allocated and freed before its
    commit, and never writes them: a healthy file may end short of it. Its meta is made to
    say so (two pages more than the file holds); it is read whole, and opens."""
    data = data_dir(tmp_path)
    store = data / "worker-00"
    mdb = store / "data.mdb"
    offset, psize, last = newest_meta(mdb)
    os.truncate(mdb, (last + 1) * psize)  # as LMDB wrote it: every page it counts
    with mdb.open("r+b") as f:
        f.seek(offset + 136)
        f.write(struct.pack("<Q", last + 2))
    check_file(store)
    assert verify_data_dir(data)[0].ok


@pytest.mark.slow
def test_a_store_cut_short_is_refused_or_read_whole(tmp_path: Path) -> None:
    """Cut 1, 2, 4 and 8 pages short of what its meta counts (a cut page may be a free one,
    harmless): either the check refuses the store, or ``hive verify`` reads it whole and
    passes. Never a crash by signal; and a cut deep enough is refused."""
    data = data_dir(tmp_path)
    mdb = data / "worker-00" / "data.mdb"
    whole = mdb.read_bytes()
    _, psize, last = newest_meta(mdb)
    refused = []
    for pages in (1, 2, 4, 8):
        mdb.write_bytes(whole[:(last + 1 - pages) * psize])
        try:
            check_file(data / "worker-00")
        except StoreError as exc:
            assert "data.mdb is damaged: truncated" in str(exc)
            refused.append(pages)
            continue
        result = hive("verify", "--data", str(data))
        assert result.returncode == 0, (pages, result.returncode, result.stdout, result.stderr)
    assert 8 in refused, refused


def test_an_empty_data_file_is_damaged_not_a_new_store(tmp_path: Path) -> None:
    """LMDB takes an empty data.mdb for a new environment: every page would be fetched again."""
    store = tmp_path / "worker-00"
    store.mkdir()
    (store / "data.mdb").write_bytes(b"")
    with pytest.raises(StoreError, match="the file is empty"):
        check_file(store)


def test_a_fresh_directory_passes_the_check(tmp_path: Path) -> None:
    check_file(tmp_path / "nothing-here")
    store = Store(tmp_path / "new")
    store.close(0.0)
    check_file(tmp_path / "new")


@pytest.mark.slow
def test_flipped_bytes_in_the_data_pages_never_crash_verify(tmp_path: Path) -> None:
    """Damage past the meta pages passes the header check; what LMDB or the checks then
    meet is reported, never a signal or a traceback."""
    data = data_dir(tmp_path)
    path = data / "worker-00" / "data.mdb"
    rng = random.Random(7)
    with path.open("r+b") as f:
        size = path.stat().st_size
        for _ in range(20):
            f.seek(rng.randrange(2 * 4096, size))
            f.write(bytes([rng.randrange(256)]))
    result = hive("verify", "--data", str(data))
    assert result.returncode in (0, 1), result
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize("content", [b"", b"{not json", b"\xff\xfe garbage", b"[1, 2]"])
def test_a_garbage_state_file_is_named(tmp_path: Path, content: bytes) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "hive.json").write_bytes(content)
    with pytest.raises(HiveError, match="hive.json is damaged"):
        DataDir(data).read_state()


@pytest.mark.slow
def test_verify_and_start_name_a_garbage_state_file(tmp_path: Path) -> None:
    data = data_dir(tmp_path)
    (data / "hive.json").write_bytes(b"\x00\x01 garbage")
    for args in (("verify",), ("start", "--quiet"), ("status",)):
        assert_refused(hive(*args, "--data", str(data)), "hive.json is damaged")


@pytest.mark.slow
def test_a_missing_store_that_hive_json_names_is_reported_and_stops_start(
    tmp_path: Path,
) -> None:
    data = data_dir(tmp_path, procs=2)
    for name in os.listdir(data / "worker-01"):
        os.unlink(data / "worker-01" / name)
    reports = verify_data_dir(data, procs=2)
    assert reports[0].ok and not reports[1].ok
    assert "the store of worker 1 is missing" in reports[1].summary()
    assert_refused(hive("verify", "--data", str(data)), "the store of worker 1 is missing")
    assert_refused(hive("start", "--data", str(data), "--quiet", "--procs", "2"),
                   "the store of worker 1 is missing", "--recreate-missing")
    assert not (data / "worker-01" / "data.mdb").exists(), "refusing must not create it"


@pytest.mark.slow
def test_verify_lists_quarantined_batches_and_replays_those_that_decode(tmp_path: Path) -> None:
    data = data_dir(tmp_path)
    store = Store(data / "worker-00", sync_interval=0.0)
    good = encode_records([UrlRecord("http://a.test/x", "a.test", 1)])
    store.put("quarantine", U64.pack(10**6), b"unacknowledged after 8 sends\0" + good)
    store.close(0.0)
    before = hive("verify", "--data", str(data))
    assert before.returncode == 1
    assert "quarantine 1000000: a batch of" in before.stdout, before.stdout
    after = hive("verify", "--replay-quarantine", "--data", str(data))
    assert "1 quarantined batches back in the outbox" in after.stdout, after.stdout
    assert after.returncode == 0, after.stdout + after.stderr
    store = Store(data / "worker-00", sync_interval=0.0)
    assert store.get("outbox", U64.pack(10**6)) == good
    store.close(0.0)


def crawl_all(frontier: Frontier, start: float = 0.0) -> list[str]:
    """Lease and finish every URL the frontier will give, as a crawl would; the URLs."""
    fetched, now = [], start
    for _ in range(200):
        ready = frontier.pop_ready(now)
        if ready.lease is not None:
            fetched.append(ready.lease.record.url)
            frontier.done(ready.lease, Outcome("ok", 200), now, now + 0.01)
        elif ready.wake_at is None:
            break
        else:
            now = max(now + 0.01, ready.wake_at)
        frontier.commit(now)
    return fetched


@pytest.mark.parametrize("where", ["front", "back"])
def test_a_queued_record_that_does_not_decode_is_set_aside_and_its_host_goes_on(
    tmp_path: Path, where: str
) -> None:
    """Flipped bytes in a queued record once failed every turn with UnicodeDecodeError and
    left its host unserved forever: the batch never ended."""
    cfg = small_config(robots={"enabled": False})
    path = tmp_path / "worker-00"
    frontier = Frontier.from_config(path, cfg)
    urls = [f"http://a.test/{i}" for i in range(4)] + ["http://b.test/0"]
    frontier.admit([rec(url) for url in urls], 0.0)
    if where == "back":
        frontier.pop_ready(0.0)  # draws the URLs into their hosts' back queues
    frontier.close(0.0)
    store = Store(path)
    key, value = next(iter(store.cursor(where).iternext()))
    damaged_url = UrlRecord.decode(bytes(value)).url
    store.put(where, bytes(key), b"\xff" * 40)
    store.close(0.0)
    frontier = Frontier.from_config(path, cfg)
    fetched = crawl_all(frontier, 1.0)
    assert frontier.counts["frontier/damaged"] == 1
    assert sorted(fetched) == sorted(u for u in urls if u != damaged_url)
    assert frontier.pending == 0
    frontier.close(2.0)
    report = verify_data_dir(tmp_path)[0]
    assert f"damaged: a {where} record" in report.summary(), report.summary()


def test_a_store_from_before_the_damaged_database_still_verifies(tmp_path: Path) -> None:
    """A crawl stopped by an earlier hive has no ``damaged`` database until a worker opens it."""
    build(tmp_path / "worker-00")
    env = lmdb.open(str(tmp_path / "worker-00"), max_dbs=20)
    with env.begin(write=True) as txn:
        txn.drop(env.open_db(b"damaged", txn=txn), delete=True)
    env.close()
    report = verify_data_dir(tmp_path)[0]
    assert report.ok, report.summary()
