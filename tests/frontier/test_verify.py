"""hive.frontier.verify on real stores: what the frontier commits passes, corruption is named."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lmdb
import pytest

from hive.core.lease import Lease, LeaseKind
from hive.core.record import UrlRecord
from hive.core.urls import fingerprint, host_hash
from hive.errors import StoreError
from hive.frontier.frontier import Frontier
from hive.frontier.hosts import HostState
from hive.frontier.verify import Report, verify_data_dir, verify_store
from hive.outcome import Outcome
from hive.storage.schema import (
    DB_NAMES,
    HOST_LEVEL_SEQ,
    PENDING,
    U64,
    back_key,
    front_key,
    parked_key,
    url_key,
)
from hive.storage.schema import pending as schema_pending
from tests.frontier.conftest import Opener, rec, small_config

OK = Outcome("ok", 200)
ROBOTS_OK = Outcome("robots_ok", 200, robots_until=1e9)
SLOW = Outcome("http_503", 503, retry_after=100.0)
CFG = small_config(frontier={"max_bound_hosts": 4, "map_size_mb": 2})
STALLED = "h3.test"


def build(path: Path, *, crash: bool = False) -> None:
    """Ten hosts through a dozen turns: some URLs done, some in front, some in back, one
    host parked (a long Retry-After), one refused (depth), duplicates; it ends with leases
    outstanding (pages, and the robots.txt of STALLED, never answered)."""
    o = Opener(path, CFG)
    f = o.open()
    urls = [rec(f"http://h{i}.test/{j}") for j in range(6) for i in range(10)]
    f.admit([*urls, rec("http://h0.test/deep", depth=99)], 0.0)
    f.admit(urls[:5], 0.0)
    now = 0.0
    for _ in range(12):
        leases = drain(f, now)
        for lease in leases:
            if lease.record.host_key == STALLED:
                continue
            slow = lease.record.host_key == "h1.test"
            outcome = ROBOTS_OK if lease.kind == LeaseKind.ROBOTS else SLOW if slow else OK
            f.done(lease, outcome, now, now + 0.05)
        f.commit(now)
        now += 1.1
    drain(f, now)
    if crash:
        f.store.abandon()
    else:
        f.close(now)


def drain(f: Frontier, now: float) -> list[Lease]:
    leases = []
    while (lease := f.pop_ready(now).lease) is not None:
        leases.append(lease)
    f.commit(now)
    return leases


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pristine") / "store"
    build(path)
    return path


@pytest.fixture
def store(pristine: Path, tmp_path: Path) -> Path:
    path = tmp_path / "store"
    shutil.copytree(pristine, path)
    return path


class Tamper:
    """A write transaction on a closed store, for making corruptions on purpose."""

    def __init__(self, txn: Any, db: dict[str, Any]) -> None:
        self.txn, self.db = txn, db

    def items(self, name: str) -> list[tuple[bytes, bytes]]:
        return list(self.txn.cursor(self.db[name]).iternext())

    def get(self, name: str, key: bytes) -> bytes | None:
        value: bytes | None = self.txn.get(key, db=self.db[name])
        return value

    def put(self, name: str, key: bytes, value: bytes) -> None:
        self.txn.put(key, value, db=self.db[name])

    def delete(self, name: str, key: bytes) -> None:
        assert self.txn.delete(key, db=self.db[name])

    def host(self, host_key: str) -> HostState:
        data = self.get("hosts", U64.pack(host_hash(host_key)))
        assert data is not None
        return HostState.decode(data)

    def put_host(self, state: HostState) -> None:
        self.put("hosts", U64.pack(host_hash(state.host_key)), state.encode())

    def back_hosts(self) -> list[str]:
        """Host keys with back entries, not leased."""
        leased = {k for k, _ in self.items("leases")}
        keys = {UrlRecord.decode(v).host_key for k, v in self.items("back") if k[:8] not in leased}
        return sorted(keys)


@contextmanager
def tamper(path: Path) -> Iterator[Tamper]:
    env = lmdb.open(str(path), max_dbs=len(DB_NAMES) + 2)
    try:
        db = {name: env.open_db(name.encode()) for name in DB_NAMES}
        with env.begin(write=True) as txn:
            yield Tamper(txn, db)
    finally:
        env.close()


def ukey(record: UrlRecord) -> bytes:
    return url_key(host_hash(record.host_key), fingerprint(record.url))


def assert_reported(report: Report, *fragments: str) -> None:
    """Some single problem message contains every fragment."""
    assert any(all(f in p for f in fragments) for p in report.problems), (
        fragments, report.summary()
    )


# -- what the frontier commits passes --------------------------------------------------


def test_clean_store_passes_and_is_counted(pristine: Path) -> None:
    before = hashlib.sha256((pristine / "data.mdb").read_bytes()).hexdigest()
    report = verify_store(pristine)
    assert report.ok, report.summary()
    c = report.counts
    assert c["urls"] == 61 and c["urls/refused"] == 1
    assert c["urls/pending"] == c["front"] + c["back"] > 0
    assert c["urls/done"] > 0 and c["parked"] >= 1 and c["bound"] >= 1 and c["leases"] >= 2
    assert c["hosts"] == 10 and c["outbox"] == 0
    assert report.summary().endswith(")") and ": ok (" in report.summary()
    after = hashlib.sha256((pristine / "data.mdb").read_bytes()).hexdigest()
    assert before == after, "verify wrote to the store"


def test_crash_with_leases_outstanding_passes_before_and_after_recovery(tmp_path: Path) -> None:
    path = tmp_path / "store"
    build(path, crash=True)
    report = verify_store(path)
    assert report.ok, report.summary()
    with tamper(path) as t:
        leases = t.items("leases")
    assert b"" in {v for _, v in leases}, "a robots lease is outstanding"
    assert any(v for _, v in leases), "a page lease is outstanding"
    o = Opener(path, CFG)
    o.open(now=50.0).close(50.0)
    report = verify_store(path)
    assert report.ok, report.summary()
    assert report.counts["leases"] == 0 and report.counts["bound"] == 0


@pytest.mark.parametrize("seed", range(6))
def test_random_runs_pass_after_every_close_and_crash(tmp_path: Path, seed: int) -> None:
    """Random admits, leases, outcomes (retries, robots failures), blocks, crashes."""
    rng = random.Random(seed)
    cfg = small_config(
        frontier={
            "max_bound_hosts": 3, "park_horizon": 3.0, "max_retries": 1,
            "max_urls_per_host": 25, "max_depth": 3,
        },
        fetch={"threads": 1},
    )
    o = Opener(tmp_path / "store", cfg)
    f = o.open(seed=seed)
    now = 0.0
    kinds = ["ok", "ok", "http_404", "timeout", "http_429", "http_503"]
    for session in range(4):
        leased: list[Lease] = []
        for _ in range(60):
            step = rng.random()
            if step < 0.3:
                f.admit(
                    [rec(f"http://r{rng.randrange(8)}.test/{rng.randrange(40)}",
                         depth=rng.randrange(5)) for _ in range(rng.randrange(1, 8))],
                    now,
                )
            elif step < 0.6:
                lease = f.pop_ready(now).lease
                if lease is not None:
                    leased.append(lease)
            elif step < 0.85 and leased:
                f.commit(now)
                lease = leased.pop(rng.randrange(len(leased)))
                if lease.kind == LeaseKind.ROBOTS:
                    kind = rng.choice(["robots_ok"] * 8 + ["robots_retry", "robots_unreachable"])
                    outcome = Outcome(kind, robots_until=1e9)
                else:
                    kind = rng.choice(kinds)
                    outcome = Outcome(kind, retry_after=5.0 if kind == "http_503" else None)
                f.done(lease, outcome, now, now + 0.05)
            elif step < 0.86:
                f.block(f"r{rng.randrange(2)}.test", "denied", now)
            else:
                f.commit(now)
            now += rng.uniform(0.0, 1.5)
        f.commit(now)
        if session % 2:
            f.store.abandon()
        else:
            f.close(now)
        report = verify_store(o.path)
        assert report.ok, (session, report.summary())
        now += 1.0
        f = o.open(now=now, seed=seed)
    f.close(now)
    report = verify_store(o.path)
    assert report.ok, report.summary()


# -- each corruption is reported, naming the URL, host or key ------------------------------


def test_a_pending_url_missing_from_back(store: Path) -> None:
    with tamper(store) as t:
        host = t.back_hosts()[0]
        key, value = next((k, v) for k, v in t.items("back") if k[:8] == U64.pack(host_hash(host)))
        t.delete("back", key)
    report = verify_store(store)
    assert_reported(report, ukey(UrlRecord.decode(value)).hex(), host, "in no queue")
    assert_reported(report, f"host {host}: queued is")
    assert_reported(report, "meta back_queued")


def test_a_stray_front_entry(store: Path) -> None:
    with tamper(store) as t:
        t.put("front", front_key(1, 10**6), rec("http://stray.test/x").encode())
    report = verify_store(store)
    assert_reported(report, "front 1/1000000", "http://stray.test/x", "not in urls")
    assert_reported(report, "meta seq", "1000000")


def test_a_done_state_for_a_queued_url(store: Path) -> None:
    """A done URL's queued entry is superseded (a stronger discovery queued another, which
    was fetched: hive.frontier.seen), so it is counted; the counters tell the damage."""
    with tamper(store) as t:
        key, value = t.items("front")[0]
        record = UrlRecord.decode(value)
        t.put("urls", ukey(record), b"dok")
    report = verify_store(store)
    assert report.counts["superseded"] == 1
    assert_reported(report, "meta frontier/done/ok")
    assert not any("no queue" in p for p in report.problems)


def test_a_url_not_in_urls_yet_queued(store: Path) -> None:
    with tamper(store) as t:
        key, value = t.items("front")[0]
        record = UrlRecord.decode(value)
        t.delete("urls", ukey(record))
    report = verify_store(store)
    assert_reported(report, record.url, "not in urls, yet queued")


def test_a_url_in_two_queues(store: Path) -> None:
    """A copy at the level and seq its state names is a second live entry (a move that
    put the entry at its new place without deleting the old one would leave one)."""
    with tamper(store) as t:
        key, value = t.items("back")[0]
        _, level, seq = HOST_LEVEL_SEQ.unpack(key)
        t.put("front", front_key(level, seq), value)
    report = verify_store(store)
    assert_reported(report, UrlRecord.decode(value).url, "in 2 queues",
                    f"front {level}/{seq}", "back ")


def test_a_copy_at_another_place_is_superseded_not_live(store: Path) -> None:
    """An entry at a level and seq the URL's state does not name is not its live one."""
    with tamper(store) as t:
        _, value = t.items("back")[0]
        t.put("front", front_key(8, 0), value)
    report = verify_store(store)
    assert report.ok, report.summary()
    assert report.counts["superseded"] == 1


