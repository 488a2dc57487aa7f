"""Soak run: a long crawl of a large synthetic web, every process's memory and files sampled.

    python bench/soak.py [--minutes 30] [--hosts 1000] [--pages 100] [--procs 2] [--interval 5]
                         [--warmup 0.1] [--delay SECONDS] [--set KEY=VALUE ...]

It serves the synthetic web (``hive.testweb``, hostile hosts left out) of
hosts x pages (100,000 pages by default) on 127.0.0.2 in a process of its own
and crawls it with ``hive start --procs N`` (every name resolved to that
address by ``dns.resolve``, ``dns.allow_nets`` 127.0.0.2/32). The per-host
delay makes the crawl last the whole run and stay busy: every host is a seed
and its pages come one after the other, so its pages take ``pages x delay``;
the delay is ``minutes x 60 / pages`` (18 s by default), set as
``politeness.min_delay`` (and ``max_delay``, ``crawl_delay_cap``) and as the
web's robots.txt Crawl-delay, and the expected rate is the crawlable hosts
(all but the one whose robots.txt answers 500) over the delay: the
politeness bound. ``--delay`` sets a shorter one to soak the hive at full
speed, bound by CPU rather than by politeness; the web must then be large
enough to last the run (hosts x pages at least minutes x 60 x the pages/s the
machine reaches). ``--set`` passes a setting to the hive as ``hive -s`` does
(``--set warc.max_file_bytes=5000000``). At the deadline
a hive still crawling is stopped with ``hive stop`` (warm); one still running
``GRACE`` seconds later is killed with its process group.

Every ``--interval`` seconds it samples each process of the hive — the
supervisor (the ``hive start`` process), the splitter and each worker, named by
their pids in ``DATA/hive.json``, and multiprocessing's resource tracker — and
appends a row per process to ``samples.csv`` in the work directory: seconds
since the start, role, pid, RSS MB, RssAnon MB (``/proc/PID/status``: the
process's own heap and stacks, without the file pages of LMDB's memory map,
which RSS counts and which grow with the store), open files (``num_fds``:
files, sockets, pipes) and of them the TCP connections, threads, CPU % since
the last sample, CPU seconds so far, and for workers the pages fetched, URLs
pending and the bytes their recent-links cache holds (``hive.recent_links_mb``)
as they last reported.
A progress line (hive's pages, pages/s over the last minute, RssAnon/files per
process) is printed every minute.

At the end it prints a table per process — per pid: a process the supervisor
restarted gets a table for each pid, and the restart is listed, never merged:

- warm-up: its first sample at least ``--warmup`` of the run (0.1: 3 min of
  30) after its own first sample; end: its last sample before the stop; peak:
  its largest sample;
- RSS, RssAnon, open files and threads at those three points (and for a
  worker its URLs pending and its recent-links cache), and the growth from
  warm-up to end (and in %); the least-squares slope of RssAnon over the
  samples from warm-up on, in MB per hour; its mean CPU % after warm-up;
- a verdict: PASS when RssAnon grew by less than ``GROWTH_MB`` MB or less than
  ``GROWTH_PCT`` % from warm-up to end; open files other than TCP connections
  are at the end at most ``FD_SLACK`` above their peak up to warm-up (a leak
  climbs past any early peak); and TCP connections never exceed what the
  configuration allows a process: ``fetch.threads`` x (``fetch.pool_connections``
  + 1), a connection in flight and the idle keep-alive ones per fetch thread.
  Connections are judged by that bound, not by their early peak: a worker busy
  on its CPU in the first seconds has not yet used every thread, and its
  connections climb to the bound after the warm-up without leaking. RSS is
  shown, not judged: the rest of it is LMDB's file pages.

Then the crawl, measured at the server: pages fetched (GETs but robots.txt) of
those in scope, pages/s from the first request to the last; the part crawled
(every in-scope page fetched or linked from a fetched page: page i+1 is
linked from page i of its host, the private pages of the host without
robots.txt from its root, each root is a seed) and in it the pages lost —
neither fetched nor held by the stopped hive as pending (in a worker's
``urls`` database or an unacknowledged outbox batch); pages fetched twice;
politeness violations (a request that started less than the delay after the
previous one to its host ended, 10 ms tolerance), with each response ending
when the hive's crawl log says it had it if that came before the server's
stamp (bench/chaos.py's correction: a starved server stamps late), and by the
server's stamps alone; and the exit code of ``hive start`` and why it stopped.

The command exits 1 when a verdict failed, a process restarted, a page was
lost, fetched twice or fetched too soon, or ``hive start`` exited other than 0
(the batch ended) or 3 after the soak's own ``hive stop`` at the deadline; 0
otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any

import psutil
from bench_crawl import write_config

from hive.config import load
from hive.core.urls import fingerprint, host_hash, host_key
from hive.core.wire import decode_records
from hive.errors import ControlError, HiveError
from hive.procs.control import ControlClient
from hive.procs.endpoints import Endpoints
from hive.procs.lifecycle import ExitCode
from hive.storage.datadir import DataDir
from hive.storage.modes import read_only
from hive.storage.schema import PENDING, url_key
from hive.testweb import (
    Request,
    Web,
    WebProcess,
    as_received,
    duplicates,
    politeness_violations,
    received,
)
from hive.testweb.graph import PRIVATE_PAGES

ROOT = Path(__file__).resolve().parents[1]
ADDRESS = "127.0.0.2"
SUPERVISOR = "supervisor"
TRACKER = "resource tracker"
GRACE = 150.0
TOLERANCE = 0.01
GROWTH_MB = 5.0
GROWTH_PCT = 10.0
FD_SLACK = 8
PROGRESS = 60.0
STOPPED_AT_DEADLINE = "hive stop at the deadline"
MB = 2**20


@dataclass(frozen=True, slots=True)
class Sample:
    """One process at one moment; a row of samples.csv."""

    seconds: float
    role: str
    pid: int
    rss_mb: float
    anon_mb: float
    fds: int
    tcp: int
    threads: int
    cpu_pct: float
    cpu_s: float
    pages: int | None
    pending: int | None
    recent_mb: float | None


@dataclass(frozen=True, slots=True)
class Restart:
    """A role whose pid changed between two samples."""

    role: str
    old: int
    new: int
    seconds: float


def _mb(size: int | None) -> float | None:
    return None if size is None else round(size / MB, 2)


def rss_anon_mb(pid: int) -> float | None:
    """RssAnon of ``pid`` in MB, from /proc; None if the process is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


