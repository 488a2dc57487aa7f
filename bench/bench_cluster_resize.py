"""Cluster resize benchmark: hosts moved between machines' stores against one machine's resize.

    python bench/bench_cluster_resize.py [--hosts 5000] [--pages 20]

Builds a crawl's stores (``--hosts`` hosts, ``--pages`` URLs each, admitted by
the Frontier, a few turns fetched so hosts carry state) for two machines of two
workers each (``a``, ``b``), then, in the same run:

- **one machine**: the same four stores in one data directory, resized from 4 to 6
  workers (hive/procs/resize.py), the move a cluster of one machine would make;
- **cluster, add**: ``a, b`` to ``a, b, c`` (two workers each; machines as data
  directories, the steps in this process: hive/procs/cluster_resize.py's
  LocalMachines, so the transfer stores' bytes are copied, not sent over a network);
- **cluster, remove**: ``a, b, c`` to ``a, c``.

Prints hosts moved (between machines and within one), bytes shipped, stores retired
and seconds, and the ratio of the cluster add to the one-machine move of the same hosts.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from hive import config
from hive.core.keys import HOST
from hive.core.record import UrlRecord
from hive.core.urls import canonicalize, host_key
from hive.frontier.frontier import Frontier
from hive.outcome import Outcome
from hive.procs.cluster_plan import ClusterPlan
from hive.procs.cluster_resize import LocalMachines, resize_if_changed, taking_part
from hive.procs.resize import resize
from hive.storage.datadir import DataDir
from hive.storage.modes import compact_copy

NOW = 1000.0


def plan(cfg: config.Config, names: list[str], procs: int) -> ClusterPlan:
    described = [{"name": n, "host": "127.0.0.1", "server_key": "k", "client_cert": "c"}
                 for n in names]
    return ClusterPlan.draw(described, procs, cfg.hive.vnodes, cfg.hive.ring_seed,
                            cfg.cluster, HOST)


def build(data: Path, cfg: config.Config, hosts: int, pages: int, procs: int) -> None:
    """``hosts`` x ``pages`` URLs admitted to their owners under a ring of ``procs``, and
    two turns of fetches done, in one data directory."""
    ring = plan(cfg, ["a", "b"], procs // 2).ring()
    by_owner: dict[int, list[UrlRecord]] = {i: [] for i in range(procs)}
    for h in range(hosts):
        for p in range(pages):
            url = canonicalize(f"http://h{h}.bench.test/{p}")
            by_owner[ring.owner(host_key(url))].append(UrlRecord(url, host_key(url), 1))
    for i, records in by_owner.items():
        f = Frontier.from_config(data / f"worker-{i:02d}", cfg, rng=random.Random(i))
        f.admit(records, 0.0)
        now = 0.0
        for _ in range(2):
            while (lease := f.pop_ready(now).lease) is not None:
                f.done(lease, Outcome("ok", 200), now, now + 0.01)
            f.commit(now)
            now += 2.0
        f.close(now)
        compact(data / f"worker-{i:02d}")
    DataDir(data).update_state(ring=ring.params, procs=procs)


def compact(store: Path) -> None:
    """Rewrite a store with LMDB's compacting copy. A transaction that freed its newest
    pages leaves data.mdb shorter than the last page number its meta page records, which
    hive.storage.store.check_file refuses as truncated (reported, not fixed here)."""
    scratch = store.with_name(store.name + ".compact")
    scratch.mkdir()
    compact_copy(store, scratch)
    (scratch / "data.mdb").replace(store / "data.mdb")
    shutil.rmtree(scratch)


def split(whole: Path, root: Path, cfg: config.Config) -> None:
    """The one data directory's stores as machines a and b (two workers each)."""
    old = plan(cfg, ["a", "b"], 2)
    for machine in old.machines:
        dd = DataDir(root / "nodes" / machine.name)
        dd.root.mkdir(parents=True)
        for worker in machine.workers:
            shutil.copytree(whole / f"worker-{worker:02d}", dd.worker(worker))
        dd.write_state({"ring": old.ring().params, "procs": old.procs,
                        "workers": [machine.first, machine.count], "machine": machine.name})
    (root / "driver").mkdir()
    DataDir(root / "driver").write_state({"cluster": {"plan": old.to_dict()}})


def cluster_resize(root: Path, cfg: config.Config, names: list[str]) -> str:
    driver = DataDir(root / "driver")
    everyone = taking_part(driver.read_state(), names)
    machines = LocalMachines(cfg, {n: root / "nodes" / n for n in everyone})
    result = resize_if_changed(driver, plan(cfg, names, 2), machines, everyone, now=NOW)
    assert result is not None
    moved = sum(result.between.values())
    return (f"{moved:>8,} {result.within:>8,} {result.shipped_bytes:>14,} "
            f"{result.retired:>8} {result.seconds:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=5000)
    parser.add_argument("--pages", type=int, default=20)
    args = parser.parse_args()
    cfg = config.load(environ={})
    with tempfile.TemporaryDirectory(prefix="hive-bench-resize-") as tmp:
        whole = Path(tmp) / "whole"
        started = time.monotonic()
        build(whole, cfg, args.hosts, args.pages, 4)
        print(f"built {args.hosts:,} hosts x {args.pages} URLs in 4 stores in "
              f"{time.monotonic() - started:.1f}s")
        root = Path(tmp) / "cluster"
        split(whole, root, cfg)
        one = Path(tmp) / "one"
        shutil.copytree(whole, one)
        print(f"{'move':<34} {'between':>8} {'within':>8} {'bytes shipped':>14} "
              f"{'retired':>8} {'seconds':>8}")
        moved = resize(one, cfg, 6, now=NOW)
        print(f"{'one machine, 4 -> 6 workers':<34} {'-':>8} {moved.total().hosts:>8,} "
              f"{'-':>14} {len(moved.retired):>8} {moved.seconds:>8.2f}")
        added = cluster_resize(root, cfg, ["a", "b", "c"])
        print(f"{'cluster, a,b -> a,b,c (2 each)':<34} {added}")
        print(f"{'cluster, a,b,c -> a,c (2 each)':<34} {cluster_resize(root, cfg, ['a', 'c'])}")
        ratio = float(added.split()[-1]) / max(moved.seconds, 1e-9)
        print(f"cluster add / one machine (same hosts moved): {ratio:.2f}x the time")


if __name__ == "__main__":
    main()
