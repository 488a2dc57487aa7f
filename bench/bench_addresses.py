"""What politeness per IP address costs, and what it does at a shared server.

    python bench/bench_addresses.py [--hosts 100] [--pages 30] [--pairs 3] [--procs 2]
                                    [--shared-hosts 200] [--shared-pages 2]

Two workloads, each crawled by ``hive start`` in a subprocess against the test web
in a process of its own (hive.testweb, listening at every address used):

- **own**: every host at an address of its own (127.0.1.x), a 0.02 s host delay;
  crawled ``--pairs`` times with the address limits on (``ip_concurrency`` as in
  conf/default.toml, ``ip_min_delay`` the host delay, so that the limits never
  bind: one host is one request at a time, its delay apart) and off
  (``politeness.ip_concurrency = 0``), alternating, so the ratio of each pair is
  measured on the same machine in the same minutes. The limits should cost
  nothing here: pages/s and CPU seconds per 1,000 pages (every process of the
  hive, the server not) on/off, median of the pairs and their range.
- **shared**: ``--shared-hosts`` hosts at one address (127.0.0.3), the default
  politeness settings and ``--procs 4``, as in issue 28 (200 hosts, one start per
  host per second each): before (limits off) and after (the defaults). At the
  server: the most requests arriving within one second at the address, the most
  in flight at once there, the pages/s, and how close the requests/s come to the
  bound ``1 / ip_min_delay``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench_crawl import ROOT, run_child, steady_rate, write_config

from hive import config
from hive.testweb import Web, WebProcess
from hive.testweb.requestlog import Request, busiest_second

SHARED = "127.0.0.3"
SEED = 11


def own_address(i: int) -> str:
    return f"127.0.{1 + i // 250}.{1 + i % 250}"


def peak_in_flight(requests: Iterable[Request]) -> int:
    events = sorted([(r.received, 1) for r in requests] + [(r.finished, -1) for r in requests])
    flying = peak = 0
    for _, step in events:
        flying += step
        peak = max(peak, flying)
    return peak


def crawl(work: Path, web: Web, placed: dict[str, str], procs: int,
          sections: dict[str, dict[str, Any]], timeout: float) -> dict[str, float]:
    """One crawl to its end; its figures at the server and its CPU."""
    work.mkdir(parents=True)
    addresses = sorted(set(placed.values()))
    with WebProcess(web, work / "requests.jsonl", host="127.0.0.2",
                    also=tuple(addresses)) as server:
        (work / "seeds.txt").write_text("\n".join(server.seeds()) + "\n")
        sections = {**sections, "dns": {
            "resolve": [f"{name}={address}" for name, address in placed.items()],
            "allow_nets": [f"{address}/32" for address in addresses]}}
        write_config(sections, work / "hive.toml")
        command = [sys.executable, "-m", "cli", "--config", str(work / "hive.toml"), "start",
                   "--procs", str(procs), "--data", str(work / "data"), "--seeds",
                   str(work / "seeds.txt"), "--quiet"]
        child = run_child(command, work, timeout, None)
        requests = server.requests
    pages = [r for r in requests if r.method == "GET" and r.path != "/robots.txt"]
    span = max(r.received for r in requests) - min(r.received for r in requests)
    return {
        "pages": len(pages), "secs": child.seconds, "pages/s": steady_rate(r.end for r in pages),
        "requests/s": len(requests) / span if span > 0 else 0.0,
        "cpu/1k": 1000 * child.cpu / max(len(pages), 1),
        "busiest": max(busiest_second(requests).values()), "in flight": peak_in_flight(requests),
        "exit": child.exit,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--shared-hosts", type=int, default=200)
    parser.add_argument("--shared-pages", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--skip-shared", action="store_true", help="the own workload only")
    args = parser.parse_args()
    defaults = config.load(environ={}).politeness
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        web = Web(seed=SEED, hosts=args.hosts, pages=args.pages, hostile=False)
        placed = {name: own_address(i) for i, name in enumerate(web.names)}
        fast = {"min_delay": 0.02, "max_delay": 0.02, "crawl_delay_cap": 1.0}
        print(f"== own: {args.hosts} hosts x {args.pages} pages, each host at its own "
              f"address, --procs {args.procs}, {args.threads} threads, 0.02 s host delay")
        rows: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
        for pair in range(args.pairs):
            for label, concurrency in (("on", defaults.ip_concurrency), ("off", 0)):
                print(f"own {label} {pair} ...", file=sys.stderr, flush=True)
                rows[label].append(crawl(
                    base / f"own-{label}-{pair}", web, placed, args.procs,
                    {"politeness": {**fast, "ip_concurrency": concurrency,
                                    "ip_min_delay": fast["min_delay"]},
                     "fetch": {"threads": args.threads}}, args.timeout))
        for label, runs in rows.items():
            for run in runs:
                print(f"limits {label:<4} pages {run['pages']:>6.0f}  secs {run['secs']:>6.1f}  "
                      f"pages/s {run['pages/s']:>7.1f}  CPU-s/1k {run['cpu/1k']:>5.2f}  "
                      f"exit {run['exit']:.0f}")
        pairs = list(zip(rows["on"], rows["off"], strict=True))
        rates = sorted(on["pages/s"] / off["pages/s"] for on, off in pairs)
        cpus = sorted(on["cpu/1k"] / off["cpu/1k"] for on, off in pairs)
        print(f"on/off, median of {args.pairs} pairs: pages/s {statistics.median(rates):.3f}x "
              f"({rates[0]:.2f}-{rates[-1]:.2f}), CPU-s per 1000 pages "
              f"{statistics.median(cpus):.3f}x ({cpus[0]:.2f}-{cpus[-1]:.2f})")

        if args.skip_shared:
            return
        shared = Web(seed=SEED, hosts=args.shared_hosts, pages=args.shared_pages, hostile=False)
        placed = dict.fromkeys(shared.names, SHARED)
        bound = 1 / defaults.ip_min_delay
        print(f"\n== shared: {args.shared_hosts} hosts x {args.shared_pages} pages at one "
              f"address, default politeness, --procs 4 (bound: ip_concurrency "
              f"{defaults.ip_concurrency}, {bound:.0f} starts/s)")
        for label, concurrency in (("before (off)", 0), ("after (on)", defaults.ip_concurrency)):
            print(f"shared {label} ...", file=sys.stderr, flush=True)
            run = crawl(base / f"shared-{concurrency}", shared, placed, 4,
                        {"politeness": {"ip_concurrency": concurrency}}, args.timeout)
            print(f"{label:<13} pages {run['pages']:>5.0f}  secs {run['secs']:>6.1f}  "
                  f"busiest second {run['busiest']:>4.0f} starts  most in flight "
                  f"{run['in flight']:>3.0f}  requests/s {run['requests/s']:>6.2f} "
                  f"({run['requests/s'] / bound:.0%} of the bound)  exit {run['exit']:.0f}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
