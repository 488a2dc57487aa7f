"""The supervisor (`hive start`): one hive per data directory, its children, its control socket.

It takes the data directory's lock, checks the stores (hive/procs/startcheck.py),
records ``DATA/hive.json`` (endpoints, pids, ring, the config in force), starts
the splitter and N workers with the ``spawn`` method, and then, each turn:

- answers the control socket (status, stop, add, deny, and the owners' answers
  to an add or a deny, which workers give in their stats reports: parsed and
  answered by hive/procs/requests.py); a bad request gets an error reply and
  never takes it down;
- measures what ``status`` shows: pages this start fetched per second over the
  last minute, and each child's CPU over the last CPU_WINDOW seconds, sampled
  on its own turns (not when a client asks);
- keeps seeds and ``hive add`` URLs in an outbox of its own
  (``DATA/supervisor``) until the owners acknowledge them, like any worker;
- restarts a child that died, after a backoff that doubles with each death in
  the window; more deaths than ``max_restarts`` in ``restart_window`` stop the
  hive with a message instead of looping; a child that cannot start (a
  configuration, storage or OS error in its ``open()``) or stops on a storage
  error is not restarted: the hive stops with the child's message;
- ends the batch without races: every worker reports monotonic counters and an
  idle flag; after two successive rounds (each worker reported anew) in which
  all are idle, all outboxes are empty and no counter moved, the hive stops
  (the rule: hive/procs/batchend.py).

Workers are known by their integer id, in their reports and in their ``Child``
slots (hive/procs/children.py, which also holds the restart policy); what
``status`` shows is merged from the reports in hive/procs/stats.py.

Every stop records why (``ended``) and the ``ExitCode`` that ``hive start``
exits with. Children start with SIGINT ignored (hive/procs/lifecycle.py): a
terminal's Ctrl-C is the supervisor's to act on, and it stops them warmly
with SIGTERM. On exit the private socket directory is removed.

A restart on an existing data directory resumes: the stores hold every pending
URL and the outboxes every unacknowledged batch. A restart with another ring
(another --procs, vnodes or seed) first moves every host to the worker the new
ring names, before any child starts (hive/procs/resize.py); what moved is logged and
kept in ``status`` under ``resize``.

Sockets: ``hive.transport`` picks ipc (the default) or tcp. On tcp (loopback
included: a machine has other users, and any of them can connect to a loopback
port), or when ``hive.curve`` is ``always``, the hive's CURVE keys
(``DATA/keys``, made on the first such start and reused after) go into the
endpoints recipe: every socket that binds is then a CURVE server behind its
process's ZAP authenticator and every socket that connects a CURVE client
(hive/procs/curve.py). Children and the CLI find the key directory in the recipe.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import zmq

from hive import __version__
from hive.config import Config
from hive.core import wire
from hive.core.record import UrlRecord
from hive.errors import HiveError, URLError
from hive.frontier.refusals import describe
from hive.procs import hoststatus
from hive.procs.batchend import BatchEnd
from hive.procs.children import CPU_SAMPLE, CPU_WINDOW, Child, worker_main
from hive.procs.control import ControlServer
from hive.procs.curve import ensure_keys
from hive.procs.endpoints import Endpoints, make_run_dir, pull, push, remove_run_dir
from hive.procs.lifecycle import (
    START_FAILED,
    STORE_FAILED,
    ExitCode,
    Lock,
    read_failure,
    spawn_quietly,
)
from hive.procs.outbox import Outbox
from hive.procs.requests import Queued, add_answer, deny_answer, deny_keys
from hive.procs.resize import Resize, resize_if_changed, start_ring
from hive.procs.seeds import seed_record, shown
from hive.procs.startcheck import check_stores, pages_done
from hive.procs.stats import HiveStats, Status, Waiting, WorkerReport
from hive.storage.datadir import DataDir
from hive.storage.store import Store

if TYPE_CHECKING:
    from hive.procs.metrics import MetricsServer

log = logging.getLogger(__name__)

SEED_BATCH = 1000
STOP_GRACE = 60.0
# The supervisor's inbox takes only counters and acknowledgements, never batches.
SUPERVISOR_INBOX_BYTES = 8 << 20


class Supervisor:
    def __init__(
        self, cfg: Config, data_dir: Path, procs: int, *, seeds: Sequence[UrlRecord] = (),
        max_pages: int = 0, recreate_missing: bool = False,
    ) -> None:
        self.cfg = cfg
        self.data_dir = data_dir
        self.dd = DataDir(data_dir)
        self.procs = procs
        # The ids of this supervisor's workers, and how many the ring has: the same on one
        # machine; a cluster's machine (hive/procs/cluster_machine.py) runs a slice of them.
        self.workers = range(procs)
        self.ring_procs = procs
        # Whether the end of the batch stops this hive: a cluster's machine only reports it.
        self.batch_end_stops = True
        self.quiet = False
        self.seeds = list(seeds)
        self.max_pages = max_pages
        self.recreate_missing = recreate_missing
        self.stopping = False
        self.ended = ""
        self.exit_code = ExitCode.ENDED
        self.children: list[Child] = []
        self.endpoints: Endpoints | None = None
        self.started = time.time()
        self.stats = HiveStats(range(procs))
        self.batch = BatchEnd(range(procs))
        # Messages the inbox took that were malformed or from no worker of this hive.
        self.bad_messages = 0
        self._stop_sent = False
        self._children_stopped = False
        self._stop_deadline = 0.0
        self._next_cpu = 0.0
        self.resized: Resize | None = None
        self._last_turn = time.time()
        # When the supervisor last began judging each worker's silence (see _kill_hung).
        self._heard: dict[int, float] = {}
        self._denies = 0
        self.metrics: MetricsServer | None = None

    # -- open ------------------------------------------------------------------------

    def open(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.lock = Lock(self.dd.lock, f"the hive at {self.data_dir}")
        # What open() has made is unmade if a later step fails: no socket directory,
        # bound socket or lock outlives a start that did not happen.
        with contextlib.ExitStack() as undo:
            undo.callback(self.lock.release)
            try:
                self._open(undo)
            except zmq.ZMQError as exc:
                raise HiveError(f"cannot open the hive's sockets: {exc}") from exc
            undo.pop_all()
        log.info("hive %s started on %s with %d workers", __version__, self.data_dir, self.procs)

    def _check(self, previous: dict[str, Any] | None) -> None:
        """Check the stores before any child starts, resizing them to a changed ring."""
        check_stores(self.dd, self.procs, previous, recreate_missing=self.recreate_missing)
        self.ring = start_ring(self.cfg, self.procs, previous)
        self.resized = resize_if_changed(self.data_dir, self.cfg, self.procs, previous)
        if self.resized is not None:
            log.info("%s", self.resized.summary())

    def _handlers(self) -> dict[str, Callable[[dict[str, Any]], object]]:
        """The control requests this supervisor answers, by name."""
        return {
            "status": self._status, "stop": self._stop, "add": self._add, "deny": self._deny,
            "add_answer": lambda request: add_answer(request, self.stats.reports.values()),
            "deny_answer": lambda request: deny_answer(
                request, self.stats.reports.values(), self.procs),
        }

    def _open(self, undo: contextlib.ExitStack) -> None:
        self._check(self.dd.read_state())
        self.endpoints = endpoints = self._endpoints()
        if endpoints.run_dir is not None:
            undo.callback(remove_run_dir, endpoints.run_dir)
        self.ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        undo.callback(self.ctx.destroy, linger=0)
        self.curve = endpoints.curve(self.ctx)
        if self.curve is not None:
            undo.callback(self.curve.close)
        self.control = ControlServer(self.ctx, endpoints.control, self._handlers(),
                                     curve=self.curve)
        if self.cfg.hive.metrics_port:
            # prometheus_client is imported only by a hive that serves /metrics.
            from hive.procs.metrics import serve_metrics  # noqa: PLC0415

            self.metrics = serve_metrics(self.cfg.hive)
        if self.metrics is not None:
            undo.callback(self.metrics.close)
        self.inbox = pull(self.ctx, endpoints.supervisor, self.curve,
                          max_bytes=SUPERVISOR_INBOX_BYTES)
        self.splitter = push(self.ctx, endpoints.splitter, self.curve)
        self.commands = [push(self.ctx, endpoints.worker(i), self.curve,
                              endpoints.server_key(i)) for i in self.workers]
        self.store = Store(self.dd.supervisor, sync_interval=0.0)
        undo.callback(self.store.close, 0.0)
        self.outbox = Outbox(self.store, resend_after=self.cfg.hive.resend_after,
                             max_tries=self.cfg.hive.max_tries)
        if self.seeds:
            self._put_seeds(self.seeds, time.time())
            log.info("seeds: %d admitted to the outbox", len(self.seeds))
        self.store.commit(time.time())
        self.stats = HiveStats(self.workers, {
            i: pages_done(self.dd.worker(i)) for i in self.workers})
        self.children = self._make_children(endpoints)
        for child in self.children:
            # A stop (a signal, a child that cannot start) ends the start-up at once.
            if self.stopping:
                break
            self._launch(child)
        self.poller = zmq.Poller()
        self.poller.register(self.inbox, zmq.POLLIN)
        self.poller.register(self.control.socket, zmq.POLLIN)
        self._write_state()

    @property
    def reporting(self) -> bool:
        """True once a worker has reported: the start-up is over."""
        return self.stats.reporting

    def _endpoints(self) -> Endpoints:
        """The hive's addresses, with its CURVE keys when any is beyond loopback (or always)."""
        hive = self.cfg.hive
        if hive.transport == "tcp":
            endpoints = Endpoints.tcp(hive.tcp_port, hive.tcp_host)
        else:
            endpoints = Endpoints(make_run_dir(self.dd.socket_dir()))
        if hive.curve == "always" or hive.transport == "tcp" or not endpoints.local:
            endpoints = endpoints.with_keys(ensure_keys(self.dd.keys).directory)
        return endpoints

    def _ring(self) -> dict[str, int | str]:
        return self.ring.params

    def _make_children(self, endpoints: Endpoints) -> list[Child]:
        """The splitter and the workers, each started with ``spawn`` from plain data."""
        from hive.procs.splitter import run_splitter  # imported here: only the children run them

        spawn = multiprocessing.get_context("spawn")
        cfg_data, parent = self.cfg.to_dict(), os.getpid()
        ends = endpoints.to_dict()
        failed = str(self.dd.failure_file("splitter.log"))
        children = [Child("splitter", "splitter.log", lambda: spawn.Process(
            target=run_splitter, name="hive-splitter",
            args=(cfg_data, str(self.data_dir), ends, self._ring(), parent, failed)))]
        for i in self.workers:
            children.append(
                Child(f"worker {i}", f"{self.dd.worker_name(i)}.log",
                      self._worker_starter(spawn, i), worker=i)
            )
        return children

    def _worker_starter(self, spawn: Any, i: int) -> Callable[[], BaseProcess]:
        assert self.endpoints is not None
        cfg_data, parent, ends = self.cfg.to_dict(), os.getpid(), self.endpoints.to_dict()
        failed = str(self.dd.failure_file(f"{self.dd.worker_name(i)}.log"))
        return lambda: spawn.Process(
            target=worker_main, name=f"hive-worker-{i:02d}",
            args=(cfg_data, str(self.data_dir), i, ends, self._ring(), parent, failed))

    def _launch(self, child: Child) -> None:
        child.process = child.start()
        child.restarts += child.launched > 0
        with spawn_quietly():
            child.process.start()
        child.launched = time.time()
        child.ps = psutil.Process(child.process.pid) if child.process.pid else None
        child.cpu.clear()
        child.sample_cpu(time.monotonic())
        log.info("%s started, pid %s", child.name, child.process.pid)

    def _write_state(self) -> None:
        state = {
            "version": __version__, "pid": os.getpid(), "started": self.started,
            "data_dir": str(self.data_dir), "procs": self.procs,
            "ring": self._ring(),
            "endpoints": self.endpoints.to_dict() if self.endpoints else None,
            "pids": {c.name: c.process.pid if c.process else None for c in self.children},
            "config": self.cfg.to_dict(),
        }
        self.dd.write_state(state)

    # -- control handlers ------------------------------------------------------------

    def queue(self, urls: list[str], now: float, level: int = logging.INFO) -> Queued:
        """Put ``hive add`` URLs in the supervisor's outbox as seeds, for their owners to
        admit: this is where they enter, canonicalized once (hive.procs.seeds.seed_record);
        log each refusal at ``level``."""
        queued, records = Queued(), []
        max_length = self.cfg.scope.max_url_length
        for line in urls:
            try:
                records.append(seed_record(line, max_length))
            except URLError as exc:
                queued.refuse(exc)
                log.log(level, "refused seed %s: %s", shown(line), exc.reason)
        queued.batches = self._put_seeds(records, now)
        queued.accepted = len(records)
        return queued

    def _put_seeds(self, records: Sequence[UrlRecord], now: float) -> list[int]:
        """Put seed records, canonical where they entered (a start's seeds by its screen,
        hive.procs.seeds), in the outbox as they are; their batches' numbers."""
        batches = [self.outbox.put(list(records[i : i + SEED_BATCH]), now)
                   for i in range(0, len(records), SEED_BATCH)]
        self.store.commit(now)
        return batches

    def _add(self, request: dict[str, Any]) -> object:
        urls = request.get("urls")
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            raise ValueError("'urls' must be a list of strings")
        return self.queue(urls, time.time()).to_dict()

    def _deny(self, request: dict[str, Any]) -> object:
        keys = deny_keys(request)
        self._denies += 1
        command = wire.encode_command("deny", {"hosts": keys, "id": self._denies})
        for sock in self.commands:
            with contextlib.suppress(zmq.Again):
                sock.send_multipart(command, flags=zmq.NOBLOCK)
        return {"denied": keys, "id": self._denies}

    def _stop(self, request: dict[str, Any]) -> object:
        self.request_stop("stopped by hive stop" + (" --now" if request.get("now") else ""),
                          now=bool(request.get("now")))
        return {"stopping": True}

    def signalled(self, why: str, now: bool) -> None:
        """A signal's stop (the Runner's ``stop``): the first warm, the second at once."""
        self.request_stop(why, now=now)

    def request_stop(self, why: str, now: bool = False,
                     code: ExitCode = ExitCode.STOPPED) -> None:
        """Stop the hive (warmly unless ``now``); the first stop's reason and code stand."""
        if not self.stopping:
            (log.error if code == ExitCode.ERROR else log.info)("stopping: %s", why)
            self.ended = why
            self.exit_code = code
        elif now:
            log.info("stopping at once: %s", why)
        self.stopping = True
        if now:
            for child in self.children:
                if child.process is not None and child.process.is_alive():
                    child.process.kill()

    def _status(self, request: dict[str, Any]) -> object:
        return self.status()

    def status(self) -> Status:
        return self.stats.status(
            [(child.row(), child.worker) for child in self.children],
            data_dir=str(self.data_dir), started=self.started, stopping=self.stopping,
            cpu_window=CPU_WINDOW, fetch_total_timeout=self.cfg.fetch.total_timeout,
            outbox=len(self.outbox), bad_messages=self.bad_messages,
            resize=self.resized.to_dict() if self.resized is not None else None,
            hosts=self.hosts(), metrics=self.metrics.url if self.metrics else None,
        )

    def hosts(self) -> dict[str, Any]:
        """The workers' top hosts and the drain forecast (hive/procs/hoststatus.py)."""
        return hoststatus.summary({i: r.stats for i, r in self.stats.reports.items()}, time.time())

    def totals(self) -> dict[str, float]:
        return self.stats.totals()

    def waiting(self) -> Waiting | None:
        return self.stats.waiting()

    def _sample(self, now: float) -> None:
        """Take this turn's samples: pages for the rate, and each child's CPU time."""
        self.stats.sample(now)
        clock = time.monotonic()
        if clock >= self._next_cpu:
            self._next_cpu = clock + CPU_SAMPLE
            for child in self.children:
                child.sample_cpu(clock)

    # -- the loop ----------------------------------------------------------------------

    def loop_once(self, now: float) -> float:
        self.control.handle_ready()
        self._drain(now)
        for seq, data in self.outbox.due(now):
            with contextlib.suppress(zmq.Again):
                self.splitter.send_multipart(
                    wire.encode_batch_data(wire.SUPERVISOR_ORIGIN, seq, data), flags=zmq.NOBLOCK
                )
        self.store.commit(now)
        self._kill_hung(now)
        self._reap(now)
        self._sample(now)
        if self.metrics is not None:
            self.metrics.publish({i: r.stats for i, r in self.stats.reports.items()}, [
                (c.name, c.process.pid if c.process else None, c.restarts) for c in self.children
            ], len(self.outbox))
        if self.stopping:
            self._stop_children(now)
        else:
            if self.max_pages and self.stats.pages_this_start >= self.max_pages:
                self.request_stop(f"--max-pages {self.max_pages} reached" + self._refused(),
                                  code=ExitCode.MAX_PAGES)
            elif self._batch_ended():
                self.request_stop(
                    "the batch ended: nothing pending or in flight anywhere" + self._refused(),
                    code=ExitCode.ENDED,
                )
        return 0.2

    def _batch_ended(self) -> bool:
        """True when the batch ended here and that stops this hive (``quiet`` says it ended)."""
        ended = self.batch.observe(self.stats.reports, len(self.outbox))
        self.quiet = self.batch.quiet_rounds >= 2
        return ended and self.batch_end_stops

    def _refused(self) -> str:
        """What the crawl refused, by reason and host, for the line that ends it (a site
        larger than its cap must show as such)."""
        text = describe(r.stats for r in self.stats.reports.values())
        return f"; {text}" if text else ""

    def _drain(self, now: float) -> None:
        while True:
            try:
                frames = self.inbox.recv_multipart(flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                message = wire.decode(frames)
            except wire.WireError as exc:
                self.bad_messages += 1
                log.warning("dropped a malformed message: %s", exc)
                continue
            if isinstance(message, wire.Stats):
                if message.worker not in self.stats.workers:
                    self.bad_messages += 1
                    log.warning("dropped the stats of worker %d: not a worker of this hive",
                                message.worker)
                    continue
                report = WorkerReport.from_message(message, now)
                if report is not None:
                    self.stats.take(report)
            elif isinstance(message, wire.Ack):
                self.outbox.ack(message.seq, message.part, message.parts)

    def _kill_hung(self, now: float) -> None:
        """Kill a worker whose reports have stopped for ``hive.hung_after`` seconds (hung, or
        stopped by SIGSTOP): alive is not working, and its hosts wait while it is out.
        ``_reap`` then restarts it like any dead child. A supervisor that was itself
        held up (its turns stopped) judges no one on that turn: the silence was its own."""
        last_turn, self._last_turn = self._last_turn, now
        limit = self.cfg.hive.hung_after
        if self.stopping or now - last_turn > limit / 2:
            self._heard = {}
            return
        for child in self.children:
            if child.worker is None or child.process is None or not child.process.is_alive():
                continue
            heard = max(self.stats.last_heard(child.worker), child.launched,
                        self._heard.setdefault(child.worker, now))
            if now - heard > limit:
                log.warning("%s sent no report for %.0fs (hung or stopped); killing it to "
                            "restart it", child.name, now - heard)
                child.process.kill()
                self._heard.pop(child.worker, None)

    def _reap(self, now: float) -> None:
        for child in self.children:
            process = child.process
            if process is None or process.is_alive() or self.stopping:
                if process is None and not self.stopping and now >= child.restart_at:
                    self._launch(child)
                    self._write_state()
                continue
            code = process.exitcode
            process.join(0)
            child.process = None
            if code == STORE_FAILED:
                why = read_failure(self.dd.failure_file(child.log)) or "a storage error"
                self.request_stop(
                    f"{child.name} stopped on a storage error: {why}; see "
                    f"{self.dd.logs / child.log}; once it is mended (space freed, a "
                    "damaged store moved away), start again to resume", code=ExitCode.ERROR,
                )
                continue
            if code == START_FAILED:
                why = read_failure(self.dd.failure_file(child.log)) or (
                    f"see {self.dd.logs / child.log}")
                self.request_stop(f"{child.name} could not start: {why}", code=ExitCode.ERROR)
                continue
            if child.worker is not None:
                self.stats.restarted(child.worker, now)
                self.batch.restarted(child.worker, now)
            hive = self.cfg.hive
            delay = child.died(now, window=hive.restart_window, max_restarts=hive.max_restarts,
                               backoff=hive.restart_backoff)
            if delay is None:
                self.request_stop(
                    f"{child.name} died {len(child.deaths)} times in "
                    f"{self.cfg.hive.restart_window:g}s (last exit code {code}); see "
                    f"{self.dd.logs / child.log}", code=ExitCode.ERROR,
                )
                continue
            log.warning("%s died (exit code %s); restarting in %.1fs", child.name, code, delay)

    def _stop_children(self, now: float) -> None:
        workers = [c for c in self.children if c.worker is not None]
        if not self._stop_sent:
            self._stop_sent = True
            self._stop_deadline = now + STOP_GRACE
            for child in workers:
                if child.process is not None and child.process.is_alive():
                    child.process.terminate()
        if self._children_stopped or not (
            all(c.process is None or not c.process.is_alive() for c in workers)
            or now > self._stop_deadline
        ):
            return
        self._children_stopped = True
        for child in self.children:
            if child.process is not None and child.process.is_alive():
                if child.worker is None:
                    child.process.terminate()
                else:
                    log.warning("%s did not stop within %gs; killing it", child.name, STOP_GRACE)
                    child.process.kill()

    @property
    def finished(self) -> bool:
        return self.stopping and all(
            c.process is None or not c.process.is_alive() for c in self.children
        )

    def wait(self, seconds: float) -> None:
        self.poller.poll(max(int(seconds * 1000), 0))

    def close(self) -> None:
        for child in self.children:
            if child.process is not None:
                child.process.join(10)
                if child.process.is_alive():
                    child.process.kill()
                    child.process.join(5)
        self.control.close()
        if self.metrics is not None:
            self.metrics.close()
        for sock in (self.inbox, self.splitter, *self.commands):
            sock.close(linger=0)
        if self.curve is not None:
            self.curve.close()
        self.ctx.term()
        self.store.close(time.time())
        self.dd.update_state(pid=None, ended=self.ended, stopped=time.time())
        if self.endpoints is not None and self.endpoints.run_dir is not None:
            remove_run_dir(self.endpoints.run_dir)
        self.lock.release()
        log.info("hive stopped: %s", self.ended or "stopped")
