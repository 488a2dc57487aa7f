"""Memory of a 50,000-URL sitemap: the streaming reader alone, and a worker's whole pipeline.

Generates one full sitemap file (``MAX_URLS`` entries, each with loc, lastmod,
priority and changefreq; ~7 MB, gzipped ~0.4 MB), serves it plain and gzipped
from ``python -m http.server`` in a child process on 127.0.0.2, and measures
four cases, each in a fresh process of its own and run twice there (once with
tracemalloc on, once off, since tracing costs memory of its own):

* ``reader``: ``SitemapReader.read`` over the body in hand, as the pipeline
  calls it, counting the entries and keeping none (the body is read from disk
  before the measurement starts);
* ``pipeline``: ``Pipeline.run`` of a sitemap lease, as a worker's fetch thread
  runs it (the pipeline built and warmed on a 10-URL sitemap first): the HTTP
  fetch of the body, its WARC record, the reading, the scope check and the
  50,000 ``UrlRecord`` s handed on in ``Fetched.links`` (the frontier thread
  admits them in one call), and the recent-links cache they pass through.

* ``fanout N``: a whole worker (``Worker``, its fetch threads and its store) crawling
  N fan-out hosts of the test web (hive.testweb.sitemaps: an index of 50,000
  child indexes, each listing 50,000 more) for at most ``--seconds`` (120, as
  issue 27 measured it; the test web serves from a process of its own): the peak
  ``RssAnon`` of the worker's process (sampled every 50 ms; and before the crawl,
  the worker built), the size of its store's
  ``data.mdb`` and the URL states it holds, the files the server served and the
  refusals counted.

For the first four: the tracemalloc peak (Python allocations made during the case), the
RSS growth (``VmHWM`` after the case minus ``VmRSS`` before it, the high-water
mark reset through ``/proc/self/clear_refs`` first; Linux), and for the
pipeline what it still holds when ``run`` returns (``Fetched`` with its
records, the recent-links cache) and, of that, the records alone. Run by hand
from the repository root:

    python bench/sitemap_memory.py [--seconds 120] [--skip-files]
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from hive import config
from hive.core.lease import Lease, LeaseKind
from hive.core.recentlinks import RecentLinks
from hive.core.record import SITEMAP, UrlRecord
from hive.core.urls import host_hash
from hive.fetch.pipeline import Pipeline
from hive.fetch.sinks import SinkContext, Sinks
from hive.fetch.sitemaps import MAX_URLS, SitemapReader
from hive.frontier.verify import verify_store
from hive.outcome import Kind
from hive.procs.worker import Worker
from hive.testweb import Web, WebProcess

ADDRESS = "127.0.0.2"
HOST = "sm.bench.test"
NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
CASES = ("reader plain", "reader gzip", "pipeline plain", "pipeline gzip")
FANOUT_CASES = ("fanout 1", "fanout 4")
FANOUT_HOSTS = ("fanout", "fanout-1", "fanout-2", "fanout-3")
FILES = {"plain": "sitemap.xml", "gzip": "sitemap.xml.gz"}
MIB = 1 << 20


def urlset(port: int, count: int, section: str = "catalog") -> bytes:
    """A urlset of ``count`` entries on HOST:port, URLs of a shop's usual length (~60 chars)."""
    freqs = ("daily", "weekly", "monthly")
    entries = "".join(
        f"<url><loc>http://{HOST}:{port}/{section}/c{i % 97}/item-{i:06d}.html</loc>"
        f"<lastmod>2024-{1 + i % 12:02d}-{1 + i % 28:02d}T10:00:00+00:00</lastmod>"
        f"<changefreq>{freqs[i % 3]}</changefreq><priority>0.{i % 10}</priority></url>\n"
        for i in range(count)
    )
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{NS}">\n'
            f"{entries}</urlset>\n").encode()


