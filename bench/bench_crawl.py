"""Crawl benchmark: hive, a plain Scrapy spider and a bare fetch loop on one synthetic web.

    python bench/bench_crawl.py

is the whole run: both workloads, one after the other, each crawled by hive
``--procs 1``, hive ``--procs 2``, Scrapy and the bare loop, with one table per
workload. Options: ``--workload {unbound,bound,both}``; ``--hosts``, ``--pages``
and ``--delay`` replace the selected workloads' values; ``--procs 1 2`` (hive
rows), ``--threads 4`` (fetch threads per hive worker), ``--skip-scrapy``,
``--skip-bare``, ``--timeout 900`` (seconds per crawler; a crawler that runs
over is stopped warmly, then killed, and the row says so).

**Workloads.** ``unbound``: 200 hosts × 100 pages, 0.02 s per-host delay;
politeness would allow ~10,000 pages/s, far beyond two cores, so CPU is the
limit. ``bound``: 10 hosts × 30 pages, 0.5 s delay; the delays are the limit,
and steady pages/s should reach it: Σ 1/gap over the hosts a polite crawler
may crawl (hosts ÷ delay, less the robots-500 host, the Crawl-delay host at its
own gap), printed above the table.

**The web.** Every crawler gets a fresh copy (hive.testweb's ``Web``, seed 7,
no hostile hosts, served by ``WebProcess`` in a process of its own on
127.0.0.2; every host name resolves there), so the 503 robots.txt answers 503
to each crawler's first request. Its robots.txt variants are in play: a host
with ``Crawl-delay`` (twice the delay), one whose robots.txt answers 500 (must
not be crawled), one 503 then 200 (wait, then crawl), one 404 (private pages
in scope), one with a BOM.

**Rows**, each crawler a child process of this one:

- ``hive -p N``: ``hive start --procs N`` to the end of the batch, ``fetch.threads``
  = ``--threads``, the per-host delay fixed at the workload's (``min_delay`` =
  ``max_delay``, so it is Scrapy's DOWNLOAD_DELAY, not 10× the download time),
  robots.txt retried after 0.5 s. hive's bytecode is compiled before the first
  row, as an installed package's is.
- ``scrapy X``: ``bench/scrapy_crawl.py``, a plain spider following every
  ``<a href>``: ROBOTSTXT_OBEY, CONCURRENT_REQUESTS_PER_DOMAIN 1, DOWNLOAD_DELAY
  the same delay without jitter, CONCURRENT_REQUESTS 64, CLOSESPIDER_TIMEOUT
  ``--timeout``. "not installed" when ``import scrapy`` fails.
- ``bare 1p x 4t``: ``bench/bare_crawl.py``, one process of four threads GETting
  the web's in-scope URLs (known in advance) over keep-alive ``http.client``
  connections, links extracted with selectolax and joined with urljoin; no
  frontier, robots.txt, politeness or storage. The floor of fetching and
  parsing; its politeness column counts what having none costs.

**Columns**, all but secs and CPU measured at the server:

- ``pages``: page requests (GET, robots.txt excluded); ``secs``: wall time of
  the crawler from start to exit;
- ``pages/s``: steady rate, pages between the 10th and 90th percentile of their
  arrivals over the time between them; ``%limit``: that, as a share of the
  politeness limit;
- ``CPU-s/1k``: user + sys CPU seconds of every process of the crawler from
  start to exit (``getrusage(RUSAGE_CHILDREN)`` around it: hive's supervisor,
  splitter and workers included; the web server and the ``hive status``
  snapshot not), per 1000 pages;
- ``RSS MB``: the largest peak RSS of any one process of the crawler (sampled
  every 0.2 s; for Scrapy and bare also as each process reports it at exit);
- ``polite``: politeness violations, ``politeness_violations`` with each host's
  gap (the delay; the Crawl-delay on that host) and 10 ms of tolerance: a
  request that starts while another to its host is in flight, or sooner than
  the gap after the last one ended. For hive rows a response ends at the
  earlier of the server's stamp and the time hive's crawl log says it had the
  response (``hive.testweb.as_received``): a busy server stamps late, never early;
- ``robots``: robots.txt violations, requests for a URL robots.txt disallows
  (``Web.disallowed_urls``: private pages, every page of the robots-500 host),
  and page requests to a host whose last robots.txt answer was 429 or 5xx (bare
  asks for no robots.txt but fetches only in-scope pages, so it has none);
- ``lost``: in-scope pages never fetched; ``twice``: extra fetches of pages
  fetched more than once; ``exit``: the crawler's exit status.

Under each table: hive -p (largest N) / Scrapy for CPU-s per 1000 pages and
pages/s, each hive row / bare for CPU-s per 1000 pages, and the ``hive
status`` snapshot taken during the hive run with the largest N, once a third
of the pages had arrived.
"""

