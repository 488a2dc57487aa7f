"""Hostile pages mixed with a normal web: what a worker's memory, the normal web and the
servers' politeness come to.

    python bench/hostile.py            # the full run (a few minutes)
    python bench/hostile.py --short    # what tests/test_hostile.py runs

Two servers on 127.0.0.2: hive.testweb's web (its hostile hosts included:
gzip bomb, endless and dripping bodies, redirect loops, private redirects,
429s, a calendar trap, a huge page, binary bytes) and this module's hostile
hosts (``<kind>-<n>.hostile.test``), the cases that once broke hive:

    links-N        ``/`` is a gzipped page of --links relative links (1,000,000:
                   15 MB of HTML, 2.4 MB gzipped, under every cap)
    robots-big-N   a 512 KB robots.txt of 25,000 rules, a third with wildcards
    members-N      a body of --members MB of empty gzip members (decoded in
                   quadratic time once)
    redirector-N   robots.txt 301s to the victim's robots.txt
    victim         robots.txt ``Disallow: /``; every page links /secret/admin
    chain          robots.txt 301s through /r1 ... /r4 on its own host
    retry-N        429 with a Retry-After of Arabic-Indic digits

The crawl is one ``hive start --procs 2`` to the end of the batch (or
--timeout). It prints each worker's peak RSS against the stated budget
(hive/fetch/parse.py and tests/io/test_page_memory.py: threads x (2 x received + 2 x
decoded + PAGE_PARSE_BYTES) + backlog x cap x 320 B, plus the robots.txt cache's
``robots.cache_mb``), the normal web's in-scope pages fetched, and the
politeness violations and disallowed requests at both servers.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hive import config  # noqa: E402
from hive.errors import HiveError  # noqa: E402
from hive.fetch.parse import PAGE_PARSE_BYTES  # noqa: E402
from hive.procs.worker import backlog  # noqa: E402
from hive.storage.datadir import DataDir  # noqa: E402
from hive.testweb import (  # noqa: E402
    Request,
    Web,
    WebProcess,
    as_received,
    politeness_violations,
    received,
)

ADDRESS = "127.0.0.2"
DOMAIN = "hostile.test"
DELAY = 0.05
LINK_BYTES = 320
# Seconds a worker runs before its RSS counts as where it started.
SETTLE = 2.0


@dataclass
class Plan:
    """How much of each hostile kind: counts of hosts and sizes."""

    links_hosts: int = 2
    links: int = 1_000_000
    robots_hosts: int = 30
    robots_rules: int = 25_000
    members_hosts: int = 2
    members_mb: int = 9
    redirectors: int = 30
    retry_hosts: int = 2
    web_hosts: int = 20
    web_pages: int = 20
    threads: int = 8
    timeout: float = 600.0
    # fetch.total_timeout: how long a drip or endless page of the test web holds a thread
    fetch_timeout: float = 10.0

    @classmethod
    def short(cls) -> Plan:
        return cls(links_hosts=2, links=200_000, robots_hosts=4, robots_rules=25_000,
                   members_hosts=1, members_mb=1, redirectors=8, retry_hosts=1,
                   web_hosts=6, web_pages=8, threads=4, timeout=150.0, fetch_timeout=4.0)


def links_page(count: int) -> bytes:
    return ("<html><body>" + "".join(f"<a href=p{i}>" for i in range(count))
            + "</body></html>").encode()


def big_robots(rules: int) -> bytes:
    lines = ["User-agent: *"]
    for i in range(rules):
        if i % 3 == 0:
            lines.append(f"Disallow: /*/x{i}*.php$")
        else:
            lines.append(f"Disallow: /private/{i:05d}/")
    lines.append("Allow: /")
    return ("\n".join(lines) + "\n").encode()


def empty_members(megabytes: int) -> bytes:
    member = gzip.compress(b"")
    return member * ((megabytes << 20) // len(member))


def small_page(links: list[str]) -> bytes:
    items = "".join(f'<a href="{href}">{href}</a>\n' for href in links)
    return f"<!doctype html>\n<html><body>\n{items}</body></html>\n".encode()


@dataclass
class HostileSite:
    """The hostile hosts' answers (built once) and the request log."""

    plan: Plan
    port: int = 0
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.links_body = gzip.compress(links_page(self.plan.links), compresslevel=6)
        self.robots_body = big_robots(self.plan.robots_rules)
        self.members_body = empty_members(self.plan.members_mb)

    def hosts(self) -> list[str]:
        p = self.plan
        names = [f"links-{i}" for i in range(p.links_hosts)]
        names += [f"robots-big-{i}" for i in range(p.robots_hosts)]
        names += [f"members-{i}" for i in range(p.members_hosts)]
        names += [f"redirector-{i}" for i in range(p.redirectors)]
        names += [f"retry-{i}" for i in range(p.retry_hosts)]
        names += ["victim", "chain"]
        return [f"{name}.{DOMAIN}" for name in names]

    def seeds(self) -> list[str]:
        return [f"http://{host}:{self.port}/" for host in self.hosts()]

    def answer(self, host: str, path: str) -> tuple[int, bytes, list[tuple[str, str]]]:
        label = host.split(".", 1)[0]
        name, _, number = label.rpartition("-")
        kind = name if number.isdigit() else label
        html = [("Content-Type", "text/html")]
        victim = f"http://victim.{DOMAIN}:{self.port}"
        if path == "/robots.txt":
            match kind:
                case "robots-big":
                    return 200, self.robots_body, [("Content-Type", "text/plain")]
                case "redirector":
                    return 301, b"", [("Location", f"{victim}/robots.txt")]
                case "victim":
                    return 200, b"User-agent: *\nDisallow: /\n", [("Content-Type", "text/plain")]
                case "chain":
                    return 301, b"", [("Location", "/r1")]
            return 404, b"", []
        if kind == "chain" and path.startswith("/r") and path[2:].isdigit():
            hop = int(path[2:])
            if hop < 4:
                return 301, b"", [("Location", f"/r{hop + 1}")]
            return 200, b"User-agent: *\nDisallow: /private/\n", [("Content-Type", "text/plain")]
        match kind:
            case "links":
                if path == "/":
                    return 200, self.links_body, [*html, ("Content-Encoding", "gzip")]
                return 404, b"", []
            case "members":
                return 200, self.members_body, [*html, ("Content-Encoding", "gzip")]
            case "retry":
                # Arabic-Indic "30" as UTF-8 bytes (http.server writes header values as Latin-1).
                digits = "\u0663\u0660".encode().decode("latin-1")
                return 429, b"slow down\n", [("Retry-After", digits)]
            case "victim":
                return 200, small_page(["/secret/admin", "/secret/keys"]), html
        # robots-big, redirector, chain: a small site that also links to the victim.
        if path == "/":
            return 200, small_page(["/a", "/private/00001/x", f"{victim}/secret/admin"]), html
        if path == "/a":
            return 200, small_page(["/"]), html
        return 404, b"", []


