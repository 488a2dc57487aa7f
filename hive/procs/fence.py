"""Fencing of hive's own across a cluster's machines: a worker's lease and the epochs.

Ray restarts an actor but does not fence it: a machine that froze and came back
runs beside its replacement, with the same arguments (issue 29's spike). So a
cluster (``hive start --cluster``) fences itself, in two parts:

- **The lease.** The head (hive/procs/cluster_head.py) grants each machine a
  lease of ``cluster.lease`` seconds, renewed every ``cluster.renew``. The
  machine's node actor computes the lease's end from when it *asked* (before the
  head's grant, so never later than the head's own reckoning), less one renewal
  interval, and its supervisor hands that ``until`` to every worker with a
  ``fence`` command. A worker leases no URL to a fetch thread once its clock
  passes ``until`` (:meth:`Fence.holds`, asked afresh before each lease, and
  before a lease that waited for its address's grant starts: it may have waited
  across the lapse, as across a cut link whose grants arrive once it is up): a
  machine that cannot renew (cut off, frozen, its head gone) stops fetching
  before the head can count its lease as lapsed. A fetch handed out before then
  may still be in flight (as at a kill).
- **The epochs.** Each time a machine joins, the head gives it a new epoch; a
  machine whose lease lapsed is lost and its next join has a higher one. Every
  ADMIT, BATCH and ACK carries its sender's epoch (hive/core/wire.py), and a
  worker refuses, and counts (``fence/stale``), one older than the epoch it last
  heard for the sending worker's machine: a thawed machine's old processes can
  neither admit into, nor acknowledge for, the cluster that replaced them. A
  worker that has heard no fence yet refuses every peer's message
  (``fence/unfenced``); the sender's outbox sends it again.

A grant also names the workers of the machines the operator dropped for good
(``dropped``: hive/procs/cluster_head.py): the worker discards what its outbox
holds for them and refuses the links to their hosts it finds later, each URL
counted (hive/procs/workerproc.py), and an address one of them owned is granted
by a live worker (:meth:`Fence.owner`).

Seeds and ``hive add`` URLs (origin the supervisor) never cross machines: the
driver gives each machine's supervisor only the seeds its own workers own, so
they are not fenced. On one machine (no cluster) the fence is open: everything
holds and everything is accepted, at no cost.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from hive.core import wire
from hive.core.ring import Ring


class Fence:
    """One worker's view of its machine's lease and of every worker's current epoch."""

    __slots__ = ("enabled", "until", "epoch", "floors", "dropped", "counts")

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.until = 0.0
        self.epoch = 0  # this machine's epoch; 0 before the first fence command
        self.floors: list[int] = []  # per worker id: the epoch of the machine that owns it
        self.dropped: frozenset[int] = frozenset()  # the workers of dropped machines
        self.counts: Counter[str] = Counter()

    def update(self, args: dict[str, Any]) -> frozenset[int]:
        """Take a ``fence`` command: ``until`` (this machine's clock), ``epoch`` (its own),
        ``epochs`` (each worker's machine's epoch, by worker id) and ``dropped`` (the
        workers of dropped machines; none if absent). The workers it drops anew; ValueError
        if it is bad."""
        until, epoch, epochs = args.get("until"), args.get("epoch"), args.get("epochs")
        dropped = args.get("dropped") or []
        if not (isinstance(until, int | float) and math.isfinite(until)
                and isinstance(epoch, int) and epoch > 0 and isinstance(epochs, list)
                and all(isinstance(e, int) and e >= 0 for e in epochs)
                and isinstance(dropped, list)
                and all(isinstance(w, int) and 0 <= w < len(epochs) for w in dropped)
                and len(dropped) < len(epochs)):
            raise ValueError(f"bad fence: {args!r}")
        if epoch < self.epoch:
            self.counts["fence/stale_grant"] += 1
            return frozenset()
        self.until, self.epoch, self.floors = float(until), epoch, epochs
        # A machine dropped is dropped for good: a grant never takes one back.
        new = frozenset(dropped) - self.dropped
        self.dropped |= new
        return new

    def holds(self, now: float) -> bool:
        """True while this machine may fetch: always on one machine."""
        return not self.enabled or now < self.until

    def accepts(self, origin: int, epoch: int) -> bool:
        """True if a message from worker ``origin`` sent in ``epoch`` may be taken."""
        if not self.enabled or origin == wire.SUPERVISOR_ORIGIN:
            return True
        if not self.epoch:
            self.counts["fence/unfenced"] += 1
            return False
        if origin >= len(self.floors) or epoch < self.floors[origin]:
            self.counts["fence/stale"] += 1
            return False
        return True

    def owner(self, ring: Ring, key: str) -> int:
        """``key``'s owner on ``ring``, or, if a dropped machine's worker owns it, a live
        worker chosen by that owner's id (the same at every worker that knows the drop)."""
        owner = ring.owner(key)
        if owner not in self.dropped:
            return owner
        live = [w for w in range(ring.procs) if w not in self.dropped]
        return live[owner % len(live)]