from __future__ import annotations

import argparse
import compileall
import importlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psutil

from hive import config
from hive.storage.datadir import DataDir
from hive.testweb import (
    Request,
    Web,
    WebProcess,
    as_received,
    duplicates,
    politeness_violations,
    received,
)

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
ADDRESS = "127.0.0.2"
SEED = 7
CRAWL_DELAY_FACTOR = 2.0  # the Crawl-delay host's gap, in delays
TOLERANCE = 0.01  # seconds of each politeness rule forgiven, for clock granularity
SCRAPY_CONCURRENCY = 64
BARE_PROCS, BARE_THREADS = 1, 4
STOP_GRACE = 30.0  # seconds between the warm stop of an overrunning crawler and SIGKILL
COLUMNS = (
    ("pages", 7), ("secs", 7), ("pages/s", 9), ("%limit", 8), ("CPU-s/1k", 10), ("RSS MB", 8),
    ("polite", 8), ("robots", 8), ("lost", 7), ("twice", 7), ("exit", 6),
)


@dataclass(frozen=True, slots=True)
class Workload:
    """A web's size and per-host delay; its Crawl-delay host waits CRAWL_DELAY_FACTOR delays."""

    name: str
    hosts: int
    pages: int
    delay: float
    copies: int = 0  # copy pages per host, of one body on every host (revisit records)

    def web(self) -> Web:
        return Web(seed=SEED, hosts=self.hosts, pages=self.pages, hostile=False,
                   robots_crawl_delay=CRAWL_DELAY_FACTOR * self.delay, copies=self.copies)


WORKLOADS = {
    "unbound": Workload("unbound", hosts=200, pages=100, delay=0.02),
    "bound": Workload("bound", hosts=10, pages=30, delay=0.5),
    "copies": Workload("copies", hosts=200, pages=100, delay=0.02, copies=20),
}


@dataclass(slots=True)
class Row:
    """One crawler's line of a table; ``exit`` None: it did not run."""

    kind: str  # hive, scrapy or bare
    label: str
    procs: int = 0
    pages: int = 0
    seconds: float = 0.0
    pages_per_s: float = 0.0
    limit_share: float = 0.0
    cpu_per_1000: float = 0.0
    peak_rss: float = 0.0
    polite: int = 0
    robots: int = 0
    lost: int = 0
    twice: int = 0
    exit: int | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class Child:
    """What running one crawler as a child process gave."""

    exit: int
    seconds: float
    cpu: float
    peak_rss: float
    report: dict[str, Any]
    timed_out: bool
    status: str


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def write_config(sections: dict[str, dict[str, Any]], path: Path) -> None:
    """The default configuration with ``sections`` replaced, as a TOML file."""
    cfg = config.load(environ={}).replace(**sections)
    lines = []
    for section, values in cfg.to_dict().items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    path.write_text("\n".join(lines) + "\n")


def gaps(web: Web, delay: float) -> dict[str, float]:
    """host -> the least time a polite crawler leaves between two requests to it."""
    return {**dict.fromkeys(web.names, delay), **web.crawl_delay}


def politeness_limit(web: Web, delay: float) -> float:
    """Pages/s with every crawlable host fetched once per gap (the robots-500 host is not)."""
    return sum(1 / gap for host, gap in gaps(web, delay).items() if web.robots[host] != "error")


def steady_rate(arrivals: Iterable[float]) -> float:
    """Pages/s between the 10th and 90th percentile of the arrival times."""
    times = sorted(arrivals)
    lo, hi = len(times) // 10, len(times) * 9 // 10
    if hi <= lo or times[hi] <= times[lo]:
        return 0.0
    return (hi - lo) / (times[hi] - times[lo])


def robots_violations(requests: Iterable[Request], disallowed: set[str]) -> int:
    """Page requests robots.txt forbids at the time they start.

    A disallowed URL, or any page of a host whose last robots.txt answer
    (ended before the request started) was 429 or 5xx: RFC 9309 makes such a
    robots.txt "unreachable", so the host is fully disallowed until it answers.
    """
    events: list[tuple[float, bool, Request]] = []
    for request in requests:
        is_robots = request.path == "/robots.txt"
        events.append((request.end if is_robots else request.start, is_robots, request))
    events.sort(key=lambda event: event[0])
    unreachable: dict[str, bool] = {}
    count = 0
    for _, is_robots, request in events:
        if is_robots:
            unreachable[request.hostname] = request.status == 429 or request.status >= 500
        elif request.url in disallowed or unreachable.get(request.hostname, False):
            count += 1
    return count


