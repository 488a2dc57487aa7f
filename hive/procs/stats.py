"""The workers' reports, merged into the figures ``hive status`` shows (pure: no sockets).

Every worker sends its counters to the supervisor every ``hive.stats_interval``
seconds as a :class:`WorkerReport`, known by its integer worker id. The
newest report of each worker is kept; one that is older than the one held (a
lower ``number``) or was sent by a process that has since died (before
:meth:`HiveStats.restarted`) is stale and dropped. From the reports held:

- the **totals** across workers (:data:`TOTAL_KEYS` summed, plus URLs
  ``fetched`` and ``errors``: every ``frontier/done/`` outcome not in
  :data:`NOT_ERRORS`);
- the **pages this start fetched**: each worker's pages (``pages``: ``frontier/done/ok``
  and a recrawl's ``frontier/done/not_modified``, a page confirmed unchanged) above
  the highest it had before (on disk when the hive opened, or in an earlier
  report), so neither a resume's old pages nor a restarted worker's first
  report counts as new; and their rate over the last :data:`RATE_WINDOW`;
- what the rest of the batch is **waiting** for, when all that is left waits;
- the **status** document (``hive status --json``): the processes, each
  worker's row carrying its last report, the totals and the hive's own facts.

Stats keys are strings namespaced like ``frontier/done/ok``; values are numbers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from hive.core import wire
from hive.frontier.refusals import merge
from hive.outcome import Kind

NOT_ERRORS = frozenset(kind.value for kind in Kind if not kind.error)
# The counters summed across workers for the totals (the rest are drawn from several).
TOTAL_KEYS = ("frontier/pending", "frontier/admitted", "frontier/done/ok",
              "worker/in_flight", "frontier/hosts/bound", "frontier/hosts/ready",
              "frontier/hosts/waiting", "frontier/hosts/parked", "outbox/size")
# pages/s is the pages this start fetched over the last RATE_WINDOW seconds, sampled each second.
RATE_WINDOW = 60.0
RATE_SAMPLE = 1.0

Stats = Mapping[str, wire.JsonScalar]


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """One stats report of worker ``worker``: its ``number`` counts up from 1 in each worker
    process; ``sent`` is the worker's clock, ``received`` the supervisor's."""

    worker: int
    number: int
    idle: bool
    sent: float
    received: float
    stats: Stats

    @classmethod
    def from_message(cls, message: wire.Stats, now: float) -> WorkerReport | None:
        """The report a STATS message carries; None if it carries no report number."""
        values = message.values
        number = values.get("hive/report")
        if not isinstance(number, int) or isinstance(number, bool):
            return None
        sent = values.get("hive/time")
        return cls(message.worker, number, bool(values.get("hive/idle")),
                   float(sent) if isinstance(sent, int | float) else now, now, dict(values))


class Process(TypedDict, total=False):
    """One process as its supervisor sees it (``role``, ``pid``, ``alive``, ``cpu`` always)."""

    role: str
    pid: int | None
    alive: bool
    cpu: float | None
    rss_mb: float
    open_files: int
    idle: bool
    stats: Stats
    errors: int


class Waiting(TypedDict):
    until: float
    why: str
    host: str
    status: int | None
    worker: int
    hosts: float


class Status(TypedDict):
    """The document ``hive status --json`` prints."""

    data_dir: str
    procs: int
    started: float
    stopping: bool
    processes: list[Process]
    totals: dict[str, float]
    waiting: Waiting | None
    cpu_window: float
    fetch_total_timeout: float
    outbox: int
    bad_messages: int
    resize: dict[str, Any] | None
    hosts: dict[str, Any]
    metrics: str | None


def errors(stats: Stats) -> int:
    """URLs a worker's stats count as ended in an error (every outcome not in NOT_ERRORS)."""
    return sum(v for k, v in stats.items() if k.startswith("frontier/done/")
               and k[14:] not in NOT_ERRORS and isinstance(v, int))


def fetched(stats: Stats) -> int:
    """URLs a worker's stats count as ended, whatever the outcome."""
    return sum(v for k, v in stats.items() if k.startswith("frontier/done/")
               and isinstance(v, int))


# The outcomes that count as a page fetched: a whole answer, or a recrawl's 304 (the page as
# its prior crawl had it), so --max-pages budgets a recrawl's requests as a crawl's.
PAGE_KEYS = ("frontier/done/ok", "frontier/done/not_modified")


def pages(counts: Mapping[str, object]) -> int:
    """The pages a worker's counters say it fetched (PAGE_KEYS)."""
    return sum(value for key in PAGE_KEYS
               if isinstance(value := counts.get(key, 0), int))


