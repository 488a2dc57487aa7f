"""Links routed per CPU-second: the single splitter against every worker routing its own.

A hive hands every link to a host it does not own to that host's owner. Until
now one splitter process cut every batch by owner; now each worker cuts its own
(hive/procs/router.py) and the splitter carries only the supervisor's seeds.
This bench feeds the same synthetic batches (``--batch`` records each, links of
``--hosts`` hosts, as a worker's outbox sends them) to a ring of ``--workers``
workers over real ipc sockets, both ways, in one run:

- **splitter**: a source process pushes BATCH messages to a real ``Splitter``
  in a process of its own, which routes them to one sink process holding the
  workers' PULL inboxes; the splitter's CPU (user + system) per link is measured.
- **direct**: the source process routes the same batches itself through a
  ``Router``, as a worker does; the CPU of its routing (cutting, encoding,
  sending) per link is measured in that process.

Acknowledgements are left out of both (one per part, not per link). It prints
links routed per CPU-second each way and the projected pages/s limit for 16 and
64 workers, given ``--links-per-page`` handed on per page and ``--page-cpu-ms``
of a worker's CPU per page without routing (bench_crawl.py's figure)::

    python bench/bench_routing.py [--workers 16] [--batches 400] [--batch 500]
        [--ring-key domain|host] [--hosts 20000]

``--ring-key`` is the ring's scheme (hive.core.keys): ``domain`` places a host by its
registered domain (hosts are named ``h<n>.d<n/4>.com``: four a domain), looked up once
per host while the ring's memo holds it; more ``--hosts`` than the memo (100,000) makes
every look-up a miss, the worst case.
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

import psutil
import zmq

from hive.core import wire
from hive.core.keys import DOMAIN, SCHEMES
from hive.core.record import UrlRecord
from hive.core.ring import Ring
from hive.procs.endpoints import Endpoints, pull, push
from hive.procs.router import Router
from hive.procs.splitter import Splitter


def make_batches(count: int, size: int, hosts: int) -> list[bytes]:
    """Records frames as an outbox holds them: links of many hosts, a few per host, four
    hosts a registered domain."""
    frames = []
    for b in range(count):
        records = []
        for i in range(size):
            n = (b * size + i * 7) % hosts
            host = f"h{n}.d{n // 4}.com"
            records.append(UrlRecord(f"http://{host}/p/{b}/{i}.html", host, 3,
                                     via=f"http://{host}/"))
        frames.append(wire.encode_records(records))
    return frames


def sink(run_dir: str, workers: int, expect: int, done: Connection) -> None:
    """Every worker's inbox in one process: count the records that arrive."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    endpoints = Endpoints(Path(run_dir))
    inboxes = [pull(ctx, endpoints.worker(w), None) for w in range(workers)]
    poller = zmq.Poller()
    for sock in inboxes:
        poller.register(sock, zmq.POLLIN)
    done.send("ready")
    got = 0
    deadline = time.monotonic() + 600
    while got < expect and time.monotonic() < deadline:
        for sock, _ in poller.poll(1000):
            while True:
                try:
                    frames = sock.recv_multipart(flags=zmq.NOBLOCK)
                except zmq.Again:
                    break
                message = wire.decode(frames)
                assert isinstance(message, wire.Admit)
                got += len(message.records)
    done.send(got)
    for sock in inboxes:
        sock.close(linger=0)
    ctx.term()


def splitter_process(run_dir: str, ring: dict[str, int | str], stop: Connection) -> None:
    role = Splitter(Endpoints(Path(run_dir)), Ring.from_params(ring), overflow=1_000_000)
    role.open()
    while not stop.poll(0):
        role.wait(role.loop_once(time.time()))
    role.close()


