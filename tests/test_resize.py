"""Resizing a data directory (hive/procs/resize.py): real stores built by the Frontier, end to end.

Every move is checked against what the stores held before it: each host in exactly
one store, its owner's (hive verify with the new ring); every URL state kept, every
queued URL queued exactly once; next-allowed times kept (a leased host waits its
full delay from the move); robots entries and outbox batches carried along; the
share of hosts moved what the ring predicts; payload-index entries follow the host of
the URI they name. Crashes — an exception at a commit, and
real kills -9 inside and between the transactions — are followed by the move again.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import lmdb
import pytest

from hive.core.lease import Lease, LeaseKind
from hive.core.record import UrlRecord
from hive.core.ring import Ring
from hive.core.urls import fingerprint, host_hash, host_key
from hive.core.wire import decode_records
from hive.fetch.revisits import decode as decode_payload
from hive.fetch.revisits import encode as encode_payload
from hive.fetch.warc import Original
from hive.frontier.frontier import Frontier
from hive.frontier.hosts import HostState
from hive.frontier.verify import verify_data_dir
from hive.outcome import Outcome
from hive.procs.lifecycle import ExitCode
from hive.procs.outbox import Outbox
from hive.procs.resize import Move, batches, resize, resize_if_changed
from hive.storage.datadir import DataDir
from hive.storage.schema import DB_NAMES, url_key
from hive.storage.schema import pending as placed
from hive.testweb import Web, WebProcess
from tests.conftest import WEB_ADDRESS, wait_for
from tests.frontier.conftest import rec, small_config
from tests.test_hive import Hive, check_crawl, finish

CFG = small_config(frontier={"min_bound_hosts": 24, "max_bound_hosts": 24},
                   priority={"inlink_levels": 1.0})  # risen URLs move with their hosts
HOSTS, PAGES, ORPHANS = 300, 4, 12
NOW = 1000.0
ROOT = Path(__file__).resolve().parents[1]
KILLER = """
import os, signal, sys
from pathlib import Path
import hive.procs.resize as mover
from tests.test_resize import CFG, NOW
point, count = sys.argv[2], int(sys.argv[3])
seen = 0

def die(reached):
    global seen
    seen += reached == point
    if seen == count:
        os.kill(os.getpid(), signal.SIGKILL)

def inside(step):
    def written_not_committed(txn, *args):
        result = step(txn, *args)
        die(step.__name__)
        return result
    return written_not_committed