def status() -> dict[str, int]:
    """VmRSS and VmHWM of this process, in bytes."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return {k: int(fields[k].split()[0]) * 1024 for k in ("VmRSS", "VmHWM")}


def measure(case: Callable[[], Callable[[], dict[str, float]]], trace: bool) -> dict[str, float]:
    """Set a case up, then run it under tracemalloc or with the RSS high-water mark reset."""
    run = case()
    gc.collect()
    if trace:
        tracemalloc.start()
        figures = run()
        figures["peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return figures
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = status()["VmRSS"]
    figures = run()
    figures["rss_growth"] = status()["VmHWM"] - before
    return {"rss_growth": figures["rss_growth"]}


def reader_case(body_file: Path) -> Callable[[], dict[str, float]]:
    body = body_file.read_bytes()
    url = f"http://{HOST}/sitemap.xml"

    def run() -> dict[str, float]:
        reader = SitemapReader(url)
        count = sum(1 for _ in reader.read(body))
        assert count == MAX_URLS and reader.error is None and reader.truncated is None
        return {"body": len(body)}

    return run


def pipeline_case(port: int, name: str, work: Path) -> Callable[[], dict[str, float]]:
    cfg = config.load(environ={}).replace(
        dns={"resolve": [f"{HOST}={ADDRESS}"], "allow_nets": [f"{ADDRESS}/32"]})
    pipeline = Pipeline(
        cfg, resolver=None, sinks=Sinks.from_config(SinkContext(cfg, "00", work / "warc")),
        crawl_delay=lambda hh: 0.0, closing=threading.Event(),
        recent=RecentLinks(int(cfg.hive.recent_links_mb * MIB)),
    )

    def fetch(path: str) -> object:
        key = f"{HOST}:{port}"
        record = UrlRecord(f"http://{key}/{path}", key, 0, "", 0, 0, 1, SITEMAP)
        return pipeline.run(Lease(LeaseKind.PAGE, host_hash(key), record, b""), None, time.time())

    warm = fetch("small.xml")
    assert getattr(warm, "kind", None) is Kind.SITEMAP_OK, warm

    def run() -> dict[str, float]:
        fetched = fetch(name)
        assert getattr(fetched, "kind", None) is Kind.SITEMAP_OK, fetched
        links: list[UrlRecord] = fetched.links  # type: ignore[attr-defined]
        assert len(links) == MAX_URLS
        if not tracemalloc.is_tracing():
            return {}
        held = tracemalloc.get_traced_memory()[0]
        links.clear()
        records = held - tracemalloc.get_traced_memory()[0]
        return {"held": held, "records": records, "size": getattr(fetched, "size", 0)}

    return run


def rss_anon() -> int:
    """RssAnon of this process, in bytes (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0


def fanout_case(args: argparse.Namespace) -> dict[str, float]:
    """A worker crawling ``hosts`` fan-out hosts for at most ``args.seconds``."""
    hosts = int(args.case.split()[1])
    work = Path(args.work)
    with WebProcess(Web(seed=1, hosts=1, pages=1, hostile=False), work / "requests.jsonl",
                    ADDRESS, sitemaps=True) as web:
        sm = web.sitemaps
        assert sm is not None
        cfg = config.load(environ={}).replace(
            dns={"resolve": [web.resolve], "allow_nets": [f"{ADDRESS}/32"]},
            politeness={"min_delay": 0.02, "max_delay": 0.2, "ip_concurrency": 0})
        worker = Worker(cfg, work / "store", log_dir=work / "logs")
        base = peak = rss_anon()
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.05):
                peak = max(peak, rss_anon())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        try:
            worker.add([f"sitemap:{sm.url(kind, '/sitemap_index.xml')}"
                        for kind in FANOUT_HOSTS[:hosts]], time.time())
            finished = worker.run_until_idle(timeout=args.seconds)
            stats = worker.stats()
        finally:
            worker.close()
            done.set()
            sampler.join()
        elapsed = time.monotonic() - started
        files = sum(1 for r in web.requests if r.path != "/robots.txt")
    report = verify_store(work / "store")
    return {
        "hosts": hosts, "finished": finished, "seconds": elapsed, "files": files,
        "refusals": stats.get("refusals/max_sitemaps_per_host", 0), "rss_anon_base": base,
        "rss_anon_peak": peak,
        "store": (work / "store" / "data.mdb").stat().st_size,
        "urls": report.counts.get("urls", 0),
    }


