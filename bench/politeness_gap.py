"""The politeness gap at the server, by the handler's stamps and by the kernel's.

    python bench/politeness_gap.py [--delay 0.02] [--burners 2] [--hosts 6] [--pages 150]

Crawls the synthetic web (no hostile hosts unless ``--hostile``) with one worker
at a fixed delay while ``--burners`` CPU-bound processes load the machine, then
measures every gap between successive requests to a host twice: from the
handler's ``time.time()`` stamps (``end`` to the next ``start``) and from the
kernel's (``sent`` to the next ``arrived``, hive/testweb/stamps.py). Prints how
many gaps fall short of the delay by each, and how late the handler stamped.
Issue 27's short gaps were the handler's lateness: the kernel's never fall short.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from hive import config
from hive.procs.worker import Worker
from hive.testweb import Web, WebProcess
from hive.testweb.requestlog import Request

ADDRESS = "127.0.0.2"


def crawl(work: Path, args: argparse.Namespace) -> list[Request]:
    web = Web(seed=1, hosts=args.hosts, pages=args.pages, links=8, hostile=args.hostile)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(args.burners)]
    try:
        with WebProcess(web, work / "requests.jsonl", host=ADDRESS) as server:
            cfg = config.load(environ={}).replace(
                dns={"resolve": [server.resolve], "allow_nets": [f"{ADDRESS}/32"]},
                politeness={"min_delay": args.delay, "max_delay": args.delay,
                            "delay_factor": 0.0, "ip_concurrency": 0},
                fetch={"threads": 8, "connect_timeout": 1.0, "read_timeout": 1.0,
                       "total_timeout": 2.0},
                frontier={"max_urls_per_host": 10_000}, warc={"enabled": False},
            )
            worker = Worker(cfg, work / "store", log_dir=work)
            try:
                worker.add(server.seeds(), time.time())
                worker.run_until_idle(3600.0)
                sent = worker.stats()["fetch/requests"]
            finally:
                worker.close()
            deadline = time.monotonic() + 10
            while len(server.requests) < sent and time.monotonic() < deadline:
                time.sleep(0.1)
            return server.requests
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def report(name: str, gaps: list[float], delay: float) -> None:
    gaps.sort()
    short = sum(gap < delay for gap in gaps)
    very = sum(gap < delay - 0.001 for gap in gaps)
    print(f"{name}: {len(gaps)} gaps, shortest {gaps[0] * 1e3:.3f} ms, "
          f"{short} under the delay, {very} more than 1 ms under")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.02)
    parser.add_argument("--burners", type=int, default=2)
    parser.add_argument("--hosts", type=int, default=6)
    parser.add_argument("--pages", type=int, default=150)
    parser.add_argument("--hostile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        requests = crawl(Path(tmp), args)
    by_host: dict[str, list[Request]] = defaultdict(list)
    for request in requests:
        by_host[request.hostname].append(request)
    kernel: list[float] = []
    handler: list[float] = []
    for records in by_host.values():
        records.sort(key=lambda r: r.received)
        for before, after in zip(records, records[1:], strict=False):
            kernel.append(after.received - before.finished)
            handler.append(after.start - before.end)
    unstamped = sum(r.arrived is None or r.sent is None for r in requests)
    print(f"{len(requests)} requests at a {args.delay:g} s delay, {args.burners} burners; "
          f"{unstamped} without the kernel's stamps")
    report("kernel's stamps", kernel, args.delay)
    report("handler's stamps", handler, args.delay)
    late = sorted(r.end - r.sent for r in requests if r.sent is not None)
    print(f"handler's end after the kernel's sent: median {late[len(late) // 2] * 1e3:.3f} ms, "
          f"max {late[-1] * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