mover.copy_hosts = inside(mover.copy_hosts)
mover.delete_hosts = inside(mover.delete_hosts)
mover.resize(Path(sys.argv[1]), CFG, 5, now=NOW, checkpoint=die)
"""
OK = Outcome("ok", 200)
ROBOTS_OK = Outcome("robots_ok", 200, robots_until=1e9)
SLOW = Outcome("http_503", 503, retry_after=300.0)
BROKEN = Outcome("http_500", 500)


def payload_entry(h: int) -> tuple[bytes, bytes]:
    """An entry archived on host h: its own page, or (one in seven) one of host h + 1's,
    which a worker holding both hosts could archive as a repeat of a cross-host copy."""
    target = h + 1 if h % 7 == 1 else h
    original = Original(f"http://h{target}.test/0", "2026-12-01T00:00:00Z", f"<urn:{h}>")
    return hashlib.sha1(str(h).encode()).digest(), encode_payload(original)


PAYLOADS = [payload_entry(h) for h in range(0, HOSTS, 2)]
ARCHIVED_ON = {key: f"h{h}.test" for key, h in zip(
    (key for key, _ in PAYLOADS), range(0, HOSTS, 2), strict=True)}
UNDECODABLE = b"not a digest"


def payload_host(key: bytes) -> str:
    return ARCHIVED_ON[key]


def ring(procs: int) -> Ring:
    return Ring(procs, CFG.hive.vnodes, CFG.hive.ring_seed)


def drain(f: Frontier, now: float) -> list[Lease]:
    leases = []
    while (lease := f.pop_ready(now).lease) is not None:
        leases.append(lease)
    f.commit(now)
    return leases


def build(data: Path, procs: int) -> None:
    """HOSTS hosts x PAGES URLs admitted to their owners under the ring of ``procs``, then
    four turns crawled: URLs done, queued in back and in front, waiting for a retry (pages
    answering 500); hosts bound, parked (a long Retry-After) and, at the end, leased;
    refusals with no host record; robots entries; outbox batches. Each store is then
    abandoned after its last commit (kill -9)."""
    owners = ring(procs)
    by_owner: dict[int, list[UrlRecord]] = {i: [] for i in range(procs)}
    for page in range(PAGES):
        for h in range(HOSTS):
            record = rec(f"http://h{h}.test/{page}")
            by_owner[owners.owner(record.host_key)].append(record)
    for k in range(ORPHANS):
        record = rec(f"http://orphan{k}.test/", depth=99)
        by_owner[owners.owner(record.host_key)].append(record)
    for i, records in by_owner.items():
        f = Frontier.from_config(data / f"worker-{i:02d}", CFG, rng=random.Random(i))
        f.admit(records, 0.0)
        # In-link evidence: the last pages of each host linked from eight other hosts, so
        # their states carry it and they moved up a level or more (hive.frontier.evidence).
        f.admit([UrlRecord(r.url, r.host_key, r.depth, f"http://l{k}.test/")
                 for r in records if r.url.endswith(f"/{PAGES - 1}") for k in range(8)], 0.0)
        now = 0.0
        for _ in range(4):
            for lease in drain(f, now):
                slow = lease.record.host_key.startswith("h1")
                broken = lease.record.host_key.startswith("h2")
                outcome = (ROBOTS_OK if lease.kind == LeaseKind.ROBOTS else SLOW if slow
                           else BROKEN if broken else OK)
                f.done(lease, outcome, now, now + 0.05)
                if lease.kind == LeaseKind.ROBOTS:
                    f.store.put("robots", lease.record.host_key.encode(), b"rules")
            f.commit(now)
            now += 1.1
        drain(f, now)
        outbox = Outbox(f.store, resend_after=1.0, max_tries=3)
        outbox.put([rec(f"http://link{i}-{j}.test/") for j in range(3)], 0.0)
        for key, value in PAYLOADS:
            if owners.owner(payload_host(key)) == i:
                f.store.put("payloads", key, value)
        if i == 0:
            f.store.put("payloads", UNDECODABLE, b"\xff")
        f.commit(now)
        f.store.abandon()
    DataDir(data).update_state(ring=owners.params, procs=owners.procs)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("pristine") / "data"
    build(data, 3)
    return data


@pytest.fixture
def data(pristine: Path, tmp_path: Path) -> Path:
    path = tmp_path / "data"
    shutil.copytree(pristine, path)
    return path


@dataclass
class Snapshot:
    """Everything a move must carry, read from every store (and the supervisor's outbox)."""

    urls: dict[bytes, bytes] = field(default_factory=dict)
    queued: Counter[bytes] = field(default_factory=Counter)
    hosts: dict[str, tuple[int, HostState]] = field(default_factory=dict)
    copies: int = 0
    leased: set[str] = field(default_factory=set)
    robots: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    links: Counter[str] = field(default_factory=Counter)
    payloads: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)
    payload_copies: int = 0


def read(path: Path) -> dict[str, list[tuple[bytes, bytes]]]:
    """Every database of a store (a store a kill left half created lacks some: empty)."""
    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=len(DB_NAMES) + 2)
    out: dict[str, list[tuple[bytes, bytes]]] = dict.fromkeys(DB_NAMES, [])
    try:
        with env.begin() as txn:
            for name in DB_NAMES:
                try:
                    db = env.open_db(name.encode(), txn=txn, create=False)
                except lmdb.Error:
                    continue
                out[name] = list(txn.cursor(db).iternext())
    finally:
        env.close()
    return out


def snapshot(data: Path) -> Snapshot:
    snap = Snapshot()
    for i, _ in DataDir(data).workers():
        dbs = read(data / f"worker-{i:02d}")
        for key, state in dbs["urls"]:
            assert snap.urls.setdefault(key, state) == state
        for _, value in dbs["front"] + dbs["back"] + dbs["retries"]:
            record = UrlRecord.decode(value)
            snap.queued[url_key(host_hash(record.host_key), fingerprint(record.url))] += 1
        states = {key: HostState.decode(value) for key, value in dbs["hosts"]}
        for state in states.values():
            snap.copies += 1
            snap.hosts[state.host_key] = i, state
        snap.leased |= {states[key].host_key for key, _ in dbs["leases"]}
        snap.robots.update((key.decode(), (i, value)) for key, value in dbs["robots"])
        for _, batch in dbs["outbox"]:
            snap.links.update(r.url for r in decode_records(batch))
        for key, value in dbs["payloads"]:
            snap.payload_copies += 1
            assert snap.payloads.setdefault(key, (i, value))[1] == value
    if (data / "supervisor").exists():
        for _, batch in read(data / "supervisor")["outbox"]:
            snap.links.update(r.url for r in decode_records(batch))
    return snap