def child(args: argparse.Namespace) -> None:
    """One case in this fresh process: print its figures as JSON."""
    if args.case.startswith("fanout"):
        print(json.dumps(fanout_case(args)))
        return
    work = Path(args.work)
    kind, variant = args.case.split()
    out: dict[str, float] = {}

    def case() -> Callable[[], dict[str, float]]:
        if kind == "reader":
            return reader_case(work / "www" / FILES[variant])
        return pipeline_case(args.port, FILES[variant], work)

    for trace in (False, True):
        out.update(measure(case, trace))
    print(json.dumps(out))


def serve(root: Path) -> tuple[subprocess.Popen[str], int]:
    server = subprocess.Popen(
        [sys.executable, "-u", "-m", "http.server", "--bind", ADDRESS, "--directory", str(root),
         "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert server.stdout is not None
    line = server.stdout.readline()
    match = re.search(r" port (\d+)", line)
    if match is None:
        server.kill()
        raise SystemExit(f"http.server did not start: {line!r}")
    return server, int(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=120.0,
                        help="how long a fan-out crawl may run")
    parser.add_argument("--skip-files", action="store_true",
                        help="measure the fan-out crawls only")
    args = parser.parse_args()
    if args.case:
        child(args)
        return
    if not args.skip_files:
        files_table()
    fanout_table(args.seconds)


def fanout_table(seconds: float) -> None:
    """The fan-out crawls, each in a fresh process with a work directory of its own."""
    print(f"\n{'case':9} {'done':>5} {'seconds':>8} {'files':>6} {'refusals':>10} "
          f"{'RssAnon idle':>13} {'peak':>10} {'data.mdb':>10} {'URL states':>11}")
    for name in FANOUT_CASES:
        with tempfile.TemporaryDirectory() as tmp:
            result = subprocess.run(
                [sys.executable, __file__, "--case", name, "--work", tmp,
                 "--seconds", str(seconds)], capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise SystemExit(f"{name}: {result.stderr}")
            f = json.loads(result.stdout.splitlines()[-1])
        print(f"{name:9} {'yes' if f['finished'] else 'no':>5} {f['seconds']:8.1f} "
              f"{f['files']:6,} {f['refusals']:10,} {f['rss_anon_base'] / MIB:9.1f} MiB "
              f"{f['rss_anon_peak'] / MIB:6.1f} MiB "
              f"{f['store'] / MIB:6.1f} MiB {f['urls']:11,}")


def files_table() -> None:
    """The one-file cases: the reader and the pipeline over a full sitemap."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        www = work / "www"
        www.mkdir()
        server, port = serve(www)
        try:
            plain = urlset(port, MAX_URLS)
            (www / FILES["plain"]).write_bytes(plain)
            (www / FILES["gzip"]).write_bytes(gzip.compress(plain, 6))
            (www / "small.xml").write_bytes(urlset(port, 10, "warm-up"))
            print(f"{MAX_URLS:,} URLs: {len(plain) / 1e6:.1f} MB plain, "
                  f"{(www / FILES['gzip']).stat().st_size / 1e6:.2f} MB gzipped")
            print(f"{'case':15} {'tracemalloc peak':>17} {'RSS growth':>11} "
                  f"{'held after':>11} {'of it records':>14}")
            for name in CASES:
                result = subprocess.run(
                    [sys.executable, __file__, "--case", name, "--port", str(port),
                     "--work", str(work)], capture_output=True, text=True, check=False)
                if result.returncode != 0:
                    raise SystemExit(f"{name}: {result.stderr}")
                f = json.loads(result.stdout)
                held = f"{f['held'] / MIB:8.1f} MiB" if "held" in f else f"{'-':>12}"
                records = f"{f['records'] / MIB:9.1f} MiB" if "records" in f else f"{'-':>13}"
                print(f"{name:15} {f['peak'] / MIB:13.2f} MiB {f['rss_growth'] / MIB:7.2f} MiB "
                      f"{held} {records}")
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
