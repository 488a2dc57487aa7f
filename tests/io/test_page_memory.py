"""A worker's memory is bounded per page: pages of a million links, every fetch thread busy.

A page of 1,000,000 links (15 MB of HTML, 2.4 MB gzipped, under every cap)
used to cost ~600 MB while its links were extracted: a worker went from 37 MB
to 5.9 GB. Now a worker grows by at most

    threads x (2 x received + 2 x decoded + PAGE_PARSE_BYTES) + backlog x cap x 320 bytes

- a busy fetch thread holds its body twice as received and twice as decoded
  (hive.fetch.client keeps the pieces and the joined body at once), at most
  ``fetch.max_body_bytes`` and ``fetch.max_decoded_bytes``;
- and parses one slice at a time (``hive.fetch.parse.SLICE``, 256 KiB: ~14 MB of
  tree and nodes for the densest links) into at most
  ``parse.max_links_per_page`` links (10,000: ~3 MB), in
  ``hive.fetch.parse.PAGE_PARSE_BYTES`` (48 MiB) with room for the allocator's slack
  (glibc, arenas capped as in a worker process);
- a finished page waiting for the frontier thread (at most the backlog,
  ``hive.procs.worker.backlog``: 2 a thread, 16 at most) holds its links, ~320
  bytes each.

With the defaults that is 108 MiB a thread (32 threads and a backlog of 16:
3.4 GiB at worst, when every thread holds a 10 MB body that decodes to 20 MB).
The test holds the measured growth of a real worker process (ru_maxrss over
its RSS once started) to that bound; measured: 34-77 MB a thread for these
pages, alone and in a loaded suite (bound 83 MB).
"""

from __future__ import annotations

import gzip
import http.server
import multiprocessing
import resource
import threading
import time
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

import psutil
import pytest

from hive import config
from hive.fetch.parse import PAGE_PARSE_BYTES
from hive.procs.worker import backlog

pytestmark = pytest.mark.slow

LINKS = 1_000_000
THREADS = 4
PAGES_PER_HOST = 2
LINK_BYTES = 320


def page() -> bytes:
    return ("<html><body>" + "".join(f"<a href={i}>" for i in range(LINKS)) + "</body>").encode()


def serve(ports: Queue[int], busy: Any) -> None:
    """Every host's robots.txt is missing; every other path is the page of a million
    relative links (distinct per directory). The first THREADS page requests are held
    until all THREADS are in flight at once."""
    body = gzip.compress(page(), compresslevel=6)
    gate = threading.Barrier(THREADS, timeout=30)
    lock = threading.Lock()
    in_flight = [0]
    held = [0]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            if self.path == "/robots.txt":
                self._send(404, b"", [])
                return
            with lock:
                in_flight[0] += 1
                busy.value = max(busy.value, in_flight[0])
                held[0] += 1
                hold = held[0] <= THREADS
            try:
                if hold:
                    gate.wait()
                self._send(200, body, [("Content-Type", "text/html"),
                                       ("Content-Encoding", "gzip")])
            finally:
                with lock:
                    in_flight[0] -= 1

        def _send(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ports.put(server.server_address[1])
    server.serve_forever()


def crawl(cfg_data: dict[str, Any], directory: str, seeds: list[str], out: Queue[Any]) -> None:
    """A worker process: crawl the seeds, report memory before and at peak, and stats."""
    from hive.procs.lifecycle import limit_malloc_arenas
    from hive.procs.worker import Worker

    limit_malloc_arenas()  # as a worker process does (hive.procs.workerproc.run_worker)
    cfg = config.from_dict(cfg_data)
    worker = Worker(cfg, Path(directory) / "store", warc_dir=Path(directory) / "warc",
                    log_dir=Path(directory))
    start = psutil.Process().memory_info().rss
    worker.add(seeds, time.time())
    finished = worker.run_until_idle(timeout=240)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    stats = worker.stats()
    worker.close()
    out.put({"finished": finished, "start": start, "peak": peak, "stats": stats})


def test_a_worker_with_every_thread_on_a_million_link_page_stays_in_budget(
    tmp_path: Path,
) -> None:
    spawn = multiprocessing.get_context("spawn")
    ports: Queue[int] = spawn.Queue()
    busy = spawn.Value("i", 0)
    server = spawn.Process(target=serve, args=(ports, busy), daemon=True)
    server.start()
    try:
        port = ports.get(timeout=60)
        cfg = config.load(environ={}).replace(
            fetch={"threads": THREADS, "connect_timeout": 5.0, "read_timeout": 60.0,
                   "total_timeout": 120.0},
            dns={"resolve": ["*.big.test=127.0.0.1"], "allow_nets": ["127.0.0.1/32"]},
            # every fetch thread on a page at once, at one address: its limits off
            politeness={"min_delay": 0.01, "max_delay": 0.05, "ip_concurrency": 0},
            # Links are handed on and refused at admission, so the crawl ends with the seeds.
            frontier={"max_depth": 0},
            scope={"mode": "host"},
        )
        seeds = [
            f"http://h{host}.big.test:{port}/d{page}/"
            for host in range(THREADS) for page in range(PAGES_PER_HOST)
        ]
        out: Queue[Any] = spawn.Queue()
        worker = spawn.Process(target=crawl, args=(cfg.to_dict(), str(tmp_path), seeds, out))
        worker.start()
        report = out.get(timeout=300)
        worker.join(timeout=30)
    finally:
        server.kill()
        server.join()
    stats = report["stats"]
    assert report["finished"], stats
    assert busy.value == THREADS, "every fetch thread held a page at once"
    assert stats["worker/outcome/ok"] == len(seeds)
    assert stats["links/truncated_pages"] == len(seeds)
    assert stats["frontier/refused/max_depth"] == len(seeds) * cfg.parse.max_links_per_page
    html = page()
    budget = 2 * len(gzip.compress(html, compresslevel=6)) + 2 * len(html) + PAGE_PARSE_BYTES
    waiting = backlog(THREADS) * cfg.parse.max_links_per_page * LINK_BYTES
    grown = report["peak"] - report["start"]
    print(f"worker RSS {report['start'] / 2**20:.0f} MB at start, peak "
          f"{report['peak'] / 2**20:.0f} MB: {grown / THREADS / 2**20:.1f} MB per busy thread "
          f"(budget {budget / 2**20:.1f} MB, and {waiting / 2**20:.1f} MB for the backlog)")
    assert grown <= THREADS * budget + waiting, f"{grown / 2**20:.0f} MB over the start"