def check_move(before: Snapshot, data: Path, procs: int, now: float) -> int:
    """Everything moved and nothing else changed; returns how many hosts changed store."""
    owners = ring(procs)
    reports = verify_data_dir(data, owners.owner)
    assert sorted(reports) == list(range(procs))
    assert all(r.ok for r in reports.values()), [r.summary() for r in reports.values()]
    assert json.loads((data / "hive.json").read_text())["ring"] == owners.params
    after = snapshot(data)
    assert after.urls == before.urls, "every state as it was: its evidence and its place"
    assert any((p := placed(state)) is not None and p.level < p.base
               for state in after.urls.values()), "risen URLs were in the move"
    pending = {key for key, state in before.urls.items() if state[:1] == b"p"}
    assert after.queued == before.queued == Counter(pending)
    assert after.copies == len(after.hosts) == len(before.hosts)
    moved = 0
    for name, (old, state) in before.hosts.items():
        where, new = after.hosts[name]
        assert where == owners.owner(name), name
        moved += where != old
        expected = {state.next_allowed}
        if name in before.leased:
            # A leased host waits its full delay from the move; one that is back in its old
            # store went through another in an interrupted move, or never left it.
            waited = max(state.next_allowed, now + max(state.delay, CFG.politeness.min_delay))
            expected = {waited, state.next_allowed} if where == old else {waited}
        assert new.next_allowed in expected, name
        assert (new.admitted, new.fetched, new.delay) == (state.admitted, state.fetched,
                                                        state.delay)
    assert {k: v for k, (_, v) in after.robots.items()} == {
        k: v for k, (_, v) in before.robots.items()}
    assert all(i == owners.owner(k) for k, (i, _) in after.robots.items())
    assert after.links == before.links
    assert {k: v for k, (_, v) in after.payloads.items()} == {
        k: v for k, (_, v) in before.payloads.items()}
    assert after.payload_copies == len(after.payloads)
    for key, (where, value) in after.payloads.items():
        original = decode_payload(value)
        if original is None:  # stays where it was, or in its retired store
            assert key == UNDECODABLE and where == before.payloads[key][0]
        else:
            assert where == owners.owner(host_key(original.uri)), original
    return moved


def test_grow_three_to_five_then_shrink_to_two(data: Path) -> None:
    """The share of hosts moved is the ring's: 2/5 growing 3 -> 5, 3/5 shrinking 5 -> 2
    (a consistent-hash ring moves only the added or removed workers' hosts). Tolerance
    0.08, about three standard deviations of a binomial share over 300 hosts (the hosts
    and the ring are fixed, so the outcome is too)."""
    before = snapshot(data)
    assert before.leased and before.copies == HOSTS
    assert len(before.payloads) == len(PAYLOADS) + 1
    grown = resize(data, CFG, 5, now=NOW)
    moved = check_move(before, data, 5, NOW)
    assert abs(moved / HOSTS - 2 / 5) < 0.08, moved
    assert grown.total().hosts == moved and grown.old_procs == 3
    assert 0 < grown.total().payloads < len(PAYLOADS)
    assert "payload-index entries moved" in grown.summary()
    # Hosts go only to the new workers; a payload entry naming another worker's host is
    # placed at that host's owner whatever the resize.
    assert {dest for (_, dest), f in grown.flows.items() if f.hosts} == {3, 4}
    assert not grown.retired
    before = snapshot(data)
    shrunk = resize(data, CFG, 2, now=NOW + 1)
    moved = check_move(before, data, 2, NOW + 1)
    assert abs(moved / HOSTS - 3 / 5) < 0.08, moved
    assert shrunk.total().hosts == moved
    assert {source for source, _ in shrunk.flows} == {2, 3, 4}
    assert [name.split(".")[0] for name in shrunk.retired] == ["worker-02", "worker-03",
                                                               "worker-04"]
    assert all((data / name).is_dir() for name in shrunk.retired)
    assert shrunk.outbox_batches == 1  # worker-02's; workers 3 and 4 never had one
    assert shrunk.to_dict()["moves"] and "to 2 workers" in shrunk.summary()
    frontiers = [Frontier.from_config(data / f"worker-{i:02d}", CFG) for i in range(2)]
    assert sum(f.pending for f in frontiers) == sum(before.queued.values())
    assert all(f.pop_ready(NOW + 400).lease is not None for f in frontiers)
    for f in frontiers:
        f.close(NOW + 400)


def crash_after(steps: int) -> Callable[[str], None]:
    """A checkpoint that raises at its ``steps``-th call: the move stops there, like a kill."""
    calls: list[str] = []

    def checkpoint(step: str) -> None:
        calls.append(step)
        if len(calls) == steps:
            raise Crash(step)

    return checkpoint


class Crash(Exception):
    pass


def resize_through_crashes(data: Path, procs: int, now: float) -> int:
    """Crash the move after 1, 2, 3, 1, ... commits, rerun until it ends; returns how many
    crashes left some host in two stores."""
    doubles = 0
    old = json.loads((data / "hive.json").read_text())["ring"]
    for attempt in range(200):
        try:
            resize(data, CFG, procs, now=now, checkpoint=crash_after(attempt % 3 + 1))
            return doubles
        except Crash:
            assert json.loads((data / "hive.json").read_text())["ring"] == old
            snap = snapshot(data)
            doubles += snap.copies > len(snap.hosts)
    raise AssertionError("the move never finished")


