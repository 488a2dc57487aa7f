"""Frontier-growth benchmark: a worker's anonymous memory with 1M and then 10M URLs pending.

    python bench/bench_growth.py [--sizes 1000000 10000000] [--hosts 10000] [--pages 10000]
                                 [--seconds 300]

For each size, against the synthetic web (hive.testweb in its own process on
127.0.0.2, hosts ``hNNNN.web.test`` with robots.txt variants, no hostile hosts),
in two fresh ``spawn`` processes, so that no size's memory — nor the fill's —
carries into a measured worker. (The filling process's memory is not a
worker's: LMDB keeps the dirty pages of an environment's largest write
transaction for reuse until it closes — how many pages a commit of 10,000
random fingerprints dirties grows with the store — and glibc keeps the heap
they grew even after that; ``anon fill`` shows it.)

1. fill: a data directory laid out as ``hive start`` lays it out
   (``DATA/worker-00`` the LMDB store, ``DATA/warc``, ``DATA/logs``) is filled
   through the Frontier API: ``admit`` in batches of --batch URLs, one commit
   each, made a batch at a time (never all in memory), of pages the web serves,
   ``http://hNNNN.web.test:PORT/p/<i>.html``, in runs of 20 URLs of one host
   (as the splitter hands links over), every host in turn. The web serves each
   host twice the pages the fill queues for it, so at every size about half
   the links of a page are new URLs and the crawl admits at the same rate;
2. crawl: a real ``hive.procs.worker.Worker`` (frontier thread, fetch threads,
   robots.txt, WARC, crawl log; discovered links admitted locally, as a
   standalone worker does) opens that store, as a worker restarting on it
   would, and crawls until it has fetched --pages pages (robots.txt aside) or
   for --seconds, whichever comes first, then drains its in-flight fetches.
   Every name of the web resolves to 127.0.0.2 through the ``dns.resolve``
   override, only 127.0.0.2/32 is allowed, and any other name fails DNS, so
   every fetch stays on loopback.

/proc/self/status is read in the process holding the frontier: after the fill,
once the worker is open, every 0.1 s of the crawl and at its end. Every size
crawls the same number of pages rather than for the same time: on this shared
machine equal times bought one size twice the pages of the other, and a
worker's memory rises with its work while its bounded caches (robots rules,
recent links, the scope's caches) fill.

Columns (MB are MiB; RssAnon is anonymous memory, the measure: LMDB's mapped
pages count in VmRSS as RssFile, but they are the page cache):

    pending       URLs pending after the fill
    fill URLs/s   URLs admitted per second of admit + commit (making them excluded)
    anon fill     RssAnon of the filling process at the end, its frontier still open
    anon open     RssAnon of the worker once it has opened the filled store
    anon peak     highest RssAnon during the crawl (and its drain)
    anon end      RssAnon at the end of the crawl, before the worker closes
    VmRSS peak    highest VmRSS during the crawl (RssAnon + RssFile + RssShmem)
    file peak     highest RssFile during the crawl (mapped LMDB pages, libraries)
    store MB      the LMDB file's allocated size after the crawl
    crawl s       seconds of crawl (to --pages, or --seconds if that came first)
    pages         page (not robots.txt) requests the web served during the crawl
    admitted      URLs the crawl's discovered links added to the frontier

Last line: the worker's anon peak at the largest size over that at the
smallest, PASS when at most 1.10 (the command then exits 0; FAIL exits 1). The
temporary directory is removed at the end (--keep keeps it and says where it is).
"""

from __future__ import annotations

import argparse
import itertools
import math
import multiprocessing
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NamedTuple

from hive import config
from hive.config import Config
from hive.core.record import UrlRecord
from hive.fetch.dns import DnsFailure
from hive.frontier.frontier import Frontier
from hive.procs.worker import Worker
from hive.storage.datadir import DataDir
from hive.testweb import Web, WebProcess

ADDRESS = "127.0.0.2"
RUN = 20  # URLs of one host in a row, as links arrive from the splitter
SAMPLE_EVERY = 0.1
DRAIN_SECONDS = 30.0
LIMIT = 1.10
MIN_FILL_RATE = 5_000  # URLs/s: the per-size time bound assumes the fill is at least this fast
SETUP_SECONDS = 300.0  # per size, on top of the fill and the crawl: opening, draining, closing
STATUS_FIELDS = ("RssAnon", "VmRSS", "RssFile")