class PeakRss:
    """Samples the RSS of a process and its descendants until stopped; keeps each one's peak."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.peaks: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            parent = psutil.Process(self.root)
        except psutil.Error:
            return
        while True:
            try:
                procs = [parent, *parent.children(recursive=True)]
            except psutil.Error:
                return
            for proc in procs:
                try:
                    rss = proc.memory_info().rss / 2**20
                except psutil.Error:
                    continue
                self.peaks[proc.pid] = max(self.peaks.get(proc.pid, 0.0), rss)
            if self._stop.wait(0.2):
                return

    def stop(self) -> float:
        """Stop sampling; the largest peak of any one process (MB)."""
        self._stop.set()
        self._thread.join()
        return max(self.peaks.values(), default=0.0)


class LogLines:
    """Counts the lines of a growing request log, reading only what was added."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.lines = 0

    def count(self) -> int:
        if self.path.exists():
            with self.path.open("rb") as log:
                log.seek(self.offset)
                data = log.read()
            self.offset += len(data)
            self.lines += data.count(b"\n")
        return self.lines


def stop(process: subprocess.Popen[bytes]) -> bool:
    """Stop ``process`` if it still runs: warmly (SIGTERM), then SIGKILL. True if it ran."""
    if process.poll() is not None:
        return False
    process.terminate()  # hive and Scrapy stop warmly on SIGTERM
    try:
        process.wait(STOP_GRACE)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return True


def run_child(
    command: list[str], work: Path, timeout: float, snapshot: Callable[[], str | None] | None
) -> Child:
    """Run one crawler to its exit (stopped after ``timeout`` s); measure it as a child.

    ``snapshot`` is called every half second until it returns a string; its
    own children's CPU is taken out of the crawler's.
    """
    status: str | None = None
    excluded = 0.0
    with (work / "stdout.txt").open("w") as out, (work / "stderr.txt").open("w") as err:
        cpu_before = children_cpu()
        started = time.monotonic()
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=err)
        rss = PeakRss(process.pid)
        try:
            while process.poll() is None and time.monotonic() - started < timeout:
                if snapshot is not None and status is None:
                    before = children_cpu()
                    status = snapshot()
                    excluded += children_cpu() - before
                time.sleep(0.5)
        finally:
            timed_out = stop(process)
        seconds = time.monotonic() - started
        peak = rss.stop()
        cpu = children_cpu() - cpu_before - excluded
    lines = (work / "stdout.txt").read_text().strip().splitlines()
    try:
        report = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        report = {}
    peak = max(peak, float(report.get("maxrss_mb", 0.0)))
    return Child(process.returncode, seconds, cpu, peak, report, timed_out, status or "")


def warc_note(warc_dir: Path) -> str:
    """The WARC files' size and how many of their records are revisits (by their indexes)."""
    size = sum(path.stat().st_size for path in warc_dir.glob("*.warc.gz"))
    revisits = sum(path.read_text().count('"warc/revisit"') for path in warc_dir.glob("*.cdxj"))
    return f"WARC {size / 1e6:.1f} MB, {revisits} revisits"


def measure(kind: str, label: str, procs: int, child: Child, server: WebProcess,
            workload: Workload) -> Row:
    """The row of a finished crawl: the child's figures and the server's request log."""
    web = server.web
    requests = server.requests
    pages = [r for r in requests if r.method == "GET" and r.path != "/robots.txt"]
    rate = steady_rate(r.end for r in pages)
    # A busy server stamps a response's end late; hive's crawl log says when it had it.
    timed = requests
    if kind == "hive":
        timed = as_received(requests, received(DataDir(server.log.parent / "data").logs))
    notes = [f"timed out after {child.seconds:.0f}s"] if child.timed_out else []
    reason = child.report.get("finish_reason")
    if reason not in (None, "finished"):
        notes.append(f"scrapy: {reason}")
    if child.report.get("errors"):
        notes.append(f"{child.report['errors']} errors")
    if not child.report and kind != "hive":
        notes.append(f"no report: see {server.log.parent / 'stderr.txt'}")
    if kind == "hive":
        notes.append(warc_note(DataDir(server.log.parent / "data").warc))
    return Row(
        kind=kind, label=label, procs=procs, pages=len(pages), seconds=child.seconds,
        pages_per_s=rate, limit_share=rate / politeness_limit(web, workload.delay),
        cpu_per_1000=1000 * child.cpu / max(len(pages), 1), peak_rss=child.peak_rss,
        polite=len(politeness_violations(timed, gaps(web, workload.delay), TOLERANCE)),
        robots=robots_violations(requests, web.disallowed_urls(server.port)),
        lost=len(server.in_scope_urls() - {r.url for r in pages}),
        twice=sum(n - 1 for n in duplicates(requests).values()),
        exit=child.exit, note="; ".join(notes),
    )


