"""The ring-key scheme a data directory was made with (hive.core.keys, recorded with the
ring in hive.json): a directory of before the scheme keeps placing hosts by host, a new
one places them by registered domain, and a resize moves hosts by the scheme in force,
each domain's hosts together. Real stores built by the Frontier."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path

import lmdb
import pytest

from hive.core.keys import DOMAIN, HOST, registered_domain
from hive.core.ring import Ring
from hive.frontier import domains
from hive.frontier.frontier import Frontier
from hive.frontier.hosts import HostState
from hive.frontier.verify import verify_data_dir
from hive.outcome import Outcome
from hive.procs.lifecycle import ExitCode
from hive.procs.resize import resize, resize_if_changed, start_ring
from hive.storage.datadir import DataDir
from hive.storage.schema import DB_NAMES
from hive.testweb import Web, WebProcess, duplicates
from tests.conftest import WEB_ADDRESS
from tests.frontier.conftest import rec, small_config
from tests.test_hive import Hive, finish

CFG = small_config(frontier={"min_bound_hosts": 8, "max_bound_hosts": 8})
DOMAINS, HOSTS_PER_DOMAIN, PAGES = 12, 10, 3
HOSTS = [f"h{i}.d{d}.com" for d in range(DOMAINS) for i in range(HOSTS_PER_DOMAIN)]
OK = Outcome("ok", 200)


def build(data: Path, ring: Ring, recorded: dict[str, object]) -> int:
    """Every host's pages admitted at its owner under ``ring``, a turn fetched, the stores
    abandoned (kill -9); hive.json records ``recorded`` as the ring. Returns the URLs."""
    by_owner: dict[int, list[object]] = defaultdict(list)
    for page in range(PAGES):
        for host in HOSTS:
            by_owner[ring.owner(host)].append(rec(f"http://{host}/{page}"))
    for i in range(ring.procs):
        f = Frontier.from_config(data / f"worker-{i:02d}", CFG, rng=random.Random(i))
        f.admit(by_owner[i], 0.0)  # type: ignore[arg-type]
        while (lease := f.pop_ready(0.0).lease) is not None:
            f.done(lease, OK, 0.0, 0.05)
        f.commit(0.0)
        f.store.abandon()
    DataDir(data).update_state(ring=recorded, procs=ring.procs)
    return PAGES * len(HOSTS)


def placed(data: Path) -> dict[str, int]:
    """Each host record's store."""
    out: dict[str, int] = {}
    for i, path in DataDir(data).workers():
        env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=len(DB_NAMES) + 2)
        with env.begin() as txn:
            db = env.open_db(b"hosts", txn=txn, create=False)
            for _, value in txn.cursor(db):
                name = HostState.decode(value).host_key
                assert name not in out, f"{name} in two stores"
                out[name] = i
        env.close()
    return out


def seen(data: Path) -> int:
    """The URLs of the seen sets of every store."""
    total = 0
    for _, path in DataDir(data).workers():
        env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=len(DB_NAMES) + 2)
        with env.begin() as txn:
            total += txn.stat(env.open_db(b"urls", txn=txn, create=False))["entries"]
        env.close()
    return total


def domain_rows(data: Path) -> dict[str, tuple[set[int], domains.Domain]]:
    """Each domain's row: the stores holding one, and their sum."""
    out: dict[str, tuple[set[int], domains.Domain]] = {}
    for i, path in DataDir(data).workers():
        env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=len(DB_NAMES) + 2)
        with env.begin() as txn:
            for key, value in txn.cursor(env.open_db(b"domains", txn=txn, create=False)):
                where, total = out.get(key.decode(), (set(), domains.Domain()))
                row = domains.decode(value)
                out[key.decode()] = where | {i}, domains.Domain(
                    total.hosts + row.hosts, total.pages + row.pages,
                    total.fetched + row.fetched)
        env.close()
    return out