def serve(site: HostileSite) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            start = time.time()
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0].lower()
            status, body, headers = site.answer(host, self.path)
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
                self.wfile.flush()
            except OSError:
                pass
            with site.lock:
                site.requests.append(Request(host, self.path, "GET", status, start, time.time(),
                                             self.client_address[0]))

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((ADDRESS, 0), Handler)
    server.daemon_threads = True
    site.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@dataclass
class Result:
    """What a run measured."""

    peak_rss_mb: dict[str, float]
    start_rss_mb: dict[str, float]
    budget_mb: float
    web_pages: int
    web_fetched: int
    web_violations: list[str]
    hostile_violations: list[str]
    disallowed: list[str]
    max_at_victim: int
    exit_code: int | None
    seconds: float

    @property
    def ok(self) -> bool:
        grown = max(p - self.start_rss_mb.get(w, 0) for w, p in self.peak_rss_mb.items())
        return (grown <= self.budget_mb and self.web_fetched == self.web_pages
                and not self.web_violations and not self.hostile_violations
                and not self.disallowed and self.max_at_victim <= 1)


def budget_mb(cfg: config.Config, threads: int) -> float:
    """The stated bound of a worker's growth, in MB (see the module docstring)."""
    per_thread = (2 * cfg.fetch.max_body_bytes + 2 * cfg.fetch.max_decoded_bytes
                  + PAGE_PARSE_BYTES)
    waiting = backlog(threads) * cfg.parse.max_links_per_page * LINK_BYTES
    robots = cfg.robots.cache_mb * (1 << 20)
    return (threads * per_thread + waiting + robots) / (1 << 20)


def concurrency(requests: list[Request]) -> int:
    """The most requests in flight at once."""
    events = sorted([(r.start, 1) for r in requests] + [(r.end, -1) for r in requests])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def write_config(sections: dict[str, dict[str, Any]], path: Path) -> None:
    lines = []
    for name, values in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    path.write_text("\n".join(lines) + "\n")


def sample_rss(data: Path, stop: threading.Event, peaks: dict[str, float],
               starts: dict[str, float]) -> None:
    """Each worker's RSS every 0.1 s, in MB: its peak, and where it started from (the first
    sample once the process has run SETTLE seconds: its imports done, its store open)."""
    procs: dict[int, psutil.Process] = {}
    while not stop.wait(0.1):
        try:
            pids = (DataDir(data).read_state() or {}).get("pids", {})
        except HiveError:
            continue
        for role, pid in pids.items():
            if not role.startswith("worker") or not isinstance(pid, int):
                continue
            try:
                process = procs.setdefault(pid, psutil.Process(pid))
                rss = process.memory_info().rss / 2**20
            except psutil.Error:
                continue
            try:
                settled = time.time() - process.create_time() >= SETTLE
            except psutil.Error:
                continue
            if settled:
                starts.setdefault(role, rss)
            peaks[role] = max(peaks.get(role, 0.0), rss)


