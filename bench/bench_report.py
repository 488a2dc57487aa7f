"""hive report on a big crawl log: the time to read, tally and draw a million lines.

Writes a synthetic crawl log (hive.fetch.crawllog's own writer) of ``--lines``
lines over ``--hosts`` hosts in ``--workers`` files, two hours of crawl with
the outcome mix of a real crawl (pages, redirects, 404s, timeouts, refusals,
robots.txt), then times ``collect`` (stream and tally) and ``render`` (matplotlib,
import included) apart, in wall and CPU seconds, and the peak memory of the
process::

    python bench/bench_report.py [--lines 1000000] [--hosts 20000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import tempfile
import time
from pathlib import Path

from hive.fetch.crawllog import CrawlLog
from hive.storage.datadir import DataDir

OUTCOMES = (
    ("ok", 200, "text/html; charset=utf-8", 70), ("ok", 200, "application/pdf", 3),
    ("ok", 200, "image/png", 2), ("redirect", 301, "text/html", 8),
    ("http_404", 404, "text/html", 6), ("timeout", None, "", 2), ("connect", None, "", 1),
    ("refused", None, "", 5), ("robots", None, "", 2), ("robots_ok", 200, "text/plain", 1),
)
REASONS = ("scope_domain", "max_depth", "max_urls_per_host", "trap_calendar")
SPAN = 7200.0


def write_log(directory: Path, lines: int, hosts: int, workers: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    kinds = [o[:3] for o in OUTCOMES]
    weights = [o[3] for o in OUTCOMES]
    names = [f"h{i:06d}.bench.test" for i in range(hosts)]
    logs = [CrawlLog(directory, DataDir.crawl_log_stem(w), 1 << 40) for w in range(workers)]
    start = time.time() - SPAN
    for n in range(lines):
        t = start + SPAN * n / lines
        host = names[min(int(rng.paretovariate(1.2)) - 1, hosts - 1) if n % 2 else
                     rng.randrange(hosts)]
        url = f"https://{host}/p/{rng.randrange(10**6)}.html"
        outcome, status, mime = rng.choices(kinds, weights)[0]
        fetched = outcome not in ("refused", "robots")
        logs[int(host[1:7]) % workers].write(
            t, outcome, url, status=status, size=rng.randrange(2_000, 60_000) if fetched else 0,
            download=rng.expovariate(5.0) if fetched else 0.0, via=f"https://{host}/",
            depth=min(int(rng.expovariate(0.4)), 30), mime=mime,
            reason=rng.choice(REASONS) if outcome == "refused" else "",
        )
    for log in logs:
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--keep", type=Path, help="Write the data directory here and keep it.")
    args = parser.parse_args()
    data = args.keep or Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        began = time.perf_counter()
        dd = DataDir(data)
        write_log(dd.logs, args.lines, args.hosts, args.workers)
        size = sum(p.stat().st_size for p in dd.crawl_logs())
        print(f"wrote {args.lines:,} lines ({size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - began:.1f}s")
        from hive.report.crawl import collect
        from hive.report.render import render

        began, cpu = time.perf_counter(), time.process_time()
        report = collect(data)
        read, read_cpu = time.perf_counter() - began, time.process_time() - cpu
        began, cpu = time.perf_counter(), time.process_time()
        page = render(report)
        drawn, drawn_cpu = time.perf_counter() - began, time.process_time() - cpu
        dd.report_page.write_text(page, encoding="utf-8")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"read and tallied {report.tally.lines:,} lines in {read:.1f}s "
              f"({read_cpu:.1f} CPU-s, {report.tally.lines / read_cpu:,.0f} lines per CPU-s); "
              f"drew the page in {drawn:.1f}s ({drawn_cpu:.1f} CPU-s, matplotlib import "
              f"included); {len(page) / 1e3:.0f} kB of HTML; peak RSS {peak:.0f} MB")
    finally:
        if args.keep is None:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