def test_a_directory_made_before_the_scheme_keeps_its_hosts_placed_by_host(
        tmp_path: Path) -> None:
    """hive.json without a ring key: the start's ring places by host, nothing moves on
    the same size, and every host is where that ring says (hive verify); the domain ring
    would misplace most of them, which is what the check would catch."""
    data = tmp_path / "data"
    old = Ring(3, CFG.hive.vnodes, CFG.hive.ring_seed)
    params = {"procs": 3, "vnodes": CFG.hive.vnodes, "seed": CFG.hive.ring_seed}
    build(data, old, params)
    state = DataDir(data).read_state()
    assert CFG.hive.ring_key == DOMAIN
    ring = start_ring(CFG, 3, state)
    assert ring.key == HOST and ring == old
    assert resize_if_changed(data, CFG, 3, state) is None, "the same ring: nothing moves"
    reports = verify_data_dir(data, ring.owner)
    assert all(r.ok for r in reports.values()), [r.summary() for r in reports.values()]
    wrong = verify_data_dir(data, Ring(3, CFG.hive.vnodes, CFG.hive.ring_seed, DOMAIN).owner)
    assert not all(r.ok for r in wrong.values()), "a domain ring would misroute this crawl"
    assert placed(data) == {host: old.owner(host) for host in HOSTS}
    urls = seen(data)
    # A resize of the old directory keeps its scheme.
    resize(data, CFG, 5, now=10.0)
    recorded = json.loads((data / "hive.json").read_text())["ring"]
    assert recorded["key"] == HOST and recorded["procs"] == 5
    grown = Ring(5, CFG.hive.vnodes, CFG.hive.ring_seed, HOST)
    assert placed(data) == {host: grown.owner(host) for host in HOSTS}
    reports = verify_data_dir(data, grown.owner)
    assert all(r.ok for r in reports.values()), [r.summary() for r in reports.values()]
    assert seen(data) == urls, "every admitted URL kept"


def test_a_new_directory_places_by_domain_and_a_resize_moves_domains_whole(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    ring = start_ring(CFG, 3, None)
    assert ring.key == DOMAIN
    urls = build(data, ring, dict(ring.params))
    before = placed(data)
    assert seen(data) == urls
    assert len({before[h] for h in HOSTS if registered_domain(h) == "d0.com"}) == 1
    for procs in (5, 2):
        resize(data, CFG, procs, now=10.0)
        after = placed(data)
        assert sorted(after) == sorted(HOSTS)
        by_domain: dict[str, set[int]] = defaultdict(set)
        for host, where in after.items():
            by_domain[registered_domain(host)].add(where)
        assert all(len(stores) == 1 for stores in by_domain.values()), by_domain
        new = Ring(procs, CFG.hive.vnodes, CFG.hive.ring_seed, DOMAIN)
        assert after == {host: new.owner(host) for host in HOSTS}
        reports = verify_data_dir(data, new.owner)
        assert all(r.ok for r in reports.values()), [r.summary() for r in reports.values()]
        assert json.loads((data / "hive.json").read_text())["ring"]["key"] == DOMAIN
        assert seen(data) == urls, "every admitted URL kept"
        # Each domain's row went with its hosts, whole: in one store, all its hosts.
        rows = domain_rows(data)
        assert sorted(rows) == sorted({registered_domain(h) for h in HOSTS})
        assert all(len(where) == 1 and row.hosts == HOSTS_PER_DOMAIN
                   and row.pages == HOSTS_PER_DOMAIN * PAGES for where, row in rows.values())


@pytest.mark.slow
def test_a_hive_made_before_the_scheme_resumes_placing_by_host(tmp_path: Path) -> None:
    """A real hive crawls part of a web of one registered domain with hosts placed by host,
    its hive.json is then written as before the scheme (no key), and a start with today's
    default ("domain") resumes it by host: nothing misrouted (hive verify with the ring in
    force), every page fetched once at the server."""
    web_def = Web(seed=3, hosts=2, pages=2, hostile=False, farm=150)
    with WebProcess(web_def, tmp_path / "requests.jsonl", host=WEB_ADDRESS) as web:
        sections: dict[str, dict[str, object]] = {
            "dns": {"resolve": [web.resolve, f"*.{web_def.farm_domain}={WEB_ADDRESS}"]},
            "scope": {"max_hosts_per_domain": 0},
        }
        old = Hive(tmp_path, web, hive={"ring_key": HOST}, **sections)  # type: ignore[arg-type]
        with old.seeds.open("a") as seeds:
            seeds.write(web_def.farm_seed(web.port) + "\n")
        finish(old.start(2, "--max-pages", "60"), code=ExitCode.MAX_PAGES)
        state = json.loads((old.data / "hive.json").read_text())
        assert state["ring"].pop("key") == HOST
        DataDir(old.data).write_state(state)  # as a hive of before the scheme wrote it
        new = Hive(tmp_path, web, **sections)  # type: ignore[arg-type]
        with new.seeds.open("a") as seeds:
            seeds.write(web_def.farm_seed(web.port) + "\n")
        finish(new.start(2), timeout=180)
        requests = web.requests
    assert new.state()["ring"]["key"] == HOST
    verified = new.run("verify")
    assert verified.returncode == 0 and verified.stdout.count(": ok") == 2, verified.stdout
    assert len(web_def.farm_hosts(requests)) == 150
    assert duplicates(requests) == {}
    assert web.in_scope_urls() <= {r.url for r in requests if r.method == "GET"}
