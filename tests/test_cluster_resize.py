"""A cluster resize's mover (hive/procs/cluster_resize.py), without Ray: machines as data
directories, the steps run in this process (LocalMachines), real stores built by the
Frontier (tests/test_resize.py's ``build``).

Each resize is checked against every machine's stores before it: each host in exactly one
store, its owner's under the new ring, on the machine the new plan runs that worker on
(``hive verify`` of every machine's stores); every URL state, queued URL, robots entry,
payload-index entry and unacknowledged link batch kept, once. Then real kills -9 of the
resizing process at each kind of step, and the resize again: the same end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hive.core.keys import HOST
from hive.core.record import UrlRecord
from hive.core.wire import decode_records
from hive.frontier.verify import verify_data_dir
from hive.procs.cluster_plan import ClusterPlan
from hive.procs.cluster_resize import (
    CHUNK,
    LocalMachines,
    needs_resize,
    resize_if_changed,
    taking_part,
)
from hive.procs.outbox import Outbox
from hive.storage.datadir import DataDir
from hive.storage.store import Store
from tests.frontier.conftest import rec
from tests.test_resize import CFG, HOSTS, NOW, Snapshot, build, read, snapshot

ROOT = Path(__file__).resolve().parents[1]
KILLER = """
import os, signal, sys
from pathlib import Path
import hive.procs.cluster_resize as cluster
import hive.procs.resize as mover
from tests.test_cluster_resize import machines_at, plan
root, point, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
seen = 0

def dying(module, name):
    step = getattr(module, name)
    def wrapped(*args, **kwargs):
        global seen
        result = step(*args, **kwargs)
        seen += 1
        if seen == count:
            os.kill(os.getpid(), signal.SIGKILL)
        return result
    setattr(module, name, wrapped)

if point in cluster.STEPS:
    dying(cluster, point)
    cluster.STEPS[point] = getattr(cluster, point)
else:
    dying(mover, point)
new = plan(sys.argv[4].split(","), int(sys.argv[5]))
cluster.resize_if_changed(cluster.DataDir(root / "driver"), new,
                          machines_at(root, sys.argv[6].split(",")), sys.argv[6].split(","),
                          now=1000.0)
"""


def plan(names: list[str], procs: int) -> ClusterPlan:
    described = [{"name": n, "host": "127.0.0.1", "server_key": "k", "client_cert": "c"}
                 for n in names]
    return ClusterPlan.draw(described, procs, CFG.hive.vnodes, CFG.hive.ring_seed,
                            CFG.cluster, HOST)


def machines_at(root: Path, names: list[str]) -> LocalMachines:
    return LocalMachines(CFG, {name: root / "nodes" / name for name in names})


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Machines a and b of a plan of two workers each: tests/test_resize.py's crawl of four
    workers, its stores split between them, each with an outbox batch at its supervisor."""
    root = tmp_path_factory.mktemp("cluster")
    whole = root / "whole"
    build(whole, 4)
    old = plan(["a", "b"], 2)
    for machine in old.machines:
        dd = DataDir(root / "nodes" / machine.name)
        dd.root.mkdir(parents=True)
        for worker in machine.workers:
            shutil.copytree(whole / f"worker-{worker:02d}", dd.worker(worker))
        store = Store(dd.supervisor, sync_interval=0.0)
        # Seeds not yet acknowledged: on hosts of every worker, so that a resize moves some.
        Outbox(store, resend_after=1.0, max_tries=3).put(
            [rec(f"http://h{h}.test/seed-{machine.name}") for h in range(0, HOSTS, 10)], NOW)
        store.close(NOW)
        dd.write_state({"ring": old.ring().params, "procs": old.procs,
                        "workers": [machine.first, machine.count], "machine": machine.name})
    shutil.rmtree(whole)
    (root / "driver").mkdir()
    DataDir(root / "driver").write_state({"cluster": {"plan": old.to_dict()},
                                          "ring": old.ring().params})
    return root


@pytest.fixture
def root(pristine: Path, tmp_path: Path) -> Path:
    shutil.copytree(pristine, tmp_path / "c")
    return tmp_path / "c"


def cluster_snapshot(root: Path) -> tuple[Snapshot, dict[str, str]]:
    """Every machine's stores as one snapshot, and the machine that holds each host."""
    snap = Snapshot()
    where: dict[str, str] = {}
    for node in sorted((root / "nodes").iterdir()):
        part = snapshot(node)
        for key, state in part.urls.items():
            assert snap.urls.setdefault(key, state) == state
        snap.queued += part.queued
        snap.copies += part.copies
        for host, placed in part.hosts.items():
            snap.hosts[host] = placed
            where[host] = node.name
        snap.leased |= part.leased
        snap.robots.update(part.robots)
        snap.links += part.links
        snap.payloads.update(part.payloads)
        snap.payload_copies += part.payload_copies
        assert not (node / "transfer").exists() or not any(
            d.is_dir() for d in (node / "transfer").iterdir())
    return snap, where