def routed_by_splitter(run_dir: Path, ring: Ring, frames: list[bytes], links: int) -> float:
    """Links per CPU-second of a real splitter process."""
    workers = ring.procs
    stop_here, stop_there = multiprocessing.Pipe()
    split = multiprocessing.Process(target=splitter_process,
                                    args=(str(run_dir), ring.params, stop_there))
    split.start()
    done_here, done_there = multiprocessing.Pipe()
    drain = multiprocessing.Process(target=sink, args=(str(run_dir), workers, links, done_there))
    drain.start()
    assert done_here.recv() == "ready"
    ps = psutil.Process(split.pid)
    time.sleep(0.5)  # the splitter is open and idle
    before = ps.cpu_times()
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    source = push(ctx, Endpoints(run_dir).splitter, None)
    for seq, frame in enumerate(frames, 1):
        source.send_multipart(wire.encode_batch_data(1, seq, frame))
    got = done_here.recv()
    after = ps.cpu_times()
    stop_here.send("stop")
    split.join(10)
    drain.join(10)
    source.close(linger=0)
    ctx.term()
    assert got == links, (got, links)
    cpu = (after.user - before.user) + (after.system - before.system)
    return links / cpu


def routed_directly(run_dir: Path, ring: Ring, frames: list[bytes], links: int) -> float:
    """Links per CPU-second of the routing a worker does itself, measured in its process."""
    workers = ring.procs
    done_here, done_there = multiprocessing.Pipe()
    drain = multiprocessing.Process(target=sink, args=(str(run_dir), workers, links, done_there))
    drain.start()
    assert done_here.recv() == "ready"
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    router = Router(ctx, Endpoints(run_dir), ring, None, 1_000_000, "route")
    start = time.process_time()
    for seq, frame in enumerate(frames, 1):
        router.split(1, seq, wire.record_routes(frame))
        router.flush()
    while router.flush():
        pass
    cpu = time.process_time() - start
    got = done_here.recv()
    drain.join(10)
    router.close()
    ctx.term()
    assert got == links, (got, links)
    return links / cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--batch", type=int, default=500, help="records a batch")
    parser.add_argument("--hosts", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ring-key", choices=SCHEMES, default=DOMAIN)
    parser.add_argument("--links-per-page", type=float, default=19.0,
                        help="links a page hands on to other workers")
    parser.add_argument("--page-cpu-ms", type=float, default=1.3,
                        help="a worker's CPU per page without routing")
    args = parser.parse_args()
    multiprocessing.set_start_method("spawn")
    frames = make_batches(args.batches, args.batch, args.hosts)
    links = args.batches * args.batch
    best = {"splitter": 0.0, "direct": 0.0}
    for _ in range(args.rounds):
        for name, measure in (("splitter", routed_by_splitter), ("direct", routed_directly)):
            with tempfile.TemporaryDirectory(prefix="hive-route-", dir="/tmp") as run_dir:
                # A new ring each round: its memo of owners starts empty, as a worker's does.
                ring = Ring(args.workers, key=args.ring_key)
                best[name] = max(best[name], measure(Path(run_dir), ring, frames, links))
    per_page = args.links_per_page
    print(f"{links} links of {args.hosts} hosts in {args.batches} batches of {args.batch}, "
          f"ring of {args.workers} workers by {args.ring_key}, best of {args.rounds}:")
    for name, rate in best.items():
        print(f"  {name:8s} {rate:10,.0f} links per CPU-second "
              f"({1e6 / rate:.2f} CPU-us a link)")
    print(f"  direct/splitter: {best['direct'] / best['splitter']:.2f}x per CPU-second")
    page_s = args.page_cpu_ms / 1000
    for workers in (16, 64):
        crawl = workers / page_s  # pages/s if every worker has a core and routing were free
        via_splitter = min(crawl, best["splitter"] / per_page)
        direct = workers / (page_s + per_page / best["direct"])
        print(f"  {workers} workers at {args.page_cpu_ms} CPU-ms a page, {per_page:g} links "
              f"handed on a page: splitter limits the hive to {via_splitter:,.0f} pages/s; "
              f"routing in the workers to {direct:,.0f} pages/s "
              f"({per_page / best['direct'] / page_s:.1%} of a page's CPU)")


if __name__ == "__main__":
    main()
