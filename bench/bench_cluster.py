"""Cluster mode against one machine: start-up, memory per node, and crawl throughput.

    python bench/bench_cluster.py [--machines 4] [--hosts 48] [--pages 20] [--delay 0.05]

In one run, on the same synthetic web (served on 127.0.0.2 in a process of its
own), it crawls twice with the same number of workers:

- **one hive**: ``hive start --procs N`` (N = ``--machines``);
- **cluster**: a simulated Ray cluster of N nodes on loopback
  (bench/cluster_sim.py, started before the clock runs, as an existing cluster
  would be) and ``hive start --cluster ADDRESS --procs 1``: one worker per
  machine, each machine with its own supervisor, splitter and data directory.

It prints, for each: start-up (from ``hive start`` to every worker's first
report, read with ``hive status``), the resident memory of hive's processes per
node (one machine: supervisor, splitter and workers; cluster: each machine's
node actor, supervisor, splitter and worker, and apart, each Ray node's own
raylet), and the crawl's pages per second (pages over the time from the first
request to the last, at the server). A bench prints; it does not pass or fail.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from hive.testweb import Web, WebProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_sim import RAY_ENV, SimCluster  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ADDRESS = "127.0.0.2"


def settings(server: WebProcess, delay: float, extra: dict[str, Any]) -> list[str]:
    sections: dict[str, dict[str, Any]] = {
        "dns": {"resolve": [server.resolve], "allow_nets": [f"{ADDRESS}/32"]},
        # the web's hosts share one address: its limits would bound both ways alike
        "politeness": {"min_delay": delay, "max_delay": delay, "ip_concurrency": 0},
        "robots": {"retry_delay": 0.2, "tries": 2},
        "hive": {"stats_interval": 0.5},
        **extra,
    }
    return [item for section, values in sections.items() for key, value in values.items()
            for item in ("-s", f"{section}.{key}={json.dumps(value)}")]


def rss_mb(processes: list[psutil.Process]) -> float:
    total = 0
    for proc in processes:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total / 2**20


def run(kind: str, server: WebProcess, work: Path, args: argparse.Namespace,
        address: str | None) -> dict[str, Any]:
    data = work / kind
    seeds = work / "seeds.txt"
    seeds.write_text("\n".join(server.seeds()) + "\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), **RAY_ENV}
    base = [sys.executable, "-m", "cli",
            *settings(server, args.delay, {"cluster": {"port": 23100}} if address else {})]
    extra = ["--cluster", address, "--procs", "1"] if address else [
        "--procs", str(args.machines)]
    before = len(server.requests)
    started = time.monotonic()
    process = subprocess.Popen([*base, "start", "--data", str(data), "--seeds", str(seeds),
                                "--quiet", *extra], env=env, cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    startup = None
    memory: list[float] = []
    while process.poll() is None:
        result = subprocess.run([*base, "status", "--json", "--data", str(data)], env=env,
                                cwd=ROOT, capture_output=True, text=True)
        if result.returncode == 0:
            status = json.loads(result.stdout)
            workers = [p for p in status["processes"] if "stats" in p]
            if startup is None and len(workers) == args.machines:
                startup = time.monotonic() - started
                memory = node_memory(kind, data, process, args.machines)
        time.sleep(0.2)
    requests = server.requests[before:]
    arrivals = sorted(r.received for r in requests)
    pages = sum(1 for r in requests if r.method == "GET" and not r.path.endswith("robots.txt"))
    span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else float("nan")
    return {"kind": kind, "code": process.returncode, "startup": startup, "memory": memory,
            "pages": pages, "pages_per_s": pages / span}


def node_memory(kind: str, data: Path, process: subprocess.Popen[bytes],
                machines: int) -> list[float]:
    """hive's resident MB per node."""
    if kind == "one":
        tree = psutil.Process(process.pid)
        return [rss_mb([tree, *tree.children(recursive=True)])]
    out = []
    for state_file in sorted((data / "nodes").glob("*/hive.json")):
        supervisor = psutil.Process(json.loads(state_file.read_text())["pid"])
        out.append(rss_mb([supervisor.parent(), supervisor,
                           *supervisor.children(recursive=True)]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machines", type=int, default=4)
    parser.add_argument("--hosts", type=int, default=48)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--delay", type=float, default=0.05)
    args = parser.parse_args()
    names = [chr(ord("a") + i) for i in range(args.machines)]
    with tempfile.TemporaryDirectory(prefix="hive-bench-cluster-") as tmp:
        work = Path(tmp)
        web = Web(seed=11, hosts=args.hosts, pages=args.pages, hostile=False)
        with WebProcess(web, work / "requests.jsonl", host=ADDRESS) as server:
            one = run("one", server, work, args, None)
            t0 = time.monotonic()
            cluster = SimCluster(names)
            ray_start = time.monotonic() - t0
            try:
                raylets = [p for p in psutil.Process().children(recursive=True)
                           if p.name() == "raylet"]
                raylet_mb = statistics.mean(rss_mb([p]) for p in raylets) if raylets else 0
                many = run("cluster", server, work, args, cluster.address)
            finally:
                cluster.shutdown()
    print(f"{args.machines} workers, {args.hosts} hosts x {args.pages} pages, "
          f"delay {args.delay:g}s; Ray cluster of {args.machines} nodes up in {ray_start:.1f}s "
          f"(raylet {raylet_mb:.0f} MB per node)")
    print(f"{'':10} {'exit':>4} {'start-up s':>10} {'MB per node':>16} {'pages':>6} "
          f"{'pages/s':>8}")
    for row in (one, many):
        memory = "/".join(f"{m:.0f}" for m in row["memory"])
        startup = f"{row['startup']:.1f}" if row["startup"] is not None else "-"
        print(f"{row['kind']:10} {row['code']:>4} {startup:>10} {memory:>16} {row['pages']:>6} "
              f"{row['pages_per_s']:>8.1f}")
    print(f"cluster / one: {many['pages_per_s'] / one['pages_per_s']:.2f}x pages/s")


if __name__ == "__main__":
    main()