class Sampler:
    """Samples every process under one ``hive start`` and notices a role whose pid changes."""

    def __init__(self, root: int, data: Path) -> None:
        self.root = psutil.Process(root)
        self.data = data
        self.procs: dict[int, psutil.Process] = {root: self.root}
        self.pids: dict[str, int] = {}
        self.restarts: list[Restart] = []
        self.client: ControlClient | None = None
        self.totals: dict[str, float] = {}

    def _roles(self) -> dict[int, str]:
        """pid -> role, from this hive's hive.json (its supervisor is the root)."""
        names = {self.root.pid: SUPERVISOR}
        try:
            state = DataDir(self.data).read_state()
        except HiveError:
            return names
        if state is None:
            return names
        if state.get("pid") != self.root.pid:
            return names
        if self.client is None:
            endpoints = Endpoints.from_dict(state["endpoints"])
            self.client = ControlClient(endpoints.control, timeout=2.0)
        for role, pid in state.get("pids", {}).items():
            if isinstance(pid, int):
                names[pid] = role
        return names

    def _stats(self) -> dict[str, dict[str, Any]]:
        """role -> the counters it last reported (workers), from ``status``; {} if no answer."""
        if self.client is None:
            return {}
        try:
            status = self.client.call("status")
        except ControlError:
            return {}
        assert isinstance(status, dict)
        self.totals = status["totals"]
        return {row["role"]: row.get("stats", {}) for row in status["processes"]}

    def _name(self, proc: psutil.Process, roles: dict[int, str]) -> str | None:
        if proc.pid in roles:
            return roles[proc.pid]
        with contextlib.suppress(psutil.Error):
            if any("resource_tracker" in part for part in proc.cmdline()):
                return TRACKER
        return None  # a child started since hive.json was written: named at the next sample

    def sample(self, seconds: float) -> list[Sample]:
        roles = self._roles()
        stats = self._stats()
        try:
            found = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return []
        samples = []
        for child in found:
            role = self._name(child, roles)
            if role is None:
                continue
            proc = self.procs.setdefault(child.pid, child)  # the same object: cpu_percent
            if not proc.is_running():  # the pid was reused
                proc = self.procs[child.pid] = child
            try:
                with proc.oneshot():
                    rss = proc.memory_info().rss / MB
                    fds, threads = proc.num_fds(), proc.num_threads()
                    tcp = len(proc.net_connections(kind="tcp"))
                    cpu_pct = proc.cpu_percent(None)
                    times = proc.cpu_times()
            except psutil.Error:
                continue
            anon = rss_anon_mb(proc.pid)
            if anon is None:
                continue
            old = self.pids.get(role)
            if old is not None and old != proc.pid:
                self.restarts.append(Restart(role, old, proc.pid, seconds))
            self.pids[role] = proc.pid
            counters = stats.get(role, {})
            samples.append(Sample(
                round(seconds, 2), role, proc.pid, round(rss, 2), round(anon, 2), fds, tcp, threads,
                cpu_pct, round(times.user + times.system, 2), counters.get("frontier/done/ok"),
                counters.get("frontier/pending"), _mb(counters.get("links/recent_bytes")),
            ))
        return samples

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def progress(seconds: float, taken: list[Sample], totals: dict[str, float]) -> None:
    processes = "  ".join(f"{s.role} {s.anon_mb:.0f}/{s.fds}" for s in taken)
    print(f"{seconds / 60:6.1f} min {totals.get('frontier/done/ok', 0):>9,.0f} pages "
          f"{totals.get('pages_per_s', 0):6.1f}/s   RssAnon MB/files: {processes}", flush=True)


