"""CPU per page of hive's Fetcher against the HTTP clients it could have been built on.

A keep-alive HTTP/1.1 server in a child process serves one page on 127.0.0.1;
each client GETs it N times over one kept-alive connection and the script prints
the CPU seconds of this process (the client only) per page. Run by hand:

    python bench/bench_fetch.py [--pages 2000] [--size 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import multiprocessing
import threading
import time
from collections.abc import Callable
from multiprocessing.queues import Queue

import requests
import urllib3

from hive.fetch.client import Fetcher

UA = "hive-bench/1.0"


def serve(size: int, ports: Queue[int]) -> None:
    page = b"<html>" + b"x" * (size - 13) + b"</html>"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % size

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.wfile.write(head + page)  # one write: no Nagle/delayed-ACK stall

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ports.put(server.server_address[1])
    server.serve_forever()


def clients(port: int) -> dict[str, tuple[Callable[[], None], Callable[[], None]]]:
    """name -> (get one page, close)."""
    url = f"http://site.test:{port}/page"
    headers = {"Host": f"site.test:{port}", "User-Agent": UA}

    conn = http.client.HTTPConnection("127.0.0.1", port)

    def plain() -> None:
        conn.request("GET", "/page", headers=headers)
        conn.getresponse().read()

    pool = urllib3.HTTPConnectionPool("127.0.0.1", port, maxsize=1, retries=False)
    timeout = urllib3.Timeout(connect=10, read=20)

    def pooled() -> None:
        response = pool.urlopen(
            "GET", "/page", headers=headers, redirect=False, retries=False,
            preload_content=False, decode_content=False, timeout=timeout,
        )
        for _ in response.stream(65536):
            pass
        response.release_conn()

    session = requests.Session()
    session.trust_env = False

    def session_get() -> None:
        session.get(f"http://127.0.0.1:{port}/page", headers=headers).close()

    fetcher = Fetcher(UA, 10.0, 20.0, 60.0, 10 << 20, 20 << 20, 64)

    def hive() -> None:
        if fetcher.fetch(url, "127.0.0.1").outcome != "ok":
            raise RuntimeError("fetch failed")

    return {
        "http.client": (plain, conn.close),
        "urllib3 pool": (pooled, pool.close),
        "requests": (session_get, session.close),
        "hive Fetcher": (hive, fetcher.close),
    }


def measure(get: Callable[[], None], pages: int, threads: int = 1) -> tuple[float, float]:
    """(CPU ms per page, wall ms per page) over pages GETs split across threads."""
    for _ in range(100):
        get()

    def run() -> None:
        for _ in range(pages // threads):
            get()

    workers = [threading.Thread(target=run) for _ in range(threads)]
    cpu, wall = time.process_time(), time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu / pages * 1000, wall / pages * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--size", type=int, default=20000, help="page size in bytes")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    ports: Queue[int] = context.Queue()
    server = context.Process(target=serve, args=(args.size, ports), daemon=True)
    server.start()
    try:
        port = ports.get(timeout=30)
        table = clients(port)
        print(f"{args.pages} GETs of a {args.size}-byte page over loopback keep-alive")
        print(f"{'client':<22} {'CPU ms/page':>12} {'wall ms/page':>13}")
        for round_ in range(1, args.rounds + 1):
            for name, (get, _) in table.items():
                cpu, wall = measure(get, args.pages)
                print(f"{name:<22} {cpu:12.3f} {wall:13.3f}   round {round_}")
            cpu, wall = measure(table["hive Fetcher"][0], args.pages, threads=4)
            print(f"{'hive Fetcher, 4 thr.':<22} {cpu:12.3f} {wall:13.3f}   round {round_}")
        for _, close in table.values():
            close()
    finally:
        server.terminate()
        server.join()


if __name__ == "__main__":
    main()
