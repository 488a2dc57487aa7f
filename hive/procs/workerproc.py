"""The worker process: a Worker wrapped in the hive's sockets, locks and hand-off.

It owns ``DATA/worker-NN`` (a flock admits one process), binds its PULL inbox
(admissions, acknowledgements, commands), routes the batches of discovered links
in its outbox to their owners and acknowledges admissions to their origins
itself (hive/procs/router.py: no single process routes every link), and pushes
its counters to the supervisor. The order that makes the hand-off safe:

1. admissions are committed before they are acknowledged;
2. discovered links enter the outbox in the transaction that records the fetch
   outcome that found them, and are sent only once that commits;
3. a batch leaves the outbox only when every owner has acknowledged its part.

On a cluster, a machine the operator dropped for good (``hive drop``: its
workers named in the fence, hive/procs/fence.py) acknowledges nothing again: the
worker takes its records out of the outbox's batches (the rest go again as new
batches) and refuses the links to its hosts found later, each URL counted as
refused with the reason ``machine_dropped`` (``refusals/machine_dropped`` in the
stats, a REFUSED line in the crawl log up to ``refusals_logged_per_host``).

Started by the supervisor with the ``spawn`` method through ``run_worker``,
which opens its own ZeroMQ context and LMDB environment. When the endpoints
recipe names CURVE keys, the inbox is a CURVE server behind the process's own
ZAP authenticator and every sender is a CURVE client (hive/procs/curve.py).
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any

import zmq

from hive.config import Config, from_dict
from hive.core import wire
from hive.core.record import UrlRecord
from hive.core.ring import Ring
from hive.core.urls import host_hash
from hive.outcome import Kind
from hive.procs.endpoints import Endpoints, incoming, pull, push
from hive.procs.fence import Fence
from hive.procs.lifecycle import (
    Lock,
    Runner,
    child_signals,
    die_with_parent,
    limit_malloc_arenas,
    raise_open_files,
    setup_logging,
)
from hive.procs.outbox import Outbox
from hive.procs.router import Router
from hive.procs.worker import Worker
from hive.storage.datadir import DataDir

log = logging.getLogger(__name__)

DRAIN_PER_TURN = 200
# Answers to the supervisor's adds and denies (see ``_answer``) ride in the stats reports for
# ANSWER_TTL seconds (hive add and deny wait 10 s for them), ANSWERS of them at most.
ANSWERS = 512
ANSWER_TTL = 60.0
# The refusal reason of a URL a machine dropped for good owned.
DROPPED = "machine_dropped"
# How long a thread may hold the GIL while another waits for it. A worker's fetch threads
# hand it over themselves at every socket wait; the interpreter's forced hand-over (every
# 5 ms by default) only cuts the stretches of Python that run without one (a page's parse,
# a frontier turn), and each cut costs a pair of context switches. 50 ms took 2.8 % off the
# crawl benchmark's CPU a page (median of 20 alternating pairs, bench/README.md). A thread
# may wait longer for the GIL, so a request can go out later, never sooner: a host's clock
# starts when its response has been read.
GIL_SWITCH_INTERVAL = 0.05


class WorkerProcess:
    def __init__(self, cfg: Config, data_dir: Path, worker_id: int, endpoints: Endpoints,
                 ring: Ring) -> None:
        self.cfg = cfg
        self.ring = ring
        self.data_dir = data_dir
        self.worker_id = worker_id
        self.endpoints = endpoints
        self.stopping = False
        self.reports = 0
        self._next_stats = 0.0
        self.answers: dict[str, tuple[int, float]] = {}
        # A cluster's machine is fenced (hive/procs/fence.py); a hive on one machine is not.
        self.fence = Fence(enabled=bool(endpoints.peers))

    def open(self) -> None:
        dd = DataDir(self.data_dir)
        directory = dd.worker(self.worker_id)
        directory.mkdir(parents=True, exist_ok=True)
        self.lock = Lock(dd.store_lock(directory), f"worker {self.worker_id}")
        self.ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.curve = self.endpoints.curve(self.ctx)
        self.inbox = pull(self.ctx, self.endpoints.worker(self.worker_id), self.curve)
        self.router = Router(self.ctx, self.endpoints, self.ring, self.curve,
                             self.cfg.hive.overflow, "route",
                             int(self.cfg.hive.overflow_mb * (1 << 20)))
        self.supervisor = push(self.ctx, self.endpoints.supervisor, self.curve)
        self.worker = Worker(
            self.cfg, directory, worker_id=self.worker_id,
            warc_dir=dd.warc, log_dir=dd.logs,
            on_links=self._links, ring=self.ring,
        )
        self.worker.may_lease = lambda: self.fence.holds(time.time())
        if self.worker.addresses is not None:
            self.worker.addresses.send = self.router.send
        self.outbox = Outbox(
            self.worker.frontier.store, resend_after=self.cfg.hive.resend_after,
            max_tries=self.cfg.hive.max_tries, window=self.cfg.hive.outbox_window,
        )
        self.poller = zmq.Poller()
        self.poller.register(self.inbox, zmq.POLLIN)
        self.poller.register(self.worker.wake_fd, zmq.POLLIN)
        log.info("worker %d open: %d pending, %d batches in the outbox",
                 self.worker_id, self.worker.frontier.pending, len(self.outbox))

    def _links(self, records: list[UrlRecord], now: float) -> None:
        """Keep a finished page's links in the outbox, to go to their owners (but those a
        dropped machine owned: refused)."""
        if self.fence.dropped:
            owner, dropped = self.ring.owner, self.fence.dropped
            self._refuse_dropped([r for r in records if owner(r.host_key) in dropped], now)
            records = [r for r in records if owner(r.host_key) not in dropped]
        if records:
            self.outbox.put(records, now)

    def _drop(self, workers: frozenset[int], now: float) -> None:
        """Workers of a machine dropped for good: what the outbox holds for them is refused,
        and their addresses pass to live owners."""
        owner, discarded = self.ring.owner, 0
        for gone in self.outbox.discard(lambda r: owner(r.host_key) in workers, now):
            self._refuse_dropped(gone, now)
            discarded += len(gone)
        self.worker.frontier.commit(now)
        if self.worker.addresses is not None:
            ring, fence = self.ring, self.fence
            self.worker.addresses.reown(lambda address: fence.owner(ring, address))
        log.warning("worker %d: workers %s dropped: %d URLs held for them refused",
                    self.worker_id, sorted(workers), discarded)

    def _refuse_dropped(self, records: list[UrlRecord], now: float) -> None:
        note = self.worker.frontier.refusals.note
        for record in records:
            message = note(DROPPED, record.host_key)
            if message is not None:
                self.worker.crawl_log.write(now, Kind.REFUSED, record.url, via=record.via,
                                            depth=record.depth, reason=DROPPED,
                                            message=message)

    def _handle(self, frames: list[bytes], now: float,
                acks: list[tuple[int, int, int, int]]) -> None:
        try:
            message = wire.decode(frames)
        except wire.WireError as exc:
            self.worker.counts["wire/bad"] += 1
            log.warning("dropped a malformed message: %s", exc)
            return
        if isinstance(message, wire.Admit | wire.Ack) and not self.fence.accepts(
                message.sender, message.epoch):
            return
        if isinstance(message, wire.Admit):
            if message.origin == wire.SUPERVISOR_ORIGIN:
                self._admit_seeds(message, now)
            else:
                self.worker.admit(list(message.records), now)
            acks.append((message.origin, message.seq, message.part, message.parts))
        elif isinstance(message, wire.Ack):
            self.outbox.ack(message.seq, message.part, message.parts)
        elif isinstance(message, wire.Command):
            self._command(message.cmd, message.args, now)
        elif (isinstance(message, wire.AddressAsks | wire.AddressGrants)
              and self.worker.addresses is not None):
            self.worker.addresses.receive(message, now)
        else:
            self.worker.counts["wire/unexpected"] += 1

    def _answer(self, key: str, value: int, now: float) -> None:
        """Tell the supervisor, through the next stats reports, how an add or a deny went.

        Stats values are numbers, so the question is in the key: ``add/<seq>/new``,
        ``/seen`` and ``/refused`` for batch ``seq`` of seeds (``hive add``), and
        ``deny/<id>`` (answered) and ``deny/<id>/<i>`` (its i-th host is known here)
        for a deny. The first answer stands (a resent batch is all ``seen``); the
        oldest are dropped beyond ANSWERS, and each after ANSWER_TTL.
        """
        if key in self.answers:
            return
        if len(self.answers) >= ANSWERS:
            del self.answers[next(iter(self.answers))]
        self.answers[key] = value, now

    def _expire_answers(self, now: float) -> None:
        answers = self.answers
        while answers and now - next(iter(answers.values()))[1] > ANSWER_TTL:
            del answers[next(iter(answers))]

    def _admit_seeds(self, message: wire.Admit, now: float) -> None:
        """Admit the supervisor's part of a batch of seeds, counting what became of them."""
        counts = self.worker.frontier.counts

        def known() -> int:  # already admitted: a duplicate, or a stronger find of a pending URL
            return counts.get("frontier/duplicates", 0) + counts.get("frontier/upgraded", 0)

        seen = known()
        new = self.worker.admit(list(message.records), now)
        seen = known() - seen
        if f"add/{message.seq}/new" not in self.answers:
            self._answer(f"add/{message.seq}/new", new, now)
            self._answer(f"add/{message.seq}/seen", seen, now)
            self._answer(f"add/{message.seq}/refused", len(message.records) - new - seen, now)

    def _command(self, cmd: str, args: dict[str, Any], now: float) -> None:
        if cmd == "stop":
            log.info("worker %d: stop requested", self.worker_id)
            self.stopping = True
        elif cmd == "fence":
            try:
                dropped = self.fence.update(args)
            except ValueError as exc:
                self.worker.counts["wire/bad_fence"] += 1
                log.warning("worker %d: %s", self.worker_id, exc)
            else:
                if dropped:
                    self._drop(dropped, now)
        elif cmd == "deny":
            frontier, ask = self.worker.frontier, args.get("id")
            for i, host in enumerate(args.get("hosts", [])):
                if isinstance(host, str):
                    known = frontier.back.host(host_hash(frontier.politeness_key(host)))
                    if isinstance(ask, int) and known is not None:
                        self._answer(f"deny/{ask}/{i}", 1, now)
                    frontier.block(host, Kind.DENIED, now)
            if isinstance(ask, int):
                self._answer(f"deny/{ask}", 1, now)
        else:
            self.worker.counts["wire/unknown_command"] += 1
            log.warning("worker %d: unknown command %r", self.worker_id, cmd)

    def loop_once(self, now: float) -> float:
        acks: list[tuple[int, int, int, int]] = []
        for frames in incoming(self.inbox, DRAIN_PER_TURN):
            self._handle(frames, now, acks)
        if acks:
            self.worker.frontier.commit(now)  # an admission is acknowledged once committed
            for ack in acks:
                self.router.ack(*ack, self.fence.epoch, self.worker_id)
        if self.stopping:
            self.worker.stopping = True
        wait = self.worker.loop_once(now)
        if self.fence.holds(now):
            for seq, data in self.outbox.due(now):
                self.router.split(self.worker_id, seq, wire.record_routes(data), self.fence.epoch)
        if self.router.flush():
            wait = 0.0
        if now >= self._next_stats:
            self.report(now)
            self._next_stats = now + self.cfg.hive.stats_interval
        resend = self.outbox.next_due()
        if resend is not None:
            wait = min(wait, max(resend - now, 0.0))
        return min(wait, max(self._next_stats - now, 0.0))

    def _send(self, sock: zmq.Socket[bytes], frames: list[bytes]) -> None:
        try:
            sock.send_multipart(frames, flags=zmq.NOBLOCK)
        except zmq.Again:
            self.worker.counts["wire/send_full"] += 1

    def report(self, now: float) -> None:
        stats: dict[str, wire.JsonScalar] = dict(self.worker.stats())
        stats.update(self.outbox.counts)
        stats.update(self.router.counts)
        stats.update(self.fence.counts)
        self._expire_answers(now)
        stats.update((key, value) for key, (value, _) in self.answers.items())
        self.reports += 1
        stats.update({
            "outbox/size": len(self.outbox),
            "hive/idle": self.worker.idle and not len(self.outbox), "hive/report": self.reports,
            "hive/time": now,
        })
        self._send(self.supervisor, wire.encode_stats(self.worker_id, stats))

    def wait(self, seconds: float) -> None:
        self.poller.poll(max(int(seconds * 1000), 0))
        self.worker.drain_wake()

    @property
    def finished(self) -> bool:
        return self.stopping and self.worker.in_flight == 0

    def close(self) -> None:
        self.worker.drain(timeout=self.cfg.fetch.total_timeout + 5)
        self.report(time.time())
        self.worker.close()
        self.router.flush()
        self.router.close()
        for sock in (self.inbox, self.supervisor):
            sock.close(linger=0)
        if self.curve is not None:
            self.curve.close()
        self.ctx.term()
        self.lock.release()
        log.info("worker %d closed", self.worker_id)


def run_worker(cfg_data: dict[str, Any], data_dir: str, worker_id: int,
               endpoints: dict[str, Any], ring: dict[str, int | str], parent: int,
               failed: str) -> None:
    """The spawned worker's entry point: everything is rebuilt from plain data.

    It takes SIGTERM (the supervisor's word), never a terminal's SIGINT; if it
    cannot start, it leaves its message in ``failed`` and exits START_FAILED."""
    child_signals()
    die_with_parent(parent)
    cfg = from_dict(cfg_data)
    name = DataDir.worker_name(worker_id)
    setup_logging(cfg.log.level, DataDir(Path(data_dir)).log_file(name), name)
    log.info("open-file limit %d", raise_open_files())
    if not limit_malloc_arenas():
        log.info("malloc arenas not capped (not glibc)")
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    role = WorkerProcess(cfg, Path(data_dir), worker_id, Endpoints.from_dict(endpoints),
                         Ring.from_params(ring))
    runner = Runner(role, f"worker {worker_id}", signals=(signal.SIGTERM,),
                    failure_file=Path(failed))
    raise SystemExit(runner.run())