def hive_command(args: argparse.Namespace, workload: Workload, procs: int, work: Path,
                 server: WebProcess) -> list[str]:
    crawl_delay = CRAWL_DELAY_FACTOR * workload.delay
    write_config({
        "dns": {"resolve": [server.resolve], "allow_nets": [f"{ADDRESS}/32"]},
        # every host shares one address: the address limits off (bench_addresses.py)
        "politeness": {"min_delay": workload.delay, "max_delay": workload.delay,
                       "crawl_delay_cap": max(crawl_delay, 1.0), "ip_concurrency": 0},
        "robots": {"retry_delay": 0.5, "tries": 2},
        "fetch": {"threads": args.threads},
    }, work / "hive.toml")
    return [sys.executable, "-m", "cli", "--config", str(work / "hive.toml"), "start",
            "--procs", str(procs), "--data", str(work / "data"), "--seeds",
            str(work / "seeds.txt"), "--quiet"]


def status_snapshot(data: Path, log: Path, pages: int) -> Callable[[], str | None]:
    """``hive status`` once a third of the pages have arrived at the server; None until then."""
    lines = LogLines(log)

    def take() -> str | None:
        if lines.count() < pages // 3:
            return None
        result = subprocess.run([sys.executable, "-m", "cli", "status", "--data", str(data)],
                                cwd=ROOT, capture_output=True, text=True, timeout=30)
        return result.stdout or result.stderr
    return take


def crawl(args: argparse.Namespace, workload: Workload, kind: str, label: str, base: Path,
          procs: int = 0, snapshot: bool = False) -> tuple[Row, str]:
    """Serve a fresh web and crawl it with one crawler; its row and any ``hive status``."""
    print(f"{workload.name}: {label} ...", file=sys.stderr, flush=True)
    work = base / workload.name / label.replace(" ", "")
    work.mkdir(parents=True)
    web = workload.web()
    with WebProcess(web, work / "requests.jsonl", host=ADDRESS) as server:
        (work / "seeds.txt").write_text("\n".join(server.seeds()) + "\n")
        take = None
        if kind == "hive":
            command = hive_command(args, workload, procs, work, server)
            if snapshot:
                take = status_snapshot(work / "data", server.log, len(server.in_scope_urls()))
            timeout = args.timeout
        elif kind == "scrapy":
            (work / "hosts.txt").write_text("\n".join(web.names) + "\n")
            command = [sys.executable, str(BENCH / "scrapy_crawl.py"), "--seeds",
                       str(work / "seeds.txt"), "--hosts", str(work / "hosts.txt"),
                       "--address", ADDRESS, "--domain", web.domain, "--delay",
                       str(workload.delay), "--concurrency", str(SCRAPY_CONCURRENCY),
                       "--timeout", str(args.timeout)]
            timeout = args.timeout + 60  # past CLOSESPIDER_TIMEOUT: Scrapy stops by itself
        else:
            (work / "urls.txt").write_text("\n".join(sorted(server.in_scope_urls())) + "\n")
            command = [sys.executable, str(BENCH / "bare_crawl.py"), "--urls",
                       str(work / "urls.txt"), "--address", ADDRESS, "--port", str(server.port),
                       "--procs", str(BARE_PROCS), "--threads", str(BARE_THREADS),
                       "--timeout", str(args.timeout)]
            timeout = args.timeout + 60  # past its own deadline
        child = run_child(command, work, timeout, take)
        return measure(kind, label, procs, child, server, workload), child.status


def scrapy_version() -> str | None:
    """Scrapy's version, or None when ``import scrapy`` fails."""
    try:
        module = importlib.import_module("scrapy")
    except ImportError:
        return None
    return str(getattr(module, "__version__", "?"))


def ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}x" if numerator > 0 and denominator > 0 else "n/a"