def check_resized(before: Snapshot, root: Path, new: ClusterPlan, left: list[str],
                  links_once: bool = True) -> None:
    ring = new.ring()
    after, where = cluster_snapshot(root)
    assert after.copies == len(after.hosts) == len(before.hosts) == HOSTS
    for host, (worker, _) in after.hosts.items():
        assert worker == ring.owner(host), host
        assert where[host] == new.machine_of(worker).name, host
    assert after.urls == before.urls
    assert after.queued == before.queued
    assert {k: v for k, (_, v) in after.robots.items()} == {
        k: v for k, (_, v) in before.robots.items()}
    if links_once:
        assert after.links == before.links, "every unacknowledged batch kept, once"
    else:
        assert set(after.links) == set(before.links), "every unacknowledged batch kept"
        assert all(after.links[url] >= n for url, n in before.links.items())
    assert {k: v for k, (_, v) in after.payloads.items()} == {
        k: v for k, (_, v) in before.payloads.items()}
    assert after.payload_copies == len(after.payloads)
    for machine in new.machines:
        node = root / "nodes" / machine.name
        reports = verify_data_dir(node, ring.owner, procs=ring.procs, workers=machine.workers)
        assert sorted(reports) == list(machine.workers)
        assert all(r.ok for r in reports.values()), [r.summary() for r in reports.values()]
        state = json.loads((node / "hive.json").read_text())
        assert state["ring"] == ring.params and state["workers"] == [machine.first, machine.count]
    for machine in new.machines:
        # A supervisor's batch is acknowledged to the supervisor of the machine that admits
        # it: each record waits at its owner's machine.
        owners = {ring.owner(r.host_key) for r in supervisor_records(root, machine.name)}
        assert owners <= set(machine.workers), (machine.name, owners)
    for name in left:
        assert supervisor_records(root, name) == []
        node = root / "nodes" / name
        assert not DataDir(node).workers(), "a leaving machine keeps only retired stores"
        assert json.loads((node / "hive.json").read_text())["left_cluster"] is True
    driver = json.loads((root / "driver" / "hive.json").read_text())
    assert driver["cluster"]["plan"] == new.to_dict() and "cluster_resize" not in driver


def supervisor_records(root: Path, name: str) -> list[UrlRecord]:
    """The records in machine ``name``'s supervisor's outbox."""
    path = root / "nodes" / name / "supervisor"
    if not path.exists():
        return []
    return [r for _, batch in read(path)["outbox"] for r in decode_records(batch)]


def resize_to(root: Path, names: list[str], procs: int) -> tuple[Snapshot, ClusterPlan]:
    before, _ = cluster_snapshot(root)
    new = plan(names, procs)
    everyone = taking_part(DataDir(root / "driver").read_state(), names)
    result = resize_if_changed(DataDir(root / "driver"), new, machines_at(root, everyone),
                               everyone, now=NOW)
    assert result is not None
    return before, new


def test_add_a_machine_then_remove_one(root: Path) -> None:
    """a, b -> a, b, c moves hosts only to c's new workers (a machine added last keeps the
    others' ids); then a, b, c -> a, c drains b: its hosts, its outbox batches and its
    supervisor's go to the machines that stay."""
    before, new = resize_to(root, ["a", "b", "c"], 2)
    after, where = cluster_snapshot(root)
    check_resized(before, root, new, [])
    moved = [h for h, (w, _) in after.hosts.items() if w != before.hosts[h][0]]
    assert moved and all(where[h] == "c" for h in moved)
    # 2 of 6 workers are new: a third of the hosts, within about three standard deviations.
    assert abs(len(moved) / HOSTS - 2 / 6) < 0.1, len(moved)
    assert supervisor_records(root, "c"), "seeds of c's hosts went to its supervisor"
    before, new = resize_to(root, ["a", "c"], 2)
    check_resized(before, root, new, ["b"])


def test_more_workers_per_machine_and_nothing_to_do(root: Path) -> None:
    before, new = resize_to(root, ["a", "b"], 3)
    check_resized(before, root, new, [])
    assert not needs_resize(new, plan(["a", "b"], 3))
    assert resize_if_changed(DataDir(root / "driver"), plan(["a", "b"], 3),
                             machines_at(root, ["a", "b"]), ["a", "b"]) is None


