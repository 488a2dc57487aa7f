"""The head of a cluster: its plan, each machine's lease and epoch, and what became of them.

One head actor runs per ``hive start --cluster`` (hive/procs/cluster.py starts
it, without resources of its own, wherever Ray places it). It keeps the plan
(hive/procs/cluster_plan.py: the ring, every worker's address and every
machine's public keys) and the :class:`LeaseBook`, the fencing's one source of
truth (hive/procs/fence.py):

- a machine **joins** under its name and gets a new epoch (epochs are numbered
  across the cluster, so each is unique and later ones are higher);
- it **renews** its lease, with the epoch it joined under, every
  ``cluster.renew`` seconds; a renewal is granted (with every worker's current
  epoch) only while that epoch is the machine's and the machine is not lost;
- a machine that has not renewed for ``cluster.lease`` seconds is **lost**: its
  epoch is raised at once, so whatever its old processes still send is refused
  by every machine as soon as their next grant tells them; its hosts wait (the
  other machines' outboxes keep what is theirs until it is back), and its next
  join (Ray restarts its node actor when a machine with its resource appears)
  resumes it from its own stores under a newer epoch;
- a lost machine gone for good is **dropped** by the operator (``hive drop``):
  it never joins or renews again, and every grant names its workers
  (``dropped``), so the other machines discard what they hold for them and
  refuse the links to its hosts they find later, each URL counted as refused
  with the reason ``machine_dropped`` (hive/procs/workerproc.py). A machine
  that still renews is not dropped: that would be a resize, which is offline.

The book is pure (it takes ``now``); :class:`Head` is the actor around it, on
the head's clock.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from hive.procs.cluster_plan import ClusterPlan

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Standing:
    """One machine's place in the book."""

    epoch: int = 0
    renewed: float = 0.0
    lost: bool = False
    joins: int = 0
    refused: int = 0
    dropped: bool = False


class LeaseBook:
    """Each machine's epoch and last renewal; who is lost."""

    def __init__(self, names: list[str], lease: float) -> None:
        self.lease = lease
        self.last_epoch = 0
        self.machines = {name: Standing() for name in names}
        self.lapses = 0

    def _standing(self, name: str) -> Standing:
        standing = self.machines.get(name)
        if standing is None:
            raise ValueError(f"no machine {name!r} in this cluster")
        return standing

    def join(self, name: str, now: float) -> int:
        """Machine ``name`` (re)joins: its new epoch; 0 for a dropped machine, which may not."""
        standing = self._standing(name)
        if standing.dropped:
            standing.refused += 1
            return 0
        self.last_epoch += 1
        standing.epoch, standing.renewed, standing.lost = self.last_epoch, now, False
        standing.joins += 1
        return standing.epoch

    def renew(self, name: str, epoch: int, now: float) -> bool:
        """Renew ``name``'s lease held under ``epoch``; False if that epoch is over."""
        self.sweep(now)
        standing = self._standing(name)
        if standing.lost or epoch != standing.epoch:
            standing.refused += 1
            return False
        standing.renewed = now
        return True

    def sweep(self, now: float) -> list[str]:
        """Mark lost every machine whose lease lapsed, raising its epoch; their names."""
        lapsed = []
        for name, standing in self.machines.items():
            if (standing.epoch and not standing.lost and not standing.dropped
                    and now - standing.renewed > self.lease):
                self.last_epoch += 1
                standing.epoch, standing.lost = self.last_epoch, True
                self.lapses += 1
                lapsed.append(name)
        return lapsed

    def drop(self, name: str, now: float) -> bool:
        """Drop machine ``name`` for good; False if it already was. ValueError if it is not
        lost (it renewed within its lease: still up, or not lapsed yet)."""
        self.sweep(now)
        standing = self._standing(name)
        if standing.dropped:
            return False
        if not standing.lost and standing.epoch:
            raise ValueError(f"machine {name} is not lost (it renewed its lease "
                             f"{now - standing.renewed:.1f} s ago): only a machine whose lease "
                             f"lapsed can be dropped")
        self.last_epoch += 1
        standing.epoch, standing.lost, standing.dropped = self.last_epoch, True, True
        return True

    def dropped(self) -> list[str]:
        return sorted(name for name, s in self.machines.items() if s.dropped)

    def epochs(self, plan: ClusterPlan) -> list[int]:
        """Each worker's machine's current epoch, by worker id."""
        return [self.machines[plan.machine_of(w).name].epoch for w in range(plan.procs)]

    def to_dict(self, now: float) -> dict[str, Any]:
        return {name: {"epoch": s.epoch, "lost": s.lost, "joins": s.joins,
                       "refused": s.refused, "dropped": s.dropped,
                       "renewed_ago": round(now - s.renewed, 2)}
                for name, s in self.machines.items()}


class Head:
    """The head actor: the plan and the lease book, on the head's clock."""

    def __init__(self, lease: float) -> None:
        self.lease = lease
        self._plan: ClusterPlan | None = None
        self.book = LeaseBook([], lease)
        self._dropped: list[int] = []

    def set_plan(self, plan: dict[str, Any]) -> None:
        self._plan = ClusterPlan.from_dict(plan)
        self.book = LeaseBook([m.name for m in self._plan.machines], self.lease)
        self._dropped = []

    def plan(self) -> dict[str, Any] | None:
        return self._plan.to_dict() if self._plan is not None else None

    def join(self, name: str) -> int:
        epoch = self.book.join(name, time.time())
        log.info("machine %s joined with epoch %d", name, epoch)
        return epoch

    def renew(self, name: str, epoch: int) -> dict[str, list[int]] | None:
        """If ``name``'s lease under ``epoch`` is renewed, every worker's epoch and the
        workers of the dropped machines; else None."""
        if self._plan is None or not self.book.renew(name, epoch, time.time()):
            return None
        return {"epochs": self.book.epochs(self._plan), "dropped": self._dropped}

    def drop(self, name: str) -> str:
        """Drop machine ``name`` for good: "" once done (or if it already was), else why not."""
        if self._plan is None:
            return "the cluster has no plan yet"
        try:
            if self.book.drop(name, time.time()):
                log.warning("machine %s dropped by the operator", name)
        except ValueError as exc:
            return str(exc)
        self._dropped = sorted(w for n in self.book.dropped()
                               for w in self._plan.machine(n).workers)
        return ""

    def sweep(self) -> dict[str, Any]:
        """Mark the lapsed lost; the book as it stands."""
        now = time.time()
        for name in self.book.sweep(now):
            log.warning("machine %s lost: its lease lapsed", name)
        return self.book.to_dict(now)