def status_mb() -> dict[str, float]:
    """RssAnon, VmRSS and RssFile of this process, in MiB."""
    out = dict.fromkeys(STATUS_FIELDS, 0.0)
    with open("/proc/self/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in out:
                out[name] = int(value.split()[0]) / 1024
    return out


class Peaks:
    """The highest of each status field over the samples taken."""

    def __init__(self) -> None:
        self.mb = dict.fromkeys(STATUS_FIELDS, 0.0)

    def sample(self) -> dict[str, float]:
        now = status_mb()
        for name, value in now.items():
            self.mb[name] = max(self.mb[name], value)
        return now


class Site(NamedTuple):
    """What the measuring processes need of the served web."""

    domain: str
    names: list[str]
    port: int


def batches(size: int, site: Site, batch: int) -> Iterator[list[UrlRecord]]:
    """``size`` URLs of the web, ``batch`` at a time, so they never all sit in memory.

    Runs of RUN pages of one host, every host in turn, then the next run of each:
    host k's pages are /p/1.html … /p/<size/hosts>.html.
    """
    per_host = math.ceil(size / len(site.names))
    keys = [f"{name}:{site.port}" for name in site.names]

    def urls() -> Iterator[UrlRecord]:
        for first in range(1, per_host + 1, RUN):
            for key in keys:
                for page in range(first, min(first + RUN, per_host + 1)):
                    yield UrlRecord(f"http://{key}/p/{page}.html", key, 1, f"http://{key}/")

    stream = itertools.islice(urls(), size)
    while chunk := list(itertools.islice(stream, batch)):
        yield chunk


def no_dns(host: str, timeout: float) -> tuple[list[str], float | None]:
    """The resolver behind the overrides: a name the web does not serve fails, never leaves."""
    raise DnsFailure("nxdomain", f"{host}: no DNS outside the synthetic web in this benchmark")


def worker_config(site: Site) -> Config:
    """The default config, every name of the web resolved to ADDRESS and only it allowed;
    the address limits off, since every host of the web shares that one address (the bench
    measures memory as pending URLs grow, not a shared server's pace)."""
    return config.load(environ={}).replace(
        dns={"resolve": [f"*.{site.domain}={ADDRESS}"], "allow_nets": [f"{ADDRESS}/32"]},
        politeness={"ip_concurrency": 0},
    )


def fill(size: int, site: Site, data: Path, batch: int, out: Connection) -> None:
    """Fill ``data``'s worker store through the Frontier API; send the rate and RssAnon."""
    frontier = Frontier.from_config(DataDir(data).worker(0), worker_config(site), now=time.time())
    seconds = 0.0
    for records in batches(size, site, batch):
        start = time.perf_counter()
        now = time.time()
        frontier.admit(records, now)
        frontier.commit(now)
        seconds += time.perf_counter() - start
    out.send({"pending": frontier.pending, "fill_rate": size / seconds, "fill_seconds": seconds,
              "anon_fill": status_mb()["RssAnon"]})
    frontier.close(time.time())
    out.close()


def crawl(site: Site, data: Path, pages: int, seconds: float, out: Connection) -> None:
    """Open ``data`` as a worker, crawl ``pages`` pages (at most ``seconds``) and drain;
    send what was measured."""
    dd = DataDir(data)
    directory = dd.worker(0)
    worker = Worker(
        worker_config(site), directory, warc_dir=dd.warc, log_dir=dd.logs,
        resolver=no_dns,
    )
    peaks = Peaks()
    at_open = peaks.sample()
    counts = worker.frontier.counts
    admitted, target = counts["frontier/admitted"], counts.get("frontier/done/ok", 0) + pages
    start = time.monotonic()
    deadline = start + seconds
    next_sample = 0.0
    while (left := deadline - time.monotonic()) > 0 and counts.get("frontier/done/ok", 0) < target:
        worker.wait(min(worker.loop_once(time.time()), left, SAMPLE_EVERY))
        if time.monotonic() >= next_sample:
            peaks.sample()
            next_sample = time.monotonic() + SAMPLE_EVERY
    crawl_seconds = time.monotonic() - start
    worker.drain(DRAIN_SECONDS)
    at_end = peaks.sample()
    stats = worker.stats()
    worker.close()
    out.send({
        "crawl_seconds": crawl_seconds, "short": max(target - counts.get("frontier/done/ok", 0), 0),
        "anon_open": at_open["RssAnon"], "anon_peak": peaks.mb["RssAnon"],
        "anon_end": at_end["RssAnon"], "vmrss_peak": peaks.mb["VmRSS"],
        "file_peak": peaks.mb["RssFile"],
        "store_mb": DataDir.store_data(directory).stat().st_blocks * 512 / 2**20,
        "admitted": stats["frontier/admitted"] - admitted,
        "pending_end": stats["frontier/pending"], "bound": stats["frontier/hosts/bound"],
    })
    out.close()


def in_process(target: Callable[..., None], args: tuple[Any, ...], bound: float) -> dict[str, Any]:
    """Run ``target(*args, connection)`` in a fresh spawned process; return what it sends.

    Raises RuntimeError if nothing comes within ``bound`` seconds or the process dies.
    """
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=target, args=(*args, send), name=f"growth-{target.__name__}")
    child.start()
    send.close()
    try:
        if not receive.poll(bound):
            raise RuntimeError(f"{target.__name__}: no result within {bound:.0f} s")
        result: dict[str, Any] = receive.recv()
    except EOFError as exc:
        raise RuntimeError(f"{target.__name__}: the process died") from exc
    finally:
        child.join(DRAIN_SECONDS + SETUP_SECONDS)
        if child.is_alive():
            child.kill()
            child.join()
        receive.close()
    return result