def test_a_wrong_queued_count(store: Path) -> None:
    with tamper(store) as t:
        state = t.host(t.back_hosts()[0])
        state.queued += 3
        t.put_host(state)
    report = verify_store(store)
    assert_reported(report, f"host {state.host_key}: queued is {state.queued}")


def test_a_parked_entry_for_a_host_with_nothing_queued(store: Path) -> None:
    with tamper(store) as t:
        queued = {k[:8] for k, _ in t.items("back")}
        idle = next(HostState.decode(v) for k, v in t.items("hosts") if k not in queued)
        t.put("parked", parked_key(5.0, host_hash(idle.host_key)), b"")
    report = verify_store(store)
    assert_reported(report, "parked 5.0|", idle.host_key, "nothing queued")
    assert_reported(report, "parked 5.0|", idle.host_key, "parked_at -1.0")


def test_a_parked_host_without_its_entry(store: Path) -> None:
    with tamper(store) as t:
        key, _ = t.items("parked")[0]
        t.delete("parked", key)
        name = HostState.decode(t.get("hosts", key[8:]) or b"").host_key
    report = verify_store(store)
    assert_reported(report, f"host {name}: parked at", "no parked entry")


def test_a_host_bound_and_parked(store: Path) -> None:
    with tamper(store) as t:
        key, _ = t.items("parked")[0]
        t.put("bound", key[8:], b"")
        name = HostState.decode(t.get("hosts", key[8:]) or b"").host_key
    report = verify_store(store)
    assert_reported(report, f"host {name} is both bound and parked")