def test_a_transfer_larger_than_a_chunk(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A transfer store goes in many chunks (one object ref each on a cluster)."""
    import hive.procs.cluster_resize as cluster
    monkeypatch.setattr(cluster, "CHUNK", 64 << 10)
    assert CHUNK > 64 << 10
    before, new = resize_to(root, ["a", "b", "c"], 2)
    check_resized(before, root, new, [])


def kill_mid_resize(root: Path, point: str, count: int) -> None:
    """A resize to a, b, c of two workers each, killed -9 after the ``count``-th call of
    ``point``."""
    run = subprocess.run(
        [sys.executable, "-c", KILLER, str(root), point, str(count), "a,b,c", "2", "a,b,c"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
        text=True, timeout=120)
    assert run.returncode == -signal.SIGKILL, run.stderr[-3000:]
    driver = json.loads((root / "driver" / "hive.json").read_text())
    assert driver["cluster_resize"]["machines"] == ["a", "b", "c"]


# Inside a store's transaction (resize.py's kills cover the mover's other points), after a
# transfer is sealed, after a chunk is written, after a transfer is whole at its destination
# (the first, and the second), before its source deletes it, after its source
# deleted it, between the rounds, between two machines' finish.
KILL_POINTS = [("copy_hosts", 3), ("seal", 1), ("write", 1), ("commit", 1), ("commit", 2),
               ("shipped", 1), ("settle", 4), ("finish", 2)]


@pytest.mark.slow
@pytest.mark.parametrize(("point", "count"), KILL_POINTS)
def test_kill_9_mid_resize_then_again(root: Path, point: str, count: int) -> None:
    """A kill -9 of the resizing process at each kind of step (KILL_POINTS), then ``hive
    start --cluster`` again: nothing lost, nothing twice."""
    before, _ = cluster_snapshot(root)
    kill_mid_resize(root, point, count)
    new = plan(["a", "b", "c"], 2)
    assert resize_if_changed(DataDir(root / "driver"), new,
                             machines_at(root, ["a", "b", "c"]), ["a", "b", "c"],
                             now=NOW) is not None
    check_resized(before, root, new, [])


@pytest.mark.slow
@pytest.mark.parametrize(("point", "count"), [("copy_hosts", 3), ("commit", 1), ("settle", 4)])
def test_kill_9_mid_resize_then_another_plan(root: Path, point: str, count: int) -> None:
    """Killed as above, then started again without c and with three workers a machine: c
    may hold hosts, so it still takes part, and is drained. Every host once, at its new
    owner; an unacknowledged link batch may be twice (a transfer both received and still
    held by its sender, for a machine that leaves, is drained at both ends: its hosts meet
    at their new owner, which keeps one copy, its batches are resent, and admission is
    idempotent)."""
    before, _ = cluster_snapshot(root)
    kill_mid_resize(root, point, count)
    everyone = taking_part(DataDir(root / "driver").read_state(), ["a", "b"])
    assert everyone == ["a", "b", "c"]
    new = plan(["a", "b"], 3)
    assert resize_if_changed(DataDir(root / "driver"), new, machines_at(root, everyone),
                             everyone, now=NOW) is not None
    check_resized(before, root, new, ["c"], links_once=False)


def test_a_start_must_reach_every_machine_that_may_hold_hosts(root: Path) -> None:
    """The machines of the last start's plan and of an unfinished resize take part in the
    next start, which is refused, naming them, while one has not joined; --machines names
    only machines that joined."""
    from hive.errors import HiveError
    from hive.procs.cluster import ClusterDriver

    driver = ClusterDriver(CFG, root / "driver", "auto", 2, machines=["a", "c"])
    assert driver._machines(["a", "b", "c"]) == (["a", "c"], ["a", "b", "c"])
    with pytest.raises(HiveError, match="machine b holds part of this crawl"):
        driver._machines(["a", "c"])
    with pytest.raises(HiveError, match="--machines: machine c has not joined"):
        driver._machines(["a", "b"])
    DataDir(root / "driver").update_state(cluster_resize={"machines": ["a", "b", "d"]})
    with pytest.raises(HiveError, match="machine d holds part"):
        ClusterDriver(CFG, root / "driver", "auto", 2)._machines(["a", "b", "c"])


def test_a_resize_is_pending_on_another_plan_or_an_unfinished_one(root: Path) -> None:
    from hive.procs.cluster_resize import resize_pending

    driver = DataDir(root / "driver")
    assert not resize_pending(driver, plan(["a", "b"], 2))
    assert resize_pending(driver, plan(["a", "b"], 3))
    assert resize_pending(driver, plan(["a", "c"], 2)), "the same ring on other machines"
    driver.update_state(cluster_resize={"machines": ["a", "b", "c"]})
    assert resize_pending(driver, plan(["a", "b"], 2)), "one left unfinished"
