"""Frontier benchmark: admit and pop_ready + done over ~1M URLs on ~10k hosts, vs raw LMDB.

    python bench/bench_frontier.py [--urls 1000000] [--hosts 10000] [--batch 1000]

Prints one table: URLs/s for admit and for the pop_ready + done cycle, the raw
LMDB cost of the same writes and the ratio, the LMDB writes per URL of each
side, and peak anonymous memory (RssAnon: LMDB's mapped pages count in VmRSS
but are the page cache).

The raw side is the frontier's own writes. A second, identical run (same
records, seed and virtual clock, so the same decisions) records every write
call the frontier makes — put, put-if-new, delete, putmulti; database, keys,
values — transaction by transaction; when the frontier commits a transaction,
those calls are replayed, timed, into a fresh environment opened with the
store's flags, as one transaction. Raw therefore makes the same LMDB calls, of
the same sizes, in the same transactions; what it leaves out is the frontier's
reads and its Python. Only the first run is timed for the frontier; the
recorded run's own store is opened with writemap (how LMDB carries its pages to
the file changes none of its writes), which saves it the write() calls of every
commit and so about a third of the benchmark's time.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lmdb

from hive import config
from hive.core.record import UrlRecord
from hive.frontier.frontier import Frontier
from hive.outcome import Outcome
from hive.storage.schema import DB_NAMES

OK = Outcome("ok", 200)
DOWNLOAD = 0.005  # virtual seconds per page; the default delay policy applies
RAW_MAP = 1 << 34  # the raw environment never grows, so growth is not part of its cost
PHASES = ("admit", "cycle")
PUT, ADD, DELETE, PUTMULTI = range(4)
Write = tuple[int, Any, Any, Any]  # (call, raw db, key, value), or (PUTMULTI, raw db, None, items)


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


class Raw:
    """Stands in for the store's environment: records each write transaction of the
    frontier and, when the frontier commits it, replays its writes into a raw
    environment as one transaction, timing only the replay."""

    def __init__(
        self, env: lmdb.Environment, dbs: dict[str, Any], path: Path, flags: dict[str, bool]
    ) -> None:
        self._env = env
        self.env = lmdb.open(
            str(path), map_size=RAW_MAP, max_dbs=len(DB_NAMES) + 2, sync=flags["sync"],
            metasync=flags["metasync"], map_async=flags["map_async"],
            readahead=flags["readahead"], writemap=flags["writemap"],
        )
        self.dbs = {id(db): self.env.open_db(name.encode()) for name, db in dbs.items()}
        self.phase = PHASES[0]
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.ops = dict.fromkeys(PHASES, 0)

    def begin(self, write: bool = False) -> RecordingTxn:
        return RecordingTxn(self, self._env.begin(write=write))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def replay(self, writes: list[Write]) -> None:
        start = time.perf_counter()
        with self.env.begin(write=True) as txn:
            for call, db, key, value in writes:
                if call == PUT:
                    txn.put(key, value, db=db)
                elif call == DELETE:
                    txn.delete(key, db=db)
                elif call == ADD:
                    txn.put(key, value, overwrite=False, db=db)
                else:
                    txn.cursor(db).putmulti(value)
        self.seconds[self.phase] += time.perf_counter() - start
        self.ops[self.phase] += sum(len(w[3]) if w[0] == PUTMULTI else 1 for w in writes)


class RecordingTxn:
    """Notes every write; reads go to the real transaction without a Python frame."""

    def __init__(self, raw: Raw, txn: lmdb.Transaction) -> None:
        self._raw, self._txn, self._dbs = raw, txn, raw.dbs
        self.writes: list[Write] = []
        self.get, self.stat, self.abort = txn.get, txn.stat, txn.abort

    def put(self, key: bytes, value: bytes, overwrite: bool = True, db: Any = None) -> bool:
        self.writes.append((PUT if overwrite else ADD, self._dbs[id(db)], key, value))
        return bool(self._txn.put(key, value, overwrite=overwrite, db=db))

    def delete(self, key: bytes, db: Any = None) -> bool:
        self.writes.append((DELETE, self._dbs[id(db)], key, None))
        return bool(self._txn.delete(key, db=db))

    def cursor(self, db: Any = None) -> RecordingCursor:
        return RecordingCursor(self, self._txn.cursor(db), self._dbs[id(db)])

    def commit(self) -> None:
        self._txn.commit()
        self._raw.replay(self.writes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._txn, name)


class RecordingCursor:
    """Notes deletes and putmulti; reads go to the real cursor without a Python frame."""

    def __init__(self, txn: RecordingTxn, cursor: lmdb.Cursor, raw_db: Any) -> None:
        self._txn, self._cursor, self._raw_db = txn, cursor, raw_db
        self.set_range, self.set_key, self.first = cursor.set_range, cursor.set_key, cursor.first
        self.key, self.value, self.item = cursor.key, cursor.value, cursor.item

    def delete(self) -> bool:
        self._txn.writes.append((DELETE, self._raw_db, self._cursor.key(), None))
        return bool(self._cursor.delete())

    def putmulti(self, items: list[tuple[bytes, bytes]]) -> tuple[int, int]:
        self._txn.writes.append((PUTMULTI, self._raw_db, None, items))
        consumed, added = self._cursor.putmulti(items)
        return consumed, added

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


@contextlib.contextmanager
def writemap() -> Iterator[None]:
    """Stores opened inside use LMDB's writemap mode."""
    real = lmdb.open
    lmdb.open = functools.partial(real, writemap=True)
    try:
        yield
    finally:
        lmdb.open = real


