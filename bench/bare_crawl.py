"""The bare row of bench_crawl.py: the floor of fetching and parsing a known list of pages.

    python bench/bare_crawl.py --urls FILE --address 127.0.0.2 --port PORT \
        [--procs 2] [--threads 2] [--timeout 600]

bench_crawl.py runs it as a child, so its CPU (its worker processes' included)
is that of a child process. It GETs every URL of the file once — the web's
in-scope pages, known in advance — with ``http.client`` over keep-alive
connections to ``--address`` (one per thread, the URL's host in the Host
header), extracts every ``<a href>`` with selectolax (lexbor, as hive does) and
joins it to the page URL with ``urllib.parse.urljoin``. Nothing else: no
frontier, no robots.txt, no politeness, no storage. ``--procs`` processes take
every ``procs``-th URL each and share it among ``--threads`` threads; each
stops at ``--timeout`` seconds. It prints one JSON line: pages, links, errors
and the largest peak RSS of its processes.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import queue
import resource
import threading
import time
from dataclasses import asdict, dataclass
from multiprocessing.queues import Queue
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser

USER_AGENT = "hive-bench-bare/1.0 (hive bench_crawl.py; +https://hive-crawler.invalid/bot)"


@dataclass(slots=True)
class Tally:
    pages: int = 0
    links: int = 0
    errors: int = 0
    maxrss_mb: float = 0.0

    def add(self, other: Tally) -> None:
        self.pages += other.pages
        self.links += other.links
        self.errors += other.errors
        self.maxrss_mb = max(self.maxrss_mb, other.maxrss_mb)


def fetch_all(
    urls: queue.SimpleQueue[str], address: str, port: int, deadline: float, tally: Tally,
    lock: threading.Lock,
) -> None:
    """One thread: GET URLs from ``urls`` over one keep-alive connection until none are left."""
    conn = http.client.HTTPConnection(address, port, timeout=30)
    mine = Tally()
    try:
        while time.monotonic() < deadline:
            try:
                url = urls.get_nowait()
            except queue.Empty:
                break
            parts = urlsplit(url)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            headers = {"Host": parts.netloc, "User-Agent": USER_AGENT}
            try:
                conn.request("GET", target, headers=headers)
                response = conn.getresponse()
                body = response.read()
            except (OSError, http.client.HTTPException):
                conn.close()  # http.client reconnects on the next request
                mine.errors += 1
                continue
            if response.status != 200:
                mine.errors += 1
                continue
            mine.pages += 1
            for node in LexborHTMLParser(body).tags("a"):
                href = node.attributes.get("href")
                if href:
                    urljoin(url, href)
                    mine.links += 1
    finally:
        conn.close()
        with lock:
            tally.add(mine)


def run_process(
    urls: list[str], address: str, port: int, threads: int, timeout: float, out: Queue[Tally]
) -> None:
    """One process: ``threads`` threads over ``urls``; puts its tally on ``out``."""
    work: queue.SimpleQueue[str] = queue.SimpleQueue()
    for url in urls:
        work.put(url)
    tally, lock = Tally(), threading.Lock()
    deadline = time.monotonic() + timeout
    pool = [
        threading.Thread(target=fetch_all, args=(work, address, port, deadline, tally, lock))
        for _ in range(threads)
    ]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    tally.maxrss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.put(tally)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=Path, required=True, help="one URL a line")
    parser.add_argument("--address", required=True, help="connect here for every host")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="threads per process")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    urls = args.urls.read_text().split()
    context = multiprocessing.get_context("spawn")
    out: Queue[Tally] = context.Queue()
    procs = [
        context.Process(
            target=run_process,
            args=(urls[i :: args.procs], args.address, args.port, args.threads, args.timeout, out),
        )
        for i in range(args.procs)
    ]
    for proc in procs:
        proc.start()
    total = Tally()
    for _ in procs:
        total.add(out.get(timeout=args.timeout + 30))
    for proc in procs:
        proc.join()
    print(json.dumps(asdict(total)))


if __name__ == "__main__":
    main()
