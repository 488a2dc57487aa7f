"""Crawl benchmark: hive against the synthetic web on loopback, measured at the server.

    python bench/bench_crawl.py [--hosts 200] [--pages 50] [--procs 1 2 4] [--delay 0.05]

For each --procs it starts the synthetic web (hive.testweb, in a process of its
own, every host name resolved to 127.0.0.2 with --resolve), runs ``hive start``
to the end of the batch, and prints one row: pages/s in the steady state
(between the 10th and 90th percentile of page arrivals at the server),
crawler CPU-seconds per 1000 pages (user + sys of every hive process, from
start to exit), peak RSS per process, politeness violations and in-scope pages
never fetched (lost), both measured at the server, and pages fetched twice.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from hive import config
from hive.testweb import Web, WebProcess, duplicates, politeness_violations

ROOT = Path(__file__).resolve().parents[1]
ADDRESS = "127.0.0.2"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def write_config(sections: dict[str, dict[str, Any]], path: Path) -> None:
    cfg = config.load(environ={}).replace(**sections)
    lines = []
    for section, values in cfg.to_dict().items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    path.write_text("\n".join(lines) + "\n")


class PeakRss:
    """Samples the RSS of every process of the hive until stopped."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.peak: dict[str, float] = {}
        self.status: str = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            parent = psutil.Process(self.root)
        except psutil.Error:
            return
        while not self._stop.wait(0.5):
            try:
                procs = [parent, *parent.children(recursive=True)]
            except psutil.Error:
                return
            for proc in procs:
                try:
                    name = " ".join(proc.cmdline()[-3:])[-40:]
                    rss = proc.memory_info().rss / 2**20
                except psutil.Error:
                    continue
                self.peak[name] = max(self.peak.get(name, 0.0), rss)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run(args: argparse.Namespace, procs: int, base: Path) -> dict[str, Any]:
    web = Web(seed=7, hosts=args.hosts, pages=args.pages, hostile=False,
              robots_crawl_delay=args.delay)
    work = base / f"procs-{procs}"
    work.mkdir()
    with WebProcess(web, work / "requests.jsonl", host=ADDRESS) as server:
        (work / "seeds.txt").write_text("\n".join(server.seeds()) + "\n")
        write_config({
            "dns": {"resolve": [server.resolve], "allow_nets": [f"{ADDRESS}/32"]},
            "politeness": {"min_delay": args.delay, "max_delay": max(args.delay, 1.0),
                           "crawl_delay_cap": max(args.delay, 1.0)},
            "robots": {"retry_delay": 0.5, "tries": 2},
            "fetch": {"threads": args.threads},
        }, work / "hive.toml")
        command = [sys.executable, "-m", "cli", "--config", str(work / "hive.toml"), "start",
                   "--procs", str(procs), "--data", str(work / "data"), "--seeds",
                   str(work / "seeds.txt"), "--quiet"]
        cpu_before = children_cpu()
        started = time.time()
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, env={**os.environ})
        rss = PeakRss(process.pid)
        status = ""
        while process.poll() is None:
            time.sleep(1.0)
            if not status and time.time() - started > args.status_after:
                status = subprocess.run(
                    [sys.executable, "-m", "cli", "status", "--data", str(work / "data")],
                    cwd=ROOT, capture_output=True, text=True, timeout=30).stdout
        elapsed = time.time() - started
        rss.stop()
        cpu = children_cpu() - cpu_before
        requests = server.requests
    pages = [r for r in requests if r.method == "GET" and r.path != "/robots.txt"]
    arrivals = sorted(r.end for r in pages)
    lo, hi = arrivals[len(arrivals) // 10], arrivals[len(arrivals) * 9 // 10]
    steady = (len(arrivals) * 8 // 10) / (hi - lo) if hi > lo else 0.0
    gaps = dict.fromkeys(web.names, args.delay)
    gaps.update(web.crawl_delay)
    fetched = {r.url for r in pages}
    return {
        "procs": procs, "pages": len(pages), "seconds": elapsed, "pages_per_s": steady,
        "cpu_per_1000": 1000 * cpu / max(len(pages), 1), "exit": process.returncode,
        "peak_rss": max(rss.peak.values(), default=0.0),
        "violations": len(politeness_violations(requests, gaps, tolerance=0.01)),
        "lost": len(server.in_scope_urls() - fetched),
        "twice": sum(n - 1 for n in duplicates(requests).values()), "status": status,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--pages", type=int, default=50, help="pages per host")
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--threads", type=int, default=8, help="fetch threads per worker")
    parser.add_argument("--delay", type=float, default=0.05, help="politeness delay per host")
    parser.add_argument("--status-after", type=float, default=8.0,
                        help="take a `hive status` snapshot after this many seconds")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hive-bench-crawl-"))
    rows = [run(args, procs, base) for procs in args.procs]
    print(f"crawl benchmark: {args.hosts} hosts x {args.pages} pages, {args.delay:g}s delay, "
          f"{args.threads} fetch threads per worker; {os.cpu_count()} cores; data in {base}")
    print(f"{'crawler':<12}{'pages':>7}{'secs':>7}{'pages/s':>9}{'CPU-s/1000':>12}"
          f"{'peak RSS MB':>12}{'violations':>11}{'lost':>6}{'twice':>7}{'exit':>6}")
    for row in rows:
        print(f"{'hive -p ' + str(row['procs']):<12}{row['pages']:>7}{row['seconds']:>7.1f}"
              f"{row['pages_per_s']:>9.0f}{row['cpu_per_1000']:>12.2f}{row['peak_rss']:>12.0f}"
              f"{row['violations']:>11}{row['lost']:>6}{row['twice']:>7}{row['exit']:>6}")
    for row in rows:
        if row["status"]:
            print(f"\nhive status during the --procs {row['procs']} run:\n{row['status']}")


if __name__ == "__main__":
    main()
