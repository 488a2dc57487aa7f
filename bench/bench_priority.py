"""Priority benchmark: what a crawl fetches first, on a web where the answer is known.

    python bench/bench_priority.py

serves the power-law web (hive.testweb.powerlaw: 100 hosts x 50 pages, 12 drawn
links a page, in-degree Zipf with exponent 1, 30 % of pages labelled good) on
127.0.0.2 and crawls it with ``hive start --procs N --max-pages`` a tenth of its
pages, for each N of ``--procs`` (2 and 4), three ways in the same run, each on a
fresh data directory:

- ``plain``: the prioritizer's levels only (``priority.inlink_levels = 0``,
  ``score_levels = 0``): depth from the seeds, first come first served within a level;
- ``inlinks``: in-link evidence at the owner (``priority.inlink_levels = 1``; off by
  default), hive.frontier.evidence;
- ``scored``: in-links and the example scorer (``priority.scorer =
  "hive.fetch.scoring:text_quality"``), its scores propagated to the out-links.

Measured at the server (its request log, first GET of each page in order of
arrival, robots.txt aside): **top 1 %**, the share of the 1 % of pages with the most
in-links (distinct linking pages) among the first 10 % fetched; **good**, the share
of labelled-good pages among the first 10 % fetched. Seeds are every host's home.

``--simulate`` also orders the same graph without politeness or processes (a
greedy crawl that always takes the best URL it knows): first come first served,
distinct linking hosts (hive's signal, in its levels), distinct linking pages, and
OPIC cash (each fetched page splits its cash among its out-links), the same two
shares; it is what decided counts over cash (bench/README.md, "Priority").
"""

from __future__ import annotations

import argparse
import heapq
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_crawl import write_config  # noqa: E402

from hive.testweb import Web, serve  # noqa: E402
from hive.testweb.powerlaw import PowerWeb  # noqa: E402

ADDRESS = "127.0.0.2"
MODES: dict[str, dict[str, Any]] = {
    "plain": {"inlink_levels": 0.0, "score_levels": 0.0, "scorer": ""},
    "inlinks": {"inlink_levels": 1.0},
    "scored": {"inlink_levels": 1.0, "scorer": "hive.fetch.scoring:text_quality"},
}


def shares(web: PowerWeb, order: list[int], first: int) -> tuple[float, float]:
    """(top 1 % share, good share) of the first ``first`` pages of ``order``."""
    head = order[:first]
    top = set(web.top(0.01))
    return (len(top.intersection(head)) / len(top),
            sum(web.good(i) for i in head) / max(len(head), 1))


def crawl(web: PowerWeb, procs: int, mode: str, work: Path, args: argparse.Namespace
          ) -> tuple[list[int], float]:
    """Crawl a tenth of the web with hive; the page indexes in the order the server got them."""
    total = web.hosts * web.pages
    with serve(Web(hosts=1, hostile=False), ADDRESS, power=web) as server:
        write_config({
            "dns": {"resolve": [server.resolve], "allow_nets": [f"{ADDRESS}/32"]},
            # every host shares one address: the address limits off (bench_addresses.py)
            "politeness": {"min_delay": args.delay, "max_delay": args.delay,
                           "ip_concurrency": 0},
            "fetch": {"threads": args.threads},
            "scope": {"mode": "any"},
            "priority": MODES[mode],
        }, work / "hive.toml")
        (work / "seeds.txt").write_text("\n".join(web.seeds(server.port)) + "\n")
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "cli", "--config", str(work / "hive.toml"), "start",
             "--procs", str(procs), "--data", str(work / "data"), "--seeds",
             str(work / "seeds.txt"), "--quiet", "--max-pages", str(total // 10)],
            cwd=ROOT, check=False, timeout=args.timeout, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
            env={"HIVE_HIVE__HUNG_AFTER": "3600", "PATH": "/usr/bin:/bin",
                 "PYTHONPATH": str(ROOT)})
        if result.returncode not in (0, 4):  # the batch ended, or --max-pages
            raise SystemExit(f"hive start exited {result.returncode}: {result.stderr[-2000:]}")
        seconds = time.monotonic() - started
        order: dict[int, None] = {}
        for request in sorted(server.requests, key=lambda r: r.start):
            if request.method == "GET" and request.path != "/robots.txt":
                index = web.index_of(request.url)
                if index is not None:
                    order[index] = None
    return list(order), seconds


def simulate(web: PowerWeb, rank: str) -> list[int]:
    """A greedy crawl's order (no politeness): the best known URL first, by ``rank``."""
    total = web.hosts * web.pages
    pages: list[set[int]] = [set() for _ in range(total)]
    hosts: list[set[int]] = [set() for _ in range(total)]
    cash = [0.0] * total
    seq = 0
    heap: list[tuple[float, int, int]] = []
    known: set[int] = set()
    done: list[int] = []

    def key(index: int) -> float:
        if rank == "fifo":
            return 0.0
        if rank == "hosts":  # hive's levels: a level a doubling of linking hosts
            return -math.floor(math.log2(max(len(hosts[index]), 1)))
        if rank == "pages":
            return -len(pages[index])
        return -cash[index]

    def push(index: int) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(heap, (key(index), seq, index))

    for home in range(0, total, web.pages):
        cash[home] = 1.0
        known.add(home)
        push(home)
    fetched: set[int] = set()
    while heap and len(done) < total // 10:
        _, _, index = heapq.heappop(heap)
        if index in fetched:
            continue
        fetched.add(index)
        done.append(index)
        out = web.linked_from(index)
        share = cash[index] / max(len(out), 1)
        cash[index] = 0.0
        for target in out:
            pages[target].add(index)
            hosts[target].add(index // web.pages)
            cash[target] += share
            if target not in fetched:
                known.add(target)
                push(target)  # stale entries are skipped when popped (``fetched``)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", type=int, nargs="*", default=[2, 4])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--links", type=int, default=12)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--delay", type=float, default=0.05, help="per-host delay, seconds")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--simulate", action="store_true")
    args = parser.parse_args()
    web = PowerWeb(seed=args.seed, hosts=args.hosts, pages=args.pages, links=args.links)
    first = web.hosts * web.pages // 10
    print(f"power-law web: {web.hosts} hosts x {web.pages} pages, top 1 % = "
          f"{len(web.top(0.01))} pages, good = "
          f"{sum(web.good(i) for i in range(web.hosts * web.pages))}; first 10 % = {first}")
    if args.simulate:
        print("\nsimulated (greedy, no politeness):\n| order | top 1 % | good |\n|---|---|---|")
        for rank in ("fifo", "hosts", "pages", "opic"):
            top, good = shares(web, simulate(web, rank), first)
            print(f"| {rank} | {top:.2f} | {good:.2f} |")
    print("\n| procs | mode | pages | secs | top 1 % | good |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bench-priority-") as tmp:
        for procs in args.procs:
            for mode in MODES:
                work = Path(tmp) / f"{procs}-{mode}"
                work.mkdir()
                order, seconds = crawl(web, procs, mode, work, args)
                top, good = shares(web, order, first)
                print(f"| {procs} | {mode} | {len(order)} | {seconds:.1f} | {top:.2f} | "
                      f"{good:.2f} |", flush=True)


if __name__ == "__main__":
    main()
