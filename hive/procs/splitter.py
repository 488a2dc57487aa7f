"""The host splitter: routes every batch of URLs to the workers that own their hosts.

One PULL socket receives batches (seeds and ``hive add`` from the supervisor,
discovered links from workers) and acknowledgements. A batch is grouped by
host and each group sent, with one ring look-up per host, to its owner's PULL
socket through a PUSH socket of its own (one PUSH connected to N peers would
round-robin and ignore the host). Sends never block: a full socket's messages
wait in a bounded per-worker overflow queue, and past its bound the oldest are
shed and counted — the senders' outboxes send them again, so shedding costs
time, never a URL. Acknowledgements are forwarded to their origin by worker id.
The splitter holds no state that matters and can be restarted at any time.

When the endpoints recipe names CURVE keys, the splitter's PULL is a CURVE
server behind its own ZAP authenticator (admitting only the hive's client
keys) and every PUSH a CURVE client; a peer without the keys never gets a
message routed (hive/procs/curve.py).
"""

from __future__ import annotations

import logging
import signal
from collections import deque
from pathlib import Path
from typing import Any

import zmq

from hive.config import from_dict
from hive.core import wire
from hive.core.ring import Ring
from hive.procs.curve import Curve
from hive.procs.endpoints import Endpoints, incoming, pull, push
from hive.procs.lifecycle import Runner, child_signals, die_with_parent, setup_logging
from hive.storage.datadir import DataDir

log = logging.getLogger(__name__)

SUPERVISOR = wire.SUPERVISOR_ORIGIN
DRAIN_PER_TURN = 1000
RECEIVE_HWM = 10_000


class Splitter:
    def __init__(self, endpoints: Endpoints, ring: Ring, overflow: int) -> None:
        self.endpoints = endpoints
        self.ring = ring
        self.overflow_limit = overflow
        self.counts = {"splitter/batches": 0, "splitter/parts": 0, "splitter/acks": 0,
                       "splitter/shed": 0, "splitter/bad": 0}
        self.ctx: zmq.Context[zmq.Socket[bytes]] | None = None
        self.curve: Curve | None = None
        self.stopping = False

    @property
    def finished(self) -> bool:
        return self.stopping

    def open(self) -> None:
        self.ctx = zmq.Context()
        self.curve = self.endpoints.curve(self.ctx)
        self.inbox = pull(self.ctx, self.endpoints.splitter, self.curve, hwm=RECEIVE_HWM)
        self.peers: dict[int, zmq.Socket[bytes]] = {}
        for worker in range(self.ring.procs):
            self.peers[worker] = push(self.ctx, self.endpoints.worker(worker), self.curve)
        self.peers[SUPERVISOR] = push(self.ctx, self.endpoints.supervisor, self.curve)
        self.overflow: dict[int, deque[list[bytes]]] = {peer: deque() for peer in self.peers}

    def send(self, peer: int, frames: list[bytes]) -> None:
        queue = self.overflow.get(peer)
        if queue is None:
            self.counts["splitter/bad"] += 1
            log.warning("dropped a message for unknown peer %d", peer)
            return
        queue.append(frames)
        if len(queue) > self.overflow_limit:
            queue.popleft()
            self.counts["splitter/shed"] += 1

    def flush(self) -> None:
        for peer, queue in self.overflow.items():
            sock = self.peers[peer]
            while queue:
                try:
                    sock.send_multipart(queue[0], flags=zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                queue.popleft()

    def route(self, frames: list[bytes]) -> None:
        try:
            if frames and frames[0] == wire.KIND_BATCH:
                self._split(*wire.decode_batch_routes(frames))
                return
            message = wire.decode(frames)
        except wire.WireError as exc:
            self.counts["splitter/bad"] += 1
            log.warning("dropped a malformed message: %s", exc)
            return
        if isinstance(message, wire.Ack):
            self.counts["splitter/acks"] += 1
            self.send(message.origin, frames)
        else:
            self.counts["splitter/bad"] += 1
            log.warning("dropped a %s message: the splitter routes batches and acks",
                        type(message).__name__)

    def _split(self, origin: int, seq: int, routes: list[tuple[str, bytes]]) -> None:
        """Cut a batch into one ADMIT per owner, its records passed on as bytes."""
        self.counts["splitter/batches"] += 1
        groups: dict[int, list[bytes]] = {}
        for host, data in routes:
            groups.setdefault(self.ring.owner(host), []).append(data)
        parts = len(groups)
        for part, (owner, records) in enumerate(sorted(groups.items())):
            self.send(owner, wire.encode_admit_data(origin, seq, part, parts, records))
            self.counts["splitter/parts"] += 1

    def loop_once(self, now: float) -> float:
        """Route what has arrived, flush the overflow; returns the seconds to wait at most."""
        for frames in incoming(self.inbox, DRAIN_PER_TURN):
            self.route(frames)
        self.flush()
        return 0.0 if any(self.overflow.values()) else 0.2

    def wait(self, seconds: float) -> None:
        if seconds > 0:
            self.inbox.poll(int(seconds * 1000))

    def close(self) -> None:
        for sock in (self.inbox, *self.peers.values()):
            sock.close(linger=0)
        if self.curve is not None:
            self.curve.close()
        if self.ctx is not None:
            self.ctx.term()


def run_splitter(cfg_data: dict[str, Any], data_dir: str, endpoints: dict[str, Any],
                 procs: int, parent: int, failed: str) -> None:
    """The spawned splitter's entry point; signals and start failures as a worker's."""
    child_signals()
    die_with_parent(parent)
    cfg = from_dict(cfg_data)
    setup_logging(cfg.log.level, DataDir(Path(data_dir)).log_file("splitter"), "splitter")
    ring = Ring(procs, cfg.hive.vnodes, cfg.hive.ring_seed)
    splitter = Splitter(Endpoints.from_dict(endpoints), ring, cfg.hive.overflow)
    runner = Runner(splitter, "splitter", signals=(signal.SIGTERM,), failure_file=Path(failed))
    raise SystemExit(runner.run())
