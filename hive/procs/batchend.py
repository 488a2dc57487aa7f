"""The end of a batch, decided from the workers' reports alone (pure: no sockets, no clock).

A batch has ended when nothing is pending or in flight anywhere and nothing is
on its way between processes. No single report can say so: a worker idle now
may be handed links a moment later by another that is still fetching, and a
batch of links may sit in an outbox or a socket between them. The rule:

- a **round** is complete when every worker has reported anew since the last
  round (a report's ``number`` counts up from 1 in each worker process);
- a round is **quiet** when every worker says it is idle with an empty outbox,
  the supervisor's own outbox (seeds, ``hive add``) is empty too;
- the batch has ended after **two successive quiet rounds in which no counter
  moved**: the admissions, the outbox batches sent and acknowledged, and every
  counter that moves when a worker does anything with a URL (``MOVING``).

A counter that moved between two quiet rounds means work happened in between
(a link handed over and admitted, a fetch done): the count starts again. A
worker that has not reported since the last round (or at all) holds the round
open. A worker that restarts is forgotten until its new process reports, and the
quiet rounds are counted afresh; a report its old process sent before the
restart (``now`` when the supervisor saw it die) is stale and counts for nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hive.procs.stats import WorkerReport

# Counters that move whenever a worker does anything with a URL.
MOVING = ("frontier/done/", "frontier/robots/", "frontier/retried", "worker/outcome/")


def fingerprint(report: WorkerReport) -> tuple[Any, ...]:
    """The counters of a report that must stand still across the two quiet rounds."""
    stats = report.stats
    moved = sum(v for k, v in stats.items() if k.startswith(MOVING) and isinstance(v, int))
    return (stats.get("frontier/admitted"), stats.get("outbox/batches"),
            stats.get("outbox/acked"), moved)


class BatchEnd:
    """Counts quiet rounds of reports from workers ``workers`` (their integer ids)."""

    def __init__(self, workers: Iterable[int]) -> None:
        self.workers = tuple(workers)
        self._marks: dict[int, int] = {}
        self._since: dict[int, float] = {}
        self._quiet_key: tuple[Any, ...] | None = None
        self.quiet_rounds = 0

    def restarted(self, worker: int, now: float) -> None:
        """Worker ``worker`` died at ``now``: wait for its new process's reports, and count
        the quiet rounds afresh (a round before the death says nothing of the new process)."""
        self._marks.pop(worker, None)
        self._since[worker] = now
        self._quiet_key = None
        self.quiet_rounds = 0

    def _fresh(self, worker: int, report: WorkerReport | None) -> bool:
        """True if ``report`` is the worker's news since the last round (and not stale)."""
        return (report is not None and report.worker == worker
                and report.number > self._marks.get(worker, 0)
                and report.sent >= self._since.get(worker, float("-inf")))

    def observe(self, reports: Mapping[int, WorkerReport], outbox: int) -> bool:
        """Take the workers' newest reports and the supervisor's outbox size; True when this
        call completes the second successive quiet round with no counter moved."""
        if not all(self._fresh(w, reports.get(w)) for w in self.workers):
            return False
        latest = [reports[w] for w in self.workers]
        self._marks = {r.worker: r.number for r in latest}
        quiet = outbox == 0 and all(r.idle for r in latest)
        key = tuple(fingerprint(r) for r in latest)
        if not quiet or key != self._quiet_key:
            self._quiet_key = key if quiet else None
            self.quiet_rounds = 1 if quiet else 0
            return False
        self.quiet_rounds += 1
        return self.quiet_rounds >= 2