def run(
    path: Path, args: argparse.Namespace, peak: Peak, raw: tuple[Path, dict[str, bool]] | None
) -> dict[str, Any]:
    """One frontier run: admit everything, then serve it all. With ``raw`` (a path and the
    measured store's flags), record the frontier's writes and replay them there."""
    cfg = config.load(environ={}).replace(
        robots={"enabled": False},
        frontier={"max_depth": 100, "max_urls_per_host": 0, "sync_interval": 3600.0},
        # Every host is of example.com: no cap, so every URL is admitted (the domain rows
        # are kept all the same: their cost is measured).
        scope={"max_hosts_per_domain": 0, "max_pages_per_domain": 0},
        fetch={"threads": args.threads},
    )
    replay = None
    if raw is None:
        f = Frontier.from_config(path, cfg, rng=random.Random(1))
    else:
        with writemap():
            f = Frontier.from_config(path, cfg, rng=random.Random(1))
        replay = Raw(f.store.env, f.store.db, *raw)
        f.store.env = replay
    flags = f.store.env.flags()
    now = 1000.0
    f.store.commit(now)  # the next transaction is the first one measured (with raw, recorded)
    clocks = {phase: Clock() for phase in PHASES}
    ops = {"admit": -f.store.ops}
    for n, batch in enumerate(batches(args.urls, args.hosts, args.batch)):
        with clocks["admit"]:
            f.admit(batch, now)
            f.commit(now)
        if n % 50 == 0:
            peak.sample()
    pending = f.pending
    peak.sample()
    rss_pending = peak.mb
    ops["admit"] += f.store.ops
    ops["cycle"] = -f.store.ops
    if replay is not None:
        replay.phase = "cycle"
    served = turns = 0
    while True:
        with clocks["cycle"]:
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
    with clocks["cycle"]:
        f.close(now)
    ops["cycle"] += f.store.ops
    out = {"pending": pending, "served": served, "rss_pending": rss_pending, "ops": ops,
           "seconds": {phase: clock.seconds for phase, clock in clocks.items()}, "flags": flags}
    if replay is not None:
        replay.env.close()
        out.update(seconds=replay.seconds, ops=replay.ops)
    return out


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
        hive = run(base / "frontier", args, peak, None)
        raw = run(base / "recorded", args, Peak(), (base / "raw", hive["flags"]))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"frontier benchmark: {args.urls:,} URLs over {args.hosts:,} hosts; admit batches of "
          f"{args.batch}, pop_ready + done turns of {args.threads} leases, one commit each")
    print(f"{'phase':<18}{'hive URLs/s':>13}{'raw LMDB URLs/s':>17}{'hive/raw cost':>15}"
          f"{'writes/URL hive':>17}{'raw':>6}")
    for phase, name, urls in (("admit", "admit", args.urls),
                              ("cycle", "pop_ready + done", hive["served"])):
        hive_s, raw_s = hive["seconds"][phase], raw["seconds"][phase]
        print(f"{name:<18}{urls / hive_s:>13,.0f}{urls / raw_s:>17,.0f}{hive_s / raw_s:>14.2f}x"
              f"{hive['ops'][phase] / urls:>17.2f}{raw['ops'][phase] / urls:>6.2f}")
    if (hive["ops"], hive["served"]) != (raw["ops"], raw["served"]):
        print(f"WARNING: the recorded run diverged: {hive['ops']} vs {raw['ops']} writes")
    print(f"pending after admit: {hive['pending']:,}; served: {hive['served']:,}")
    print(f"RssAnon: {start_mb:.0f} MB at start, "
          f"{hive['rss_pending']:.0f} MB with {hive['pending']:,} pending, "
          f"peak {peak.mb:.0f} MB")


if __name__ == "__main__":
    main()
