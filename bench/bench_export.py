"""hive export on a big crawl: the time and peak memory of a Parquet index and a WACZ.

Synthesizes a crawl's data directory cheaply with hive's own writers: ``--captures``
fetches over ``--hosts`` hosts in ``--workers`` workers, each a request and response
record pair (hive.fetch.warc.WarcWriter, a small page each, files rotated at
``--warc-mb``, each closed file's CDXJ beside it) and its crawl-log line
(hive.fetch.crawllog.CrawlLog, rotated), with a real crawl's mix (pages, redirects,
404s, images, robots.txt), plus one refusal line for every ten fetches. Then runs
``hive export --format parquet`` and ``--format wacz`` on it, each in a child process,
and reports for each its wall and CPU seconds and the child's peak RSS::

    python bench/bench_export.py [--captures 1000000] [--keep DIR] [--formats parquet,wacz]

Run it at two sizes (e.g. 100,000 and 1,000,000): the peak RSS should not follow.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hive.fetch.crawllog import CrawlLog
from hive.fetch.warc import WarcWriter
from hive.storage.datadir import DataDir

ROOT = Path(__file__).resolve().parents[1]
START = 1_780_000_000.0
SPAN = 7200.0
# (outcome, status, content type, weight)
MIX = (
    ("ok", 200, "text/html; charset=utf-8", 80), ("ok", 200, "image/png", 5),
    ("redirect", 301, "text/html", 8), ("http_404", 404, "text/html", 6),
    ("robots_ok", 200, "text/plain", 1),
)


def page(rng: random.Random, url: str) -> bytes:
    words = " ".join(f"w{rng.randrange(5000)}" for _ in range(rng.randrange(20, 120)))
    return f"<!doctype html><title>{url}</title><p>{words}</p>\n".encode()


def synthesize(data: Path, captures: int, hosts: int, workers: int, warc_mb: int,
               seed: int = 1) -> None:
    rng = random.Random(seed)
    dd = DataDir(data)
    kinds = [m[:3] for m in MIX]
    weights = [m[3] for m in MIX]
    for worker in range(workers):
        count = captures // workers + (worker < captures % workers)
        log = CrawlLog(dd.logs, dd.crawl_log_stem(worker), 64 << 20)
        with WarcWriter(dd.warc, f"hive-{worker:02d}", warc_mb << 20, 1, "bench",
                        metadata_records=False) as writer:
            for i in range(count):
                host = f"h{rng.randrange(hosts):06d}.bench.test"
                outcome, status, mime = rng.choices(kinds, weights)[0]
                path = "/robots.txt" if outcome == "robots_ok" else f"/w{worker}/p/{i}.html"
                url = f"http://{host}{path}"
                when = START + SPAN * i / count
                headers = [("Content-Type", mime)]
                body = page(rng, url) if mime.startswith("text/") else os.urandom(300)
                if status == 301:
                    headers.append(("Location", f"http://{host}/w{worker}/moved/{i}.html"))
                    body = b""
                headers.append(("Content-Length", str(len(body))))
                request = (f"GET {path} HTTP/1.1\r\nHost: {host}\r\n"
                           "User-Agent: hive/bench\r\n\r\n").encode()
                writer.write_exchange(
                    url=url, ip="127.0.0.2", request=request,
                    status_line=f"HTTP/1.1 {status} X", response_headers=headers, body=body,
                    date=when,
                )
                log.write(when + 0.01, outcome, url, status=status, size=len(body),
                          download=0.01, via=f"http://{host}/", depth=1 + i % 7,
                          mime=mime, hop="L" * (1 + i % 7))
                if i % 10 == 0:
                    log.write(when + 0.02, "refused", f"http://{host}/out/{i}", depth=9,
                              via=url, reason="max_depth", message="past max_depth")
        log.close()


def size_of(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


# The child reports its own peak: VmHWM, the high-water mark of its address space. Not
# ru_maxrss: Linux counts into a child's the RSS its parent had when it forked (exec
# keeps it), so a child of this script, grown by synthesizing, would inherit that figure.
CHILD = (
    "import atexit, runpy, sys\n"
    "def peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            print('peak-kib', line.split()[1], file=sys.stderr)\n"
    "atexit.register(peak)\n"
    "sys.argv = ['hive', *sys.argv[1:]]\n"
    "runpy.run_module('cli', run_name='__main__')\n"
)


def run(data: Path, form: str, out: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (os.wait4: that one child's) and peak RSS (bytes, its
    VmHWM) of a child ``hive export``."""
    start = time.monotonic()
    with tempfile.TemporaryFile("w+") as output:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, "export", "--data", str(data), "--format", form,
             "--out", str(out)], cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        output.seek(0)
        said = output.read().strip().splitlines()
    if child.returncode != 0:
        raise SystemExit("\n".join(said))
    peak = [int(line.split()[1]) for line in said if line.startswith("peak-kib ")]
    print("\n".join(line for line in said if not line.startswith("peak-kib ")))
    return wall, usage.ru_utime + usage.ru_stime, peak[-1] * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--captures", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--warc-mb", type=int, default=100)
    parser.add_argument("--formats", default="parquet,wacz")
    parser.add_argument("--keep", type=Path, help="keep the crawl and exports here")
    args = parser.parse_args()
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="bench-export-"))
    data = tmp / "data"
    try:
        if not data.exists():
            started = time.monotonic()
            synthesize(data, args.captures, args.hosts, args.workers, args.warc_mb)
            print(f"synthesized {args.captures:,} captures ({size_of(data) / 1e6:,.0f} MB) in "
                  f"{time.monotonic() - started:.0f}s")
        for form in args.formats.split(","):
            out = tmp / ("crawl.parquet" if form == "parquet" else "crawl.wacz")
            wall, cpu, rss = run(data, form, out)
            print(f"{form}: {wall:.1f}s wall, {cpu:.1f} CPU-s "
                  f"({args.captures / cpu:,.0f} captures per CPU-s), peak RSS {rss / 1e6:.0f} MB, "
                  f"{out.stat().st_size / 1e6:,.0f} MB written")
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