def web_pages(size: int, hosts: int) -> int:
    """Pages per host of the web served for ``size``: twice what the fill queues per host."""
    return 2 * math.ceil(size / hosts)


def run_size(size: int, base: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Serve the web; fill, then crawl, each in a fresh process; count requests at the server."""
    data = base / f"data-{size}"
    web = Web(hosts=args.hosts, pages=web_pages(size, args.hosts), hostile=False)
    with WebProcess(web, base / f"requests-{size}.jsonl", host=ADDRESS) as server:
        site = Site(web.domain, web.names, server.port)
        bound = size / MIN_FILL_RATE + SETUP_SECONDS
        result = in_process(fill, (size, site, data, args.batch), bound)
        crawled = in_process(
            crawl, (site, data, args.pages, args.seconds),
            args.seconds + DRAIN_SECONDS + SETUP_SECONDS,
        )
        result.update(crawled)
        requests = server.requests
    result["pages"] = sum(1 for r in requests if r.method == "GET" and r.path != "/robots.txt")
    result["strays"] = len(web.strays(requests))
    if not args.keep:
        shutil.rmtree(data, ignore_errors=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000],
                        help="URLs pending after the fill, one fresh process each")
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--pages", type=int, default=10_000, help="pages to crawl per size")
    parser.add_argument("--seconds", type=float, default=300.0,
                        help="at most this long a crawl per size")
    parser.add_argument("--batch", type=int, default=10_000, help="URLs per admit + commit")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the data")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    args = parser.parse_args()
    sizes = sorted(set(args.sizes))
    budget = config.load(environ={}).frontier.max_urls_per_host
    if min(sizes) < 1 or min(args.hosts, args.batch, args.pages) < 1 or args.seconds <= 0:
        parser.error("sizes, --hosts, --batch, --pages and --seconds must be positive")
    if budget and math.ceil(sizes[-1] / args.hosts) > budget:
        parser.error(f"{sizes[-1]:,} URLs over {args.hosts:,} hosts exceed the per-host budget "
                     f"(frontier.max_urls_per_host = {budget:,}): use more --hosts")
    base = Path(tempfile.mkdtemp(prefix="hive-growth-", dir=args.dir))
    print(f"frontier growth: {', '.join(f'{s:,}' for s in sizes)} URLs pending over "
          f"{args.hosts:,} hosts (the web at {ADDRESS} serves twice as many), "
          f"fill in batches of {args.batch:,}, then a crawl of {args.pages:,} pages "
          f"(at most {args.seconds:g} s); data in {base}",
          flush=True)
    results: dict[int, dict[str, Any]] = {}
    try:
        for size in sizes:
            results[size] = run_size(size, base, args)
            r = results[size]
            print(f"  {size:,}: filled in {r['fill_seconds']:.0f} s; after the crawl "
                  f"{r['pending_end']:,} pending, {r['bound']:,} hosts bound", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    columns = ("pending", "fill URLs/s", "anon fill", "anon open", "anon peak", "anon end",
               "VmRSS peak", "file peak", "store MB", "crawl s", "pages", "admitted")
    print("".join(f"{c:>12}" for c in columns) + "   (MB: MiB)")
    for r in results.values():
        print(f"{r['pending']:>12,}{r['fill_rate']:>12,.0f}"
              + "".join(f"{r[k]:>12,.1f}" for k in ("anon_fill", "anon_open", "anon_peak",
                                                    "anon_end", "vmrss_peak", "file_peak"))
              + f"{r['store_mb']:>12,.0f}{r['crawl_seconds']:>12,.0f}{r['pages']:>12,}"
              + f"{r['admitted']:>12,}")
    for size, r in results.items():
        if r["short"]:
            print(f"WARNING: {size:,}: {r['short']:,} pages short of --pages when --seconds ended")
    strays = sum(r["strays"] for r in results.values())
    if strays:
        print(f"WARNING: {strays} requests reached the tripwire or an unknown name")
    small, large = results[sizes[0]], results[sizes[-1]]
    ratio = large["anon_peak"] / small["anon_peak"]
    verdict = "PASS" if ratio <= LIMIT else "FAIL"
    print(f"RssAnon crawl peak, {sizes[-1]:,} vs {sizes[0]:,} pending: {ratio:.3f} "
          f"({verdict}: limit {LIMIT:.2f})")
    if args.keep:
        print(f"data kept in {base}")
    return 0 if ratio <= LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