def test_a_queued_host_neither_bound_nor_parked(store: Path) -> None:
    with tamper(store) as t:
        key, _ = t.items("bound")[0]
        name = HostState.decode(t.get("hosts", key) or b"").host_key
        t.delete("bound", key)
        t.delete("leases", key)
    report = verify_store(store)
    assert_reported(report, f"host {name} has", "neither bound nor parked")


@pytest.mark.parametrize("db", ["front", "back"])
def test_garbage_bytes_in_a_record(store: Path, db: str) -> None:
    with tamper(store) as t:
        key, _ = t.items(db)[0]
        t.put(db, key, b"\xff\xfe\x00garbage")
    report = verify_store(store)
    where = f"{db} {key[0]}/" if db == "front" else f"back {key[:8].hex()}/"
    assert_reported(report, where, "undecodable record", "garbage")


def test_garbage_host_state_and_url_state(store: Path) -> None:
    with tamper(store) as t:
        key, _ = t.items("hosts")[0]
        t.put("hosts", key, b"junk")
        url, _ = t.items("urls")[0]
        t.put("urls", url, b"x")
    report = verify_store(store)
    assert_reported(report, f"hosts {key.hex()}", "undecodable state")
    assert_reported(report, f"urls {url.hex()}", "invalid state")


def test_a_host_state_under_another_hosts_key(store: Path) -> None:
    with tamper(store) as t:
        key, _ = t.items("hosts")[0]
        t.put("hosts", key, HostState("impostor.test").encode())
    report = verify_store(store)
    assert_reported(report, f"hosts {key.hex()}: state of impostor.test")


