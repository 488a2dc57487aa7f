"""Routing batches of URL records to the workers that own their hosts.

A :class:`Router` holds one PUSH socket per peer (every worker, and the
supervisor for acknowledgements), connected to that peer's PULL inbox (one PUSH
connected to N peers would round-robin and ignore the host). A batch is grouped
by host and each group sent, with one ring look-up per host, to its owner as one
ADMIT part that names how many parts the batch was cut into. Sends never block:
a full socket's messages wait in a per-peer overflow queue bounded twice — in
messages per peer (``hive.overflow``) and in bytes over all peers
(``hive.overflow_mb``) — and past a bound the oldest of the queue just added to
are shed and counted; the senders' outboxes send them again, so shedding costs
time, never a URL. The newest message of each queue is never shed, so the bytes
held exceed ``overflow_mb`` by at most one message per peer.

Every worker routes its own outbox's batches and acknowledges its admissions to
their origin directly, so routing grows with the hive: no single process routes
every link (the splitter, hive/procs/splitter.py, routes only the supervisor's
seeds and ``hive add`` URLs). The ring does not change while a hive runs, so
every router of a hive cuts a batch the same way, and a resent batch is cut as
it was the first time.
"""

from __future__ import annotations

import logging
from collections import deque

import zmq

from hive.core import wire
from hive.core.ring import Ring
from hive.procs.curve import Curve
from hive.procs.endpoints import Endpoints, push

log = logging.getLogger(__name__)

SUPERVISOR = wire.SUPERVISOR_ORIGIN


def _size(frames: list[bytes]) -> int:
    return sum(len(frame) for frame in frames)


class Router:
    """PUSH sockets to every peer of a hive, a ring, and a bounded overflow per peer."""

    def __init__(self, ctx: zmq.Context[zmq.Socket[bytes]], endpoints: Endpoints, ring: Ring,
                 curve: Curve | None, overflow: int, prefix: str,
                 overflow_bytes: int | None = None) -> None:
        self.ring = ring
        self.overflow_limit = overflow
        self.overflow_bytes = overflow_bytes
        self.held = 0  # bytes in the overflow queues
        self.peers: dict[int, zmq.Socket[bytes]] = {
            worker: push(ctx, endpoints.worker(worker), curve, endpoints.server_key(worker))
            for worker in range(ring.procs)}
        self.peers[SUPERVISOR] = push(ctx, endpoints.supervisor, curve)
        self.overflow: dict[int, deque[list[bytes]]] = {peer: deque() for peer in self.peers}
        self.counts = {f"{prefix}/{name}": 0 for name in ("batches", "parts", "acks", "shed",
                                                          "bad")}
        self._count = {name: f"{prefix}/{name}" for name in ("batches", "parts", "acks",
                                                             "shed", "bad")}

    def send(self, peer: int, frames: list[bytes]) -> None:
        """Queue ``frames`` for ``peer``; past the overflow bound the oldest are shed."""
        queue = self.overflow.get(peer)
        if queue is None:
            self.counts[self._count["bad"]] += 1
            log.warning("dropped a message for unknown peer %d", peer)
            return
        queue.append(frames)
        self.held += _size(frames)
        while len(queue) > 1 and (len(queue) > self.overflow_limit or (
                self.overflow_bytes is not None and self.held > self.overflow_bytes)):
            self.held -= _size(queue.popleft())
            self.counts[self._count["shed"]] += 1

    def ack(self, origin: int, seq: int, part: int, parts: int, epoch: int = 0,
            sender: int = SUPERVISOR) -> None:
        """Tell ``origin`` its part of batch ``seq`` is admitted (committed); ``epoch`` is
        the machine's of worker ``sender`` in a cluster (hive/procs/fence.py), else 0."""
        self.counts[self._count["acks"]] += 1
        self.send(origin, wire.encode_ack(origin, seq, part, parts, epoch, sender))

    def split(self, origin: int, seq: int, routes: list[tuple[str, bytes]],
              epoch: int = 0) -> None:
        """Cut a batch into one ADMIT per owner, its records passed on as bytes."""
        self.counts[self._count["batches"]] += 1
        groups: dict[int, list[bytes]] = {}
        owner = self.ring.owner
        for host, data in routes:
            groups.setdefault(owner(host), []).append(data)
        parts = len(groups)
        for part, (peer, records) in enumerate(sorted(groups.items())):
            self.send(peer, wire.encode_admit_data(origin, seq, part, parts, records, epoch,
                                                   origin))
        self.counts[self._count["parts"]] += parts

    def flush(self) -> bool:
        """Send what the peers' sockets take now; True if anything still waits."""
        waiting = False
        for peer, queue in self.overflow.items():
            sock = self.peers[peer]
            while queue:
                try:
                    sock.send_multipart(queue[0], flags=zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    waiting = True
                    break
                self.held -= _size(queue.popleft())
        return waiting

    def close(self) -> None:
        for sock in self.peers.values():
            sock.close(linger=0)
