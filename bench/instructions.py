"""Instructions per page: a hive crawl under callgrind, counted after a warm-up.

    python bench/instructions.py [--hosts 10] [--pages 100] [--warmup 100] [--set KEY=VALUE]
                                 [--procs 1] [--own-addresses]

CPU seconds on these shared machines move by 10-15 % between identical runs, so a
change of a few per cent needs many alternating runs to show (bench_crawl.py). An
instruction count does not move with the machine's load: this runs ``hive start
--procs 1`` (``fetch.threads`` 4, the crawl benchmark's 0.02 s delay) under
valgrind's callgrind on a fresh copy of the synthetic web (seed 7, no hostile
hosts) served natively, zeroes every process's counters once the server has
answered ``--warmup`` pages (start-up and imports are left out), and prints, per
process, the instructions it executed per page served after that.

What it measures is the per-page work and, inflated, the per-second work: under
callgrind the crawl runs ~50 times slower, so a process's turns, reports and
timers weigh ~50 times more per page than in a real crawl (the supervisor's row
is mostly that). Compare one commit with another by running this in each
checkout (``PYTHONPATH`` at it); bench/README.md has a series. Needs valgrind
(Debian's ``valgrind``); takes 2-4 minutes. ``--set`` (repeatable) passes a config
override to ``hive start``, to compare a setting on and off in one checkout, e.g.
``--set 'outputs.sinks=["hive.fetch.warc_sink:build","hive.fetch.text_sink:build"]'``.
``--own-addresses`` serves each host at an address of its own (127.0.1.x, as
bench_addresses.py's own workload; ``ip_min_delay`` the host delay), so that
``--procs 2 --own-addresses --set politeness.ip_concurrency=2`` against ``=0`` is
the cost of the address limits' asks and grants between workers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hive.storage.datadir import DataDir
from hive.testweb import Web, WebProcess

ROOT = Path(__file__).resolve().parents[1]
ADDRESS = "127.0.0.2"
DELAY = 0.02


def _totals(path: Path) -> int | None:
    """The instructions a callgrind output file counts (None if it has no total line)."""
    match = re.search(r"^(?:totals|summary): (\d+)", path.read_text(errors="replace"), re.M)
    return int(match.group(1)) if match else None


def _zero(out_dir: Path) -> None:
    """Zero the counters of every process valgrind runs for this measurement."""
    listing = subprocess.run(["pgrep", "-f", f"callgrind-out-file={out_dir}"],
                             capture_output=True, text=True).stdout.split()
    for pid in listing:
        subprocess.run(["callgrind_control", "-z", pid], capture_output=True, timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--pages", type=int, default=100, help="pages per host")
    parser.add_argument("--warmup", type=int, default=100, help="pages before counting")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--procs", type=int, default=1)
    parser.add_argument("--own-addresses", action="store_true",
                        help="each host at an address of its own")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE", help="a config override for hive start")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind is not installed (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="hive-instructions-"))
    # The crawl benchmark's web: its Crawl-delay host at twice the delay.
    web = Web(seed=7, hosts=args.hosts, pages=args.pages, hostile=False,
              robots_crawl_delay=2 * DELAY)
    placed = {name: f"127.0.{1 + i // 250}.{1 + i % 250}" for i, name in enumerate(web.names)}
    also = tuple(sorted(set(placed.values()))) if args.own_addresses else ()
    with WebProcess(web, work / "requests.jsonl", host=ADDRESS, also=also) as server:
        (work / "seeds.txt").write_text("".join(f"{url}\n" for url in web.seeds(server.port)))
        resolve = ([f"{name}={address}" for name, address in placed.items()]
                   if args.own_addresses else [server.resolve])
        nets = [f"{address}/32" for address in (*also, ADDRESS)]
        (work / "hive.toml").write_text(
            f"[dns]\nresolve = {json.dumps(resolve)}\nallow_nets = {json.dumps(nets)}\n"
            f"[politeness]\nmin_delay = {DELAY}\nmax_delay = {DELAY}\ncrawl_delay_cap = 1.0\n"
            # every host shares one address: the address limits off (bench_addresses.py),
            # unless --set turns them on
            f"ip_concurrency = 0\nip_min_delay = {DELAY}\n"
            "[robots]\nretry_delay = 0.5\ntries = 2\n[fetch]\nthreads = 4\n"
            # Under callgrind on a loaded machine a worker can take minutes to send its
            # first report: at the default 60 s the supervisor kills it as hung, forever.
            "[hive]\nhung_after = 3600.0\n"
        )
        out_dir = work / "callgrind"
        out_dir.mkdir()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        hive = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--trace-children=yes",
             f"--callgrind-out-file={out_dir}/cg.%p", os.path.realpath(sys.executable),
             "-m", "cli", "--config", str(work / "hive.toml"), "start", "--procs", str(args.procs),
             "--data", str(work / "data"), "--seeds", str(work / "seeds.txt"), "--quiet",
             *(arg for item in args.overrides for arg in ("--set", item))],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + args.timeout
        try:
            while len(pages(server)) < args.warmup and hive.poll() is None:
                if time.monotonic() > deadline:
                    raise TimeoutError("no warm-up before the timeout")
                time.sleep(0.5)
            counted_from = len(pages(server))
            _zero(out_dir)
            hive.wait(max(1.0, deadline - time.monotonic()))
        except (TimeoutError, subprocess.TimeoutExpired) as exc:
            hive.send_signal(signal.SIGTERM)
            hive.wait(120)
            print(f"gave up: {exc}", file=sys.stderr)
            return 1
        counted = len(pages(server)) - counted_from
    state = DataDir(work / "data").read_state() or {}
    roles = {pid: name for name, pid in (state.get("pids") or {}).items()}
    roles[hive.pid] = "supervisor"  # valgrind execs the interpreter in its own process
    print(f"pages counted: {counted} (after {counted_from}); exit {hive.returncode}")
    print(f"{'process':<12} {'instructions per page':>22}")
    for path in sorted(out_dir.glob("cg.*")):
        pid = int(path.name.split(".")[1])
        total = _totals(path)
        if pid in roles and total is not None and counted:
            print(f"{roles[pid]:<12} {total // counted:>22,}")
    if args.keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def pages(server: WebProcess) -> list[object]:
    """The page GETs the server has answered so far (robots.txt left out)."""
    return [r for r in server.requests if r.method == "GET" and r.path != "/robots.txt"]


if __name__ == "__main__":
    sys.exit(main())