def test_malformed_keys(store: Path) -> None:
    with tamper(store) as t:
        t.put("urls", b"abc", PENDING)
        t.put("front", b"\x00" + U64.pack(5), rec("http://h0.test/0").encode())
        t.put("back", b"short", b"")
        t.put("bound", U64.pack(1), b"x")
        t.put("parked", b"p", b"")
        t.put("leases", b"l", b"")
        t.put("outbox", b"o", b"")
    report = verify_store(store)
    assert_reported(report, "urls key 616263 is not 16 bytes")
    assert_reported(report, f"front key 00{U64.pack(5).hex()} is not level")
    assert_reported(report, f"back key {b'short'.hex()} is not host hash")
    assert_reported(report, f"bound entry {U64.pack(1).hex()}=b'x'")
    assert_reported(report, "parked entry 70=b''")
    assert_reported(report, "leases key 6c is not 8 bytes")
    assert_reported(report, "outbox key 6f is not 8 bytes")


def test_missing_databases(tmp_path: Path) -> None:
    env = lmdb.open(str(tmp_path), max_dbs=4)
    env.open_db(b"urls")
    env.close()
    report = verify_store(tmp_path)
    assert_reported(report, "database front is missing")
    assert_reported(report, "database meta is missing")
    assert report.counts["urls"] == 0


def test_a_record_queued_under_another_host(store: Path) -> None:
    with tamper(store) as t:
        key, value = t.items("back")[0]
        stranger = rec("http://elsewhere.test/1")
        t.put("urls", ukey(stranger), PENDING)
        t.put("back", key, stranger.encode())
    report = verify_store(store)
    assert_reported(report, "http://elsewhere.test/1", "elsewhere.test", "under another host")


def test_a_lease_pointing_nowhere(store: Path) -> None:
    with tamper(store) as t:
        key, _ = next((k, v) for k, v in t.items("leases") if v)
        t.put("leases", key, back_key(U64.unpack(key)[0], 1, 999_999))
        name = HostState.decode(t.get("hosts", key) or b"").host_key
    report = verify_store(store)
    assert_reported(report, f"lease of host {name}", "/1/999999", "not there")


def test_a_lease_of_an_unbound_host_and_of_another_hosts_key(store: Path) -> None:
    with tamper(store) as t:
        bound = {k for k, _ in t.items("bound")}
        idle = next(k for k, _ in t.items("hosts") if k not in bound)
        other = next(k for k, _ in t.items("back") if k[:8] != idle)
        t.put("leases", idle, other)
        name = HostState.decode(t.get("hosts", idle) or b"").host_key
    report = verify_store(store)
    assert_reported(report, f"lease of host {name}: the host is not bound")
    assert_reported(report, f"lease of host {name} names {other.hex()}, not a back key")


def test_a_wrong_owner(store: Path) -> None:
    with tamper(store) as t:
        host = t.back_hosts()[0]
    report = verify_store(store, worker_id=0, owner=lambda hk: 1 if hk == host else 0)
    assert [p for p in report.problems] == [
        f"host {host} has pending URLs here (worker 0) but is owned by worker 1"
    ]
    assert verify_store(store, worker_id=0, owner=lambda hk: 0).ok
    with pytest.raises(ValueError, match="worker_id"):
        verify_store(store, owner=lambda hk: 0)