def run(plan: Plan, work: Path) -> Result:
    site = HostileSite(plan)
    server = serve(site)
    web = Web(seed=3, hosts=plan.web_hosts, pages=plan.web_pages, hostile=True)
    data = work / "data"
    with WebProcess(web, work / "web-requests.jsonl", host=ADDRESS) as normal:
        sections: dict[str, dict[str, Any]] = {
            "dns": {"resolve": [normal.resolve, f"*.{DOMAIN}={ADDRESS}"],
                    "allow_nets": [f"{ADDRESS}/32"]},
            # every host shares one address: the address limits off (bench_addresses.py)
            "politeness": {"min_delay": DELAY, "max_delay": DELAY, "crawl_delay_cap": 1.0,
                           "ip_concurrency": 0,
                           "backoff_base": 0.5, "backoff_max": 2.0, "retry_after_cap": 2.0},
            "robots": {"retry_delay": 0.5, "tries": 2},
            "fetch": {"threads": plan.threads, "total_timeout": plan.fetch_timeout,
                      "read_timeout": plan.fetch_timeout / 2},
            "frontier": {"max_urls_per_host": 200, "max_depth": 6},
        }
        write_config(sections, work / "hive.toml")
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(normal.seeds() + site.seeds()) + "\n")
        cfg = config.load(work / "hive.toml", environ={})
        stop = threading.Event()
        peaks: dict[str, float] = {}
        starts: dict[str, float] = {}
        sampler = threading.Thread(target=sample_rss, args=(data, stop, peaks, starts),
                                   daemon=True)
        sampler.start()
        started = time.time()
        process = subprocess.Popen(
            [sys.executable, "-m", "cli", "--config", str(work / "hive.toml"), "start",
             "--procs", "2", "--seeds", str(seeds), "--data", str(data), "--quiet"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            code: int | None = process.wait(timeout=plan.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            code = None
        seconds = time.time() - started
        stop.set()
        sampler.join()
        requests = normal.requests
    server.shutdown()
    server.server_close()
    fetched = {r.url for r in requests if r.method == "GET"}
    in_scope = normal.in_scope_urls()
    gaps = dict.fromkeys(web.names, DELAY)
    gaps.update(web.crawl_delay)
    logs = DataDir(data).logs
    timed = as_received(requests, received(logs))
    hostile = list(site.requests)
    hostile_timed = as_received(
        [Request(r.host + f":{site.port}", r.path, r.method, r.status, r.start, r.end, r.client)
         for r in hostile], received(logs))
    by_host: dict[str, list[Request]] = defaultdict(list)
    for request in hostile:
        by_host[request.host].append(request)
    victim = by_host.get(f"victim.{DOMAIN}", [])
    disallowed = [f"{r.host}{r.path}" for r in victim if r.path != "/robots.txt"]
    disallowed += [f"{r.host}{r.path}" for r in hostile
                   if r.path.startswith("/private/") and r.host.startswith(("chain", "robots-big"))]
    return Result(
        peak_rss_mb=peaks, start_rss_mb=starts, budget_mb=budget_mb(cfg, plan.threads),
        web_pages=len(in_scope), web_fetched=len(in_scope & fetched),
        web_violations=politeness_violations(timed, gaps, tolerance=0.02),
        hostile_violations=politeness_violations(hostile_timed, DELAY, tolerance=0.02),
        disallowed=disallowed, max_at_victim=concurrency(victim), exit_code=code,
        seconds=seconds,
    )


def report(result: Result) -> str:
    lines = [f"crawl: {result.seconds:.0f}s, exit code {result.exit_code}"]
    for worker in sorted(result.peak_rss_mb):
        start, peak = result.start_rss_mb.get(worker, 0.0), result.peak_rss_mb[worker]
        lines.append(f"{worker}: RSS {start:.0f} MB at start, peak {peak:.0f} MB "
                     f"(+{peak - start:.0f}; budget +{result.budget_mb:.0f})")
    lines.append(f"normal web: {result.web_fetched} of {result.web_pages} in-scope pages fetched")
    lines.append(f"politeness violations: {len(result.web_violations)} at the normal web, "
                 f"{len(result.hostile_violations)} at the hostile hosts")
    lines += [f"  {v}" for v in (result.web_violations + result.hostile_violations)[:10]]
    lines.append(f"victim: at most {result.max_at_victim} request(s) at once; "
                 f"{len(result.disallowed)} disallowed path(s) fetched")
    lines += [f"  {d}" for d in result.disallowed[:10]]
    lines.append("PASS" if result.ok else "FAIL")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="the suite's small run")
    parser.add_argument("--links", type=int, help="links on each links-N page")
    parser.add_argument("--threads", type=int, help="fetch threads per worker")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args()
    plan = Plan.short() if args.short else Plan()
    if args.links:
        plan.links = args.links
    if args.threads:
        plan.threads = args.threads
    work = Path(tempfile.mkdtemp(prefix="hive-hostile-"))
    result = run(plan, work)
    print(report(result))
    if args.keep:
        print(f"data in {work}")
    else:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
