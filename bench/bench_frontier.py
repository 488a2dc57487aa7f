"""Frontier benchmark: admit and pop_ready + done over ~1M URLs on ~10k hosts, vs raw LMDB.

    python bench/bench_frontier.py [--urls 1000000] [--hosts 10000] [--batch 1000]

Prints one table: URLs/s for admit and for the pop_ready + done cycle, the raw
LMDB cost of the same writes (plain puts and deletes of the same sizes, in the
same batches, in the same run) and the ratio, and peak anonymous memory
(RssAnon: LMDB's mapped pages count in VmRSS but are the page cache).
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import lmdb

from hive import config
from hive.frontier import Frontier, Outcome
from hive.frontier.store import back_key, front_key, url_key
from hive.record import UrlRecord
from hive.urls import fingerprint, host_hash

OK = Outcome("ok", 200)
DOWNLOAD = 0.005  # virtual seconds per page; the default delay policy applies


def rss_anon_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Peak:
    def __init__(self) -> None:
        self.mb = rss_anon_mb()

    def sample(self) -> None:
        self.mb = max(self.mb, rss_anon_mb())


def batches(urls: int, hosts: int, batch: int, seed: int = 5) -> Iterator[list[UrlRecord]]:
    """The same URLs every time, made a batch at a time so they never all sit in memory.

    As a worker receives them: links of one page come in a run of 20 URLs of one
    host (the splitter groups by host), hosts drawn at random.
    """
    rng = random.Random(seed)
    for start in range(0, urls, batch):
        out = []
        for i in range(start, min(start + batch, urls)):
            if i % 20 == 0:
                host = f"host{rng.randrange(hosts):05d}.example.com"
            out.append(UrlRecord(f"http://{host}/section/{i % 97}/page-{i}.html", host, 1 + i % 4))
        yield out


class Clock:
    """Sums the time spent inside ``with clock:`` blocks (record generation stays outside)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __enter__(self) -> None:
        self._start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.seconds += time.perf_counter() - self._start


def bench_frontier(path: Path, args: argparse.Namespace, peak: Peak) -> dict[str, float]:
    cfg = config.load(environ={}).replace(
        robots={"enabled": False},
        frontier={"max_depth": 100, "max_urls_per_host": 0, "sync_interval": 3600.0},
        fetch={"threads": args.threads},
    )
    f = Frontier.from_config(path, cfg, rng=random.Random(1))
    now = 1000.0
    admit, cycle = Clock(), Clock()
    for n, batch in enumerate(batches(args.urls, args.hosts, args.batch)):
        with admit:
            f.admit(batch, now)
            f.commit(now)
        if n % 50 == 0:
            peak.sample()
    pending = f.pending
    peak.sample()
    rss_pending = peak.mb
    served = turns = 0
    while True:
        with cycle:
            leases = []
            for _ in range(args.threads):
                ready = f.pop_ready(now)
                if ready.lease is None:
                    break
                leases.append(ready.lease)
            f.commit(now)
            for lease in leases:
                f.done(lease, OK, now, now + DOWNLOAD)
        if not leases:
            if ready.wake_at is None:
                break
            now = max(now, ready.wake_at)
            continue
        served += len(leases)
        turns += 1
        if turns % 1000 == 0:
            peak.sample()
    with cycle:
        f.close(now)
    return {"admit_s": admit.seconds, "cycle_s": cycle.seconds, "pending": pending,
            "served": served, "rss_pending": rss_pending}


def bench_raw(path: Path, args: argparse.Namespace) -> dict[str, float]:
    """The same writes as plain LMDB puts and deletes: same keys, sizes and batches."""
    env = lmdb.open(str(path), map_size=8 << 30, max_dbs=8, sync=False, metasync=False)
    urls, front, back, hosts, leases = (env.open_db(n) for n in (b"u", b"f", b"b", b"h", b"l"))
    admit, cycle = Clock(), Clock()
    host_value = b"x" * 100
    seq = 0
    pending: list[tuple[bytes, bytes, bytes, bytes]] = []
    for batch in batches(args.urls, args.hosts, args.batch):
        rows = []
        for r in batch:
            seq += 1
            hh = host_hash(r.host_key)
            rows.append((url_key(hh, fingerprint(r.url)), front_key(2, seq),
                         back_key(hh, 2, seq), r.encode()))
        with admit, env.begin(write=True) as txn:
            for ukey, fkey, _, data in rows:
                txn.put(ukey, b"p", overwrite=False, db=urls)
                txn.put(fkey, data, db=front)
        pending.extend(rows)
    for i in range(0, len(pending), args.threads):
        rows = pending[i : i + args.threads]
        with cycle:
            with env.begin(write=True) as txn:
                for _, fkey, bkey, data in rows:
                    txn.delete(fkey, db=front)
                    txn.put(bkey, data, db=back)
                    txn.put(bkey[:8], bkey, db=leases)
            with env.begin(write=True) as txn:
                for ukey, _, bkey, _ in rows:
                    txn.delete(bkey[:8], db=leases)
                    txn.delete(bkey, db=back)
                    txn.put(ukey, b"dok", db=urls)
                    txn.put(bkey[:8], host_value, db=hosts)
    env.close()
    return {"admit_s": admit.seconds, "cycle_s": cycle.seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=1000, help="URLs per admit call")
    parser.add_argument("--threads", type=int, default=32, help="leases outstanding per turn")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the stores")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hive-bench-", dir=args.dir))
    try:
        peak = Peak()
        start_mb = peak.mb
        hive = bench_frontier(base / "frontier", args, peak)
        raw = bench_raw(base / "raw", args)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    n = args.urls
    rows = [
        ("admit", n / hive["admit_s"], n / raw["admit_s"], hive["admit_s"] / raw["admit_s"]),
        ("pop_ready + done", hive["served"] / hive["cycle_s"], n / raw["cycle_s"],
         (hive["cycle_s"] / hive["served"]) / (raw["cycle_s"] / n)),
    ]
    print(f"frontier benchmark: {n:,} URLs over {args.hosts:,} hosts; admit batches of "
          f"{args.batch}, pop_ready + done turns of {args.threads} leases, one commit each")
    print(f"{'phase':<18}{'hive URLs/s':>14}{'raw LMDB URLs/s':>18}{'hive/raw cost':>15}")
    for name, rate, raw_rate, ratio in rows:
        print(f"{name:<18}{rate:>14,.0f}{raw_rate:>18,.0f}{ratio:>14.2f}x")
    print(f"pending after admit: {hive['pending']:,}; served: {hive['served']:,}")
    print(f"RssAnon: {start_mb:.0f} MB at start, "
          f"{hive['rss_pending']:.0f} MB with {hive['pending']:,} pending, "
          f"peak {peak.mb:.0f} MB")


if __name__ == "__main__":
    main()