def print_table(args: argparse.Namespace, workload: Workload, rows: list[Row],
                status: str, base: Path) -> None:
    web = workload.web()
    crawl_delay = CRAWL_DELAY_FACTOR * workload.delay
    print(f"\n== {workload.name}: {workload.hosts} hosts x {workload.pages} pages "
          f"({len(web.in_scope_urls()):,} in scope), {workload.delay:g}s per-host delay "
          f"({crawl_delay:g}s on the Crawl-delay host), {args.threads} fetch threads per hive "
          f"worker; {os.cpu_count()} cores; data in {base / workload.name}")
    print(f"politeness limit: {politeness_limit(web, workload.delay):,.1f} pages/s "
          f"(every crawlable host once per gap)")
    print(f"{'crawler':<15}" + "".join(f"{name:>{width}}" for name, width in COLUMNS) + "  note")
    for row in rows:
        if row.exit is None:
            cells = "".join(f"{'-':>{width}}" for _, width in COLUMNS)
        else:
            cells = (
                f"{row.pages:>7}{row.seconds:>7.1f}{row.pages_per_s:>9.1f}"
                f"{row.limit_share:>8.0%}{row.cpu_per_1000:>10.2f}{row.peak_rss:>8.0f}"
                f"{row.polite:>8}{row.robots:>8}{row.lost:>7}{row.twice:>7}{row.exit:>6}"
            )
        print(f"{row.label:<15}{cells}  {row.note}".rstrip())
    ran = [row for row in rows if row.exit is not None]
    hives = [row for row in ran if row.kind == "hive"]
    scrapy = next((row for row in ran if row.kind == "scrapy"), None)
    bare = next((row for row in ran if row.kind == "bare"), None)
    if hives and scrapy is not None:
        hive = max(hives, key=lambda row: row.procs)
        print(f"{hive.label} / {scrapy.label}: CPU-s per 1000 pages "
              f"{ratio(hive.cpu_per_1000, scrapy.cpu_per_1000)}, steady pages/s "
              f"{ratio(hive.pages_per_s, scrapy.pages_per_s)}")
    if bare is not None:
        for hive in hives:
            print(f"{hive.label} / {bare.label}: CPU-s per 1000 pages "
                  f"{ratio(hive.cpu_per_1000, bare.cpu_per_1000)}")
    if status:
        label = max(hives, key=lambda row: row.procs).label if hives else "hive"
        print(f"\nhive status during the {label} run:\n{status.rstrip()}")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("unbound", "bound", "copies", "both"),
                        default="both")
    parser.add_argument("--hosts", type=int, help="hosts (default: the workload's)")
    parser.add_argument("--pages", type=int, help="pages per host (default: the workload's)")
    parser.add_argument("--delay", type=float, help="per-host delay (default: the workload's)")
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2], help="hive rows")
    parser.add_argument("--threads", type=int, default=4, help="fetch threads per hive worker")
    parser.add_argument("--skip-scrapy", action="store_true")
    parser.add_argument("--skip-bare", action="store_true")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per crawler")
    args = parser.parse_args()
    # A SIGTERM unwinds like Ctrl-C, so the running crawler and web server are stopped too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    overrides = {key: value for key in ("hosts", "pages", "delay")
                 if (value := getattr(args, key)) is not None}
    names = ("unbound", "bound") if args.workload == "both" else (args.workload,)
    workloads = [replace(WORKLOADS[name], **overrides) for name in names]
    # hive runs from this checkout, whose bytecode is compiled here first, as an installed
    # package's is: where PYTHONDONTWRITEBYTECODE is set, every hive process would
    # otherwise compile hive's sources as it starts (about 0.3 CPU-s a process here).
    compileall.compile_dir(ROOT / "hive", quiet=1)
    compileall.compile_file(ROOT / "cli.py", quiet=1)
    scrapy = None if args.skip_scrapy else scrapy_version()
    bare = f"bare {BARE_PROCS}p x {BARE_THREADS}t"
    base = Path(tempfile.mkdtemp(prefix="hive-bench-crawl-"))
    for workload in workloads:
        rows: list[Row] = []
        status = ""
        for procs in args.procs:
            row, taken = crawl(args, workload, "hive", f"hive -p {procs}", base, procs,
                               snapshot=procs == max(args.procs))
            rows.append(row)
            status = taken or status
        if not args.skip_scrapy:
            if scrapy is None:
                rows.append(Row("scrapy", "scrapy", note="not installed"))
            else:
                rows.append(crawl(args, workload, "scrapy", f"scrapy {scrapy}", base)[0])
        if not args.skip_bare:
            rows.append(crawl(args, workload, "bare", bare, base)[0])
        print_table(args, workload, rows, status, base)


if __name__ == "__main__":
    main()