def test_meta_counters_and_state(store: Path) -> None:
    with tamper(store) as t:
        state = json.loads(t.get("meta", b"state") or b"")
        state["back_queued"] += 1
        state["counts"]["frontier/admitted"] += 2
        state["counts"]["frontier/refused/max_depth"] = 0
        t.put("meta", b"state", json.dumps(state).encode())
    report = verify_store(store)
    assert_reported(report, "meta back_queued is")
    assert_reported(report, "meta frontier/admitted is")
    assert_reported(report, "meta frontier/refused/max_depth is 0 but 1 URLs")
    with tamper(store) as t:
        t.put("meta", b"state", b"{not json")
    assert_reported(verify_store(store), "meta state is not JSON")


def test_a_store_that_never_held_a_host_passes(tmp_path: Path) -> None:
    """A worker that owns no host never commits a meta state: that is a healthy store."""
    o = Opener(tmp_path / "store", CFG)
    o.open().close(0.0)
    report = verify_store(o.path, worker_id=1, owner=lambda hk: 0)
    assert report.ok, report.summary()
    assert report.counts["urls"] == 0


def test_no_meta_state_in_a_store_that_holds_urls(store: Path) -> None:
    with tamper(store) as t:
        t.delete("meta", b"state")
    assert_reported(verify_store(store), "meta has no state, yet the store holds", "urls/done")


def test_outbox_batches(store: Path) -> None:
    records = [rec("http://x.test/1"), rec("http://y.test/2", depth=3)]
    batch = len(records).to_bytes(4, "big") + b"".join(
        len(data).to_bytes(4, "big") + data for data in (r.encode() for r in records)
    )
    with tamper(store) as t:
        t.put("outbox", U64.pack(1), batch)
    report = verify_store(store)
    assert report.ok, report.summary()
    assert report.counts["outbox"] == 1 and report.counts["outbox/records"] == 2
    with tamper(store) as t:
        t.put("outbox", U64.pack(2), batch[:-3])
        t.put("outbox", U64.pack(3), batch + b"!")
        t.put("outbox", U64.pack(4), b"\x00")
    report = verify_store(store)
    assert_reported(report, "outbox 2: undecodable batch", "truncated")
    assert_reported(report, "outbox 3: undecodable batch", "1 bytes after 2 records")
    assert_reported(report, "outbox 4: undecodable batch")


def test_problems_beyond_the_limit_are_counted(store: Path) -> None:
    with tamper(store) as t:
        for key, _ in t.items("front"):
            t.delete("front", key)
    report = verify_store(store, limit=3)
    assert len(report.problems) == 3 and report.omitted > 0 and not report.ok
    assert report.summary().splitlines()[-1] == f"  ... and {report.omitted} more"
    assert f"{3 + report.omitted} problems" in report.summary().splitlines()[0]


def test_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open"):
        verify_store(tmp_path / "nowhere")


# -- a data directory -------------------------------------------------------------------


def test_data_dir_reports_hosts_in_two_workers_and_the_ring(pristine: Path, tmp_path: Path) -> None:
    for name in ("worker-00", "worker-01"):
        shutil.copytree(pristine, tmp_path / name)
    (tmp_path / "worker-02").mkdir()
    (tmp_path / "warc").mkdir()
    reports = verify_data_dir(tmp_path)
    assert sorted(reports) == [0, 1, 2]
    assert reports[0].ok, reports[0].summary()
    assert_reported(reports[1], "host h1.test has pending URLs in worker-00 too")
    assert_reported(reports[2], "cannot open store")
    reports = verify_data_dir(tmp_path, lambda hk: 0)
    assert reports[0].ok
    assert_reported(reports[1], "host h1.test has pending URLs here (worker 1)", "worker 0")


def test_many_hosts_in_front_and_back_pass(tmp_path: Path) -> None:
    o = Opener(tmp_path / "store", small_config(frontier={"max_bound_hosts": 50}))
    f = o.open()
    f.admit([rec(f"http://s{i % 300}.test/{i}") for i in range(6000)], 0.0)
    drain(f, 0.0)
    f.close(0.0)
    report = verify_store(o.path)
    assert report.ok, report.summary()
    assert report.counts["urls/pending"] == 6000
    assert report.counts["back"] > 0 and report.counts["front"] > 0


def test_a_placed_state_without_its_base_level(store: Path) -> None:
    with tamper(store) as t:
        key, state = next((k, v) for k, v in t.items("urls") if v[:1] == PENDING)
        placed = schema_pending(state)
        assert placed is not None and placed.level
        t.put("urls", key, placed._replace(base=0).encode())
    assert_reported(verify_store(store), key.hex(), "no prioritizer's level")