class HiveStats:
    """The newest report of each of ``workers`` and the figures drawn from them.

    ``pages_before`` is each worker's pages on disk when the hive opened.
    """

    def __init__(self, workers: Iterable[int], pages_before: Mapping[int, int] | None = None
                 ) -> None:
        self.workers = tuple(workers)
        self.reports: dict[int, WorkerReport] = {}
        self.pages_this_start = 0
        self._pages_seen = dict(pages_before or {})
        self._since: dict[int, float] = {}
        self._rates: deque[tuple[float, int]] = deque()

    @property
    def reporting(self) -> bool:
        """True once a worker has reported: the start-up is over."""
        return bool(self.reports)

    def take(self, report: WorkerReport) -> bool:
        """Keep ``report`` if it is its worker's newest and not stale; False if dropped."""
        if report.worker not in self.workers:
            return False
        held = self.reports.get(report.worker)
        if held is not None and report.number <= held.number:
            return False
        if report.sent < self._since.get(report.worker, float("-inf")):
            return False
        self.reports[report.worker] = report
        self._count_pages(report.worker, pages(report.stats))
        return True

    def restarted(self, worker: int, now: float) -> None:
        """Worker ``worker`` died at ``now``: drop its report; any it sent before is stale."""
        self.reports.pop(worker, None)
        self._since[worker] = now

    def last_heard(self, worker: int) -> float:
        """When the supervisor received worker ``worker``'s newest report (0 if none)."""
        report = self.reports.get(worker)
        return report.received if report is not None else 0.0

    def _count_pages(self, worker: int, done: object) -> None:
        if not isinstance(done, int):
            return
        seen = self._pages_seen.get(worker, 0)
        if done > seen:
            self.pages_this_start += done - seen
            self._pages_seen[worker] = done

    def sample(self, now: float) -> None:
        """Sample the pages this start fetched, for the rate (at most once a RATE_SAMPLE)."""
        if not self._rates or now - self._rates[-1][0] >= RATE_SAMPLE:
            self._rates.append((now, self.pages_this_start))
            while len(self._rates) > 2 and now - self._rates[1][0] >= RATE_WINDOW:
                self._rates.popleft()

    def rate(self) -> float:
        """Pages this start fetched per second, over the last RATE_WINDOW seconds."""
        if len(self._rates) < 2:
            return 0.0
        (t0, n0), (t1, n1) = self._rates[0], self._rates[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = dict.fromkeys(TOTAL_KEYS, 0)
        for report in self.reports.values():
            for key, value in report.stats.items():
                if key in out and isinstance(value, int | float):
                    out[key] += value
        out["fetched"] = sum(fetched(r.stats) for r in self.reports.values())
        out["errors"] = sum(errors(r.stats) for r in self.reports.values())
        out["pages_this_start"] = self.pages_this_start
        out["refused"] = sum(n for n, _ in merge(r.stats for r in self.reports.values()).values())
        out["pages_per_s"] = self.rate()
        return out

    def waiting(self) -> Waiting | None:
        """What the rest of the batch waits for, when all that is left waits.

        None while a host is ready, a fetch is in flight, nothing is pending or a
        worker has not reported (since it started).
        Else the host due first across the workers' last reports: ``until``
        (epoch seconds), ``why`` (``retry_after``, ``backoff``, ``robots_retry``,
        ``crawl_delay`` or ``delay``), ``status`` (the HTTP status that put it off,
        or None), ``host``, ``worker``, and ``hosts`` waiting in all.
        """
        t = self.totals()
        if (any(w not in self.reports for w in self.workers) or not t["frontier/pending"]
                or t["worker/in_flight"] or t["frontier/hosts/ready"]):
            return None
        first: tuple[float, int] | None = None
        for worker, report in self.reports.items():
            until = report.stats.get("frontier/wait/until")
            if isinstance(until, int | float) and (first is None or until < first[0]):
                first = until, worker
        if first is None:
            return None
        until, worker = first
        stats = self.reports[worker].stats
        status = stats.get("frontier/wait/status")

        def named(prefix: str) -> str:
            return next((k[len(prefix):] for k in stats if k.startswith(prefix)), "")

        return {
            "until": until, "why": named("frontier/wait/why/"),
            "host": named("frontier/wait/host/"),
            "status": status if isinstance(status, int) else None, "worker": worker,
            "hosts": t["frontier/hosts/waiting"] + t["frontier/hosts/parked"],
        }

    def with_report(self, process: Process, worker: int | None) -> Process:
        """``process``'s row, with worker ``worker``'s newest report if it is one."""
        if worker is None:
            return process
        report = self.reports.get(worker)
        stats: Stats = report.stats if report is not None else {}
        return {**process, "idle": report is not None and report.idle, "stats": stats,
                "errors": errors(stats)}

    def status(self, processes: Sequence[tuple[Process, int | None]], *, data_dir: str,
               started: float, stopping: bool, cpu_window: float, fetch_total_timeout: float,
               outbox: int, bad_messages: int, resize: dict[str, Any] | None,
               hosts: dict[str, Any], metrics: str | None) -> Status:
        """The status document: ``processes`` are each process's row and worker id (None for
        another role); the keyword arguments are the supervisor's own facts."""
        return {
            "data_dir": data_dir, "procs": len(self.workers), "started": started,
            "stopping": stopping,
            "processes": [self.with_report(row, worker) for row, worker in processes],
            "totals": self.totals(), "waiting": self.waiting(), "cpu_window": cpu_window,
            "fetch_total_timeout": fetch_total_timeout, "outbox": outbox,
            "bad_messages": bad_messages, "resize": resize, "hosts": hosts, "metrics": metrics,
        }
