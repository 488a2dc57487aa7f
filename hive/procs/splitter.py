"""The host splitter: routes the supervisor's batches (seeds, ``hive add``) to the
workers that own their hosts.

One PULL socket receives batches, and a :class:`~hive.procs.router.Router` cuts
each by owner (one ring look-up per host, bounded overflow per peer, shedding
counted: the supervisor's outbox sends again). Workers route their own links and
acknowledge to the origin directly (hive/procs/router.py says why), so the splitter
carries the supervisor's traffic only; a batch a worker sends here is still routed.
An acknowledgement or anything else that is not a batch is counted as bad and
dropped. The splitter holds no state that matters and can be restarted at any time.

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
from hive.procs.endpoints import Endpoints, incoming, pull
from hive.procs.lifecycle import Runner, child_signals, die_with_parent, setup_logging
from hive.procs.router import Router
from hive.storage.datadir import DataDir

log = logging.getLogger(__name__)

DRAIN_PER_TURN = 1000
RECEIVE_HWM = 10_000


class Splitter:
    def __init__(self, endpoints: Endpoints, ring: Ring, overflow: int,
                 overflow_bytes: int | None = None) -> None:
        self.endpoints = endpoints
        self.ring = ring
        self.overflow_limit = overflow
        self.overflow_bytes = overflow_bytes
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
        self.router = Router(self.ctx, self.endpoints, self.ring, self.curve,
                             self.overflow_limit, "splitter", self.overflow_bytes)
        self.counts = self.router.counts

    @property
    def overflow(self) -> dict[int, deque[list[bytes]]]:
        return self.router.overflow

    def route(self, frames: list[bytes]) -> None:
        try:
            if frames and frames[0] == wire.KIND_BATCH:
                self.router.split(*wire.decode_batch_routes(frames))
                return
            message = wire.decode(frames)
        except wire.WireError as exc:
            self.counts["splitter/bad"] += 1
            log.warning("dropped a malformed message: %s", exc)
            return
        self.counts["splitter/bad"] += 1
        log.warning("dropped a %s message: the splitter routes batches", type(message).__name__)

    def loop_once(self, now: float) -> float:
        """Route what has arrived, flush the overflow; returns the seconds to wait at most."""
        for frames in incoming(self.inbox, DRAIN_PER_TURN):
            self.route(frames)
        return 0.0 if self.router.flush() else 0.2

    def wait(self, seconds: float) -> None:
        if seconds > 0:
            self.inbox.poll(int(seconds * 1000))

    def close(self) -> None:
        self.inbox.close(linger=0)
        self.router.close()
        if self.curve is not None:
            self.curve.close()
        if self.ctx is not None:
            self.ctx.term()


def run_splitter(cfg_data: dict[str, Any], data_dir: str, endpoints: dict[str, Any],
                 ring_params: dict[str, Any], parent: int, failed: str) -> None:
    """The spawned splitter's entry point; signals and start failures as a worker's."""
    child_signals()
    die_with_parent(parent)
    cfg = from_dict(cfg_data)
    setup_logging(cfg.log.level, DataDir(Path(data_dir)).log_file("splitter"), "splitter")
    ring = Ring.from_params(ring_params)
    splitter = Splitter(Endpoints.from_dict(endpoints), ring, cfg.hive.overflow,
                        int(cfg.hive.overflow_mb * (1 << 20)))
    runner = Runner(splitter, "splitter", signals=(signal.SIGTERM,), failure_file=Path(failed))
    raise SystemExit(runner.run())