def crawl(args: argparse.Namespace, work: Path, server: WebProcess,
          delay: float) -> tuple[list[Sample], Sampler, subprocess.Popen[bytes], str]:
    """Run ``hive start`` to the deadline, sampling into ``samples.csv``; returns the
    samples, the sampler, the process (exited) and how it ended."""
    data = work / "data"
    (work / "seeds.txt").write_text("\n".join(server.seeds()) + "\n")
    write_config({
        "dns": {"resolve": [server.resolve], "allow_nets": [f"{ADDRESS}/32"]},
        # every host shares one address: the address limits off (bench_addresses.py)
        "politeness": {"min_delay": delay, "max_delay": delay, "crawl_delay_cap": delay,
                       "ip_concurrency": 0},
        "robots": {"retry_delay": 1.0, "tries": 3},
    }, work / "hive.toml")
    hive = [sys.executable, "-m", "cli", "--config", str(work / "hive.toml"),
            *(arg for setting in args.set for arg in ("-s", setting))]
    with (work / "start.out").open("wb") as out:
        process = subprocess.Popen(
            [*hive, "start", "--procs", str(args.procs), "--data", str(data), "--seeds",
             str(work / "seeds.txt"), "--quiet"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    started = time.monotonic()
    deadline = started + args.minutes * 60
    sampler = Sampler(process.pid, data)
    samples: list[Sample] = []
    next_progress = started + PROGRESS
    how = "the batch ended before the deadline"
    try:
        with (work / "samples.csv").open("w", newline="") as table:
            writer = csv.writer(table)
            writer.writerow(f.name for f in fields(Sample))
            while process.poll() is None and (now := time.monotonic()) < deadline:
                taken = sampler.sample(now - started)
                samples += taken
                writer.writerows(astuple(s) for s in taken)
                table.flush()
                if now >= next_progress:
                    next_progress += PROGRESS
                    progress(now - started, taken, sampler.totals)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(max(0.0, min(now + args.interval, deadline) - time.monotonic()))
        if process.poll() is None:
            how = STOPPED_AT_DEADLINE
            with contextlib.suppress(subprocess.TimeoutExpired):
                subprocess.run([*hive, "stop", "--data", str(data)], cwd=ROOT, timeout=GRACE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(GRACE)
    finally:
        sampler.close()
        if process.poll() is None:
            how = f"killed: still running {GRACE:g} s after hive stop"
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return samples, sampler, process, how


def slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of y over x (at least one point); 0 if every x is the same."""
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0


def by_process(samples: Iterable[Sample]) -> dict[tuple[str, int], list[Sample]]:
    """Samples of each (role, pid) in time order: a restarted role is a new process."""
    out: dict[tuple[str, int], list[Sample]] = {}
    for sample in samples:
        out.setdefault((sample.role, sample.pid), []).append(sample)
    return out


def judge(samples: list[Sample], warmup: float, tcp_bound: int) -> tuple[list[str], bool | None]:
    """The table of one process (one pid) and its verdict (None: no sample after warm-up);
    ``tcp_bound``: the TCP connections the configuration allows it."""
    first, end = samples[0], samples[-1]
    warm = next((s for s in samples if s.seconds >= first.seconds + warmup), None)
    head = (f"{first.role}, pid {first.pid}: {len(samples)} samples from {first.seconds:.0f} s "
            f"to {end.seconds:.0f} s")
    if warm is None or warm is end:
        return [head + "; none after warm-up, not judged"], None
    lines = [head + f"; warm-up sample at {warm.seconds:.0f} s",
             f"  {'':<12}{'warm-up':>9}{'end':>9}{'peak':>9}   growth after warm-up"]
    rows = [("RSS MB", "rss_mb", ".1f"), ("RssAnon MB", "anon_mb", ".1f"),
            ("open files", "fds", "d"), ("TCP conns", "tcp", "d"), ("threads", "threads", "d"),
            ("pending", "pending", "d"), ("recent MB", "recent_mb", ".1f")]
    for label, attr, f in rows:
        w, e = getattr(warm, attr), getattr(end, attr)
        if w is None or e is None:
            continue
        peak = max(v for s in samples if (v := getattr(s, attr)) is not None)
        pct = f" ({100 * (e - w) / w:+.1f}%)" if w else ""
        unit = " MB" if f == ".1f" else ""
        lines.append(f"  {label:<12}{w:>9{f}}{e:>9{f}}{peak:>9{f}}   {e - w:+{f}}{unit}{pct}")
    hours = [(s.seconds / 3600, s.anon_mb) for s in samples if s.seconds >= warm.seconds]
    cpu = 100 * (end.cpu_s - warm.cpu_s) / (end.seconds - warm.seconds)
    lines.append(f"  RssAnon slope after warm-up {slope(hours):+.1f} MB/h; "
                 f"CPU {cpu:.0f}% on average after warm-up")
    grown = end.anon_mb - warm.anon_mb
    ok_mem = grown < GROWTH_MB or grown < warm.anon_mb * GROWTH_PCT / 100
    early_files = max(s.fds - s.tcp for s in samples if s.seconds <= warm.seconds)
    ok_files = end.fds - end.tcp <= early_files + FD_SLACK
    most_tcp = max(s.tcp for s in samples)
    ok_tcp = most_tcp <= tcp_bound
    ok = ok_mem and ok_files and ok_tcp
    lines.append(
        f"  {'PASS' if ok else 'FAIL'}: RssAnon {grown:+.1f} MB "
        f"({'within' if ok_mem else 'over'} {GROWTH_MB:g} MB or {GROWTH_PCT:g}%); open files "
        f"but TCP {end.fds - end.tcp} at the end, peak {early_files} up to warm-up "
        f"({'within' if ok_files else 'over'} +{FD_SLACK}); TCP connections at most "
        f"{most_tcp} ({'within' if ok_tcp else 'over'} the configured {tcp_bound})")
    return lines, ok


def key_of(url: str) -> bytes:
    """The key of a canonical URL in a worker's ``urls`` database."""
    return url_key(host_hash(host_key(url)), fingerprint(url))


def held(data: Path) -> tuple[set[bytes], int]:
    """The keys of the URLs a stopped hive holds as pending — in a ``urls`` database or an
    unacknowledged outbox batch of any worker or of the supervisor (seeds) — and how many
    are pending in the ``urls`` databases."""
    keys: set[bytes] = set()
    in_stores = 0
    dd = DataDir(data)
    for store in [*(d for _, d in dd.workers()), dd.supervisor]:
        if not store.is_dir():
            continue
        with read_only(store) as txn:
            for key, state in txn.items("urls"):
                if state[:1] == PENDING:  # a pending state may carry its entry (schema)
                    keys.add(key)
                    in_stores += 1
            for _, frame in txn.items("outbox"):
                keys.update(key_of(r.url) for r in decode_records(frame))
    return keys, in_stores


def linked(web: Web, url: Callable[[str, str], str], fetched: set[str]) -> list[str]:
    """In-scope pages linked from a fetched page (each root from the seeds); ``url(host, path)``."""
    pages = []
    for name, kind in web.robots.items():
        if kind == "error":
            continue
        chain = [url(name, "/")] + [url(name, f"/p/{i}.html") for i in range(1, web.pages)]
        pages.append(chain[0])
        pages += [page for before, page in zip(chain, chain[1:], strict=False) if before in fetched]
        if kind == "missing" and chain[0] in fetched:
            pages += [url(name, f"/private/{k}.html") for k in range(PRIVATE_PAGES)]
    return pages


def report_crawl(web: Web, server: WebProcess, requests: list[Request], data: Path,
                 delay: float) -> tuple[list[str], bool]:
    """The crawl's figures at the server and in the stopped hive, and whether it was clean."""
    pages = [r for r in requests if r.method == "GET" and r.path != "/robots.txt"]
    fetched = {r.url for r in pages}
    in_scope = server.in_scope_urls()
    part = set(linked(web, server.url, fetched)) | (fetched & in_scope)
    pending, in_stores = held(data)
    unfetched = [u for u in part if u not in fetched]
    lost = sorted(u for u in unfetched if key_of(u) not in pending)
    twice = sum(n - 1 for n in duplicates(requests).values())
    gaps = dict.fromkeys(web.names, delay)
    violations = politeness_violations(as_received(requests, received(DataDir(data).logs)), gaps,
                                       tolerance=TOLERANCE)
    by_server = politeness_violations(requests, gaps, tolerance=TOLERANCE)
    span = max(r.end for r in pages) - min(r.start for r in pages) if pages else 0.0
    lines = [
        f"pages fetched   {len(pages):,} of {len(in_scope):,} in scope; "
        f"{len(pages) / span if span else 0.0:.1f} pages/s over {span:.0f} s (first to last)",
        f"part crawled    {len(part):,} in-scope pages fetched or linked from a fetched page: "
        f"{len(part) - len(unfetched):,} fetched, {len(unfetched) - len(lost):,} pending at "
        f"the stop, {len(lost)} lost ({in_stores:,} URLs pending in the stores in all)",
        f"fetched twice   {twice}",
        f"politeness      {len(violations)} violations ({delay:g} s per host, "
        f"{TOLERANCE * 1000:g} ms tolerance; {len(by_server)} by the server's end stamps alone)",
    ]
    lines += [f"  ! lost {url}" for url in lost[:5]] + [f"  ! {v}" for v in violations[:5]]
    return lines, not lost and not twice and not violations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the run")
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=100, help="pages per host")
    parser.add_argument("--procs", type=int, default=2, help="worker processes")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--warmup", type=float, default=0.1,
                        help="warm-up, a share of the run, from a process's first sample")
    parser.add_argument("--delay", type=float, default=None,
                        help="per-host delay in seconds (default: minutes x 60 / pages, "
                             "which keeps the crawl bound by politeness for the whole run)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting for the hive, as `hive -s` takes it (repeatable)")
    args = parser.parse_args()
    delay = args.minutes * 60 / args.pages if args.delay is None else args.delay
    warmup = args.warmup * args.minutes * 60
    work = Path(tempfile.mkdtemp(prefix="hive-soak-"))
    web = Web(seed=7, hosts=args.hosts, pages=args.pages, hostile=False,
              robots_crawl_delay=delay)
    crawlable = sum(kind != "error" for kind in web.robots.values())
    with WebProcess(web, work / "requests.jsonl", host=ADDRESS) as server:
        print(f"soak: {args.hosts} hosts x {args.pages} pages on {ADDRESS}:{server.port}, "
              f"hive --procs {args.procs}, {args.minutes:g} min, {os.cpu_count()} cores\n"
              f"per-host delay {delay:.2f} s (min_delay and robots Crawl-delay): politeness "
              f"bound {crawlable / delay:.1f} pages/s ({crawlable} crawlable hosts)\n"
              f"a sample every {args.interval:g} s; warm-up: the first sample {warmup:.0f} s "
              f"or more after a process's first; work dir {work}", flush=True)
        samples, sampler, process, how = crawl(args, work, server, delay)
        requests = server.requests
    print()
    settings = load(work / "hive.toml", args.set).fetch
    tcp_bound = settings.threads * (settings.pool_connections + 1)
    verdicts = []
    for mine in by_process(samples).values():
        lines, verdict = judge(mine, warmup, tcp_bound)
        verdicts.append(verdict)
        print("\n".join(lines))
    log = DataDir(work / "data").log_file("supervisor")
    died = [line.strip() for line in log.read_text(errors="replace").splitlines()
            if " died (exit code " in line] if log.exists() else []
    for r in sampler.restarts:
        print(f"RESTART: {r.role} pid {r.old} -> {r.new}, seen at {r.seconds:.0f} s")
    for line in died:
        print(f"supervisor log: {line}")
    print()
    lines, clean = report_crawl(web, server, requests, work / "data", delay)
    print("\n".join(lines))
    start_out = (work / "start.out").read_text(errors="replace").strip().splitlines()
    print(f"hive start      exit code {process.returncode}; {how}; "
          f"{start_out[-1] if start_out else '(no output)'}")
    print(f"samples         {work / 'samples.csv'}")
    ended = process.returncode == ExitCode.ENDED or (
        how == STOPPED_AT_DEADLINE and process.returncode == ExitCode.STOPPED)
    ok = clean and False not in verdicts and not sampler.restarts and not died and ended
    print(f"soak            {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