def test_a_start_resizes_only_on_another_ring(data: Path) -> None:
    state = json.loads((data / "hive.json").read_text())
    assert resize_if_changed(data, CFG, 4, None) is None, "a fresh data directory"
    assert resize_if_changed(data, CFG, 3, state) is None, "the same ring"
    grown = resize_if_changed(data, CFG, 4, state)
    assert grown is not None and grown.old_procs == 3 and grown.procs == 4
    assert json.loads((data / "hive.json").read_text())["ring"]["procs"] == 4


def test_a_crash_at_any_commit_then_start_again(data: Path) -> None:
    before = snapshot(data)
    assert resize_through_crashes(data, 5, NOW), "no crash left a host in two stores"
    check_move(before, data, 5, NOW)
    before = snapshot(data)
    assert resize_through_crashes(data, 2, NOW + 1)
    check_move(before, data, 2, NOW + 1)
    assert len(list(data.glob("worker-0?.retired-*"))) == 3


def test_a_crash_then_another_size(data: Path) -> None:
    """A move interrupted for 5 workers and started again for 2 is finished for 2: the
    owner's copy of a host found in two stores is kept, the other deleted."""
    before = snapshot(data)
    with pytest.raises(Crash):
        # The third commit is worker-00's hosts copied to worker-04 (one batch a destination).
        resize(data, CFG, 5, now=NOW, checkpoint=crash_after(3))
    assert snapshot(data).copies > HOSTS
    result = resize(data, CFG, 2, now=NOW)
    check_move(before, data, 2, NOW)
    assert sorted(name.split(".")[0] for name in result.retired) == [
        "worker-02", "worker-03", "worker-04"]


def test_kill_9_during_the_move_then_start_again(data: Path) -> None:
    """Real kills -9 (LMDB environments left open): inside a destination's transaction,
    inside a source's, and between the two; then the move again."""
    before = snapshot(data)
    for point, count in (("copy_hosts", 2), ("delete_hosts", 2), ("copied", 2)):
        run = subprocess.run(
            [sys.executable, "-c", KILLER, str(data), point, str(count)], cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
            timeout=60,
        )
        assert run.returncode == -signal.SIGKILL, run.stderr
        assert json.loads((data / "hive.json").read_text())["ring"]["procs"] == 3
    assert snapshot(data).copies > HOSTS
    resize(data, CFG, 5, now=NOW)
    check_move(before, data, 5, NOW)


def test_batches_group_by_destination_within_bounds() -> None:
    moves = [Move(hh, hh % 3, 10) for hh in range(50)] + [Move(99, 1, 500)]
    out = list(batches(moves, max_hosts=4, max_entries=35))
    assert sorted(m for b in out for m in b) == sorted(moves)
    for batch in out:
        assert len({m.dest for m in batch}) == 1 and len(batch) <= 4
        assert sum(m.size for m in batch) <= 35 or len(batch) == 1
    assert [Move(99, 1, 500)] in out


@pytest.fixture
def web(tmp_path: Path) -> Iterator[WebProcess]:
    with WebProcess(Web(seed=5, hosts=30, pages=8, hostile=False), tmp_path / "requests.jsonl",
                    host=WEB_ADDRESS) as server:
        yield server


@pytest.mark.slow
def test_crawl_with_three_then_five_then_two_workers(tmp_path: Path, web: WebProcess) -> None:
    """Part way with 3, part way with 5, to the end with 2: one owner per host after each
    move (hive verify), every in-scope page fetched once, politeness across the moves."""
    hive = Hive(tmp_path, web)
    finish(hive.start(3, "--max-pages", "50"), code=ExitCode.MAX_PAGES)
    requests = len(web.requests)
    finish(hive.start(5, "--max-pages", "50"), code=ExitCode.MAX_PAGES)
    assert len(web.requests) > requests
    result = hive.run("verify")
    assert result.returncode == 0 and result.stdout.count(": ok") == 5, result.stdout
    log = (hive.data / "logs" / "supervisor.log").read_text()
    assert "resized from 3 to 5 workers" in log
    assert re.search(r"worker-0[012] -> worker-0[34]: [1-9]\d* hosts", log), log
    process = hive.start(2)
    status = wait_for(hive.status, timeout=60)
    assert status["resize"]["from"] == 5 and status["resize"]["to"] == 2
    assert len(status["resize"]["retired"]) == 3
    finish(process)
    check_crawl(web, data=hive.data)
    result = hive.run("verify")
    assert result.returncode == 0 and result.stdout.count(": ok") == 2, result.stdout
    assert len(list(hive.data.glob("worker-0[234].retired-*"))) == 3
    assert hive.state()["ring"]["procs"] == 2
