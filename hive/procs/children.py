"""The supervisor's children: how each is started, watched, measured and restarted.

A :class:`Child` is one role's process slot (the splitter, or worker ``i``
known by its integer id): the recipe that starts it, the process running
now, and what the supervisor measures of it (CPU over the last CPU_WINDOW
seconds, sampled on the supervisor's turns; memory and open files when asked).

The restart policy (:meth:`Child.died`): a child that died is restarted after a
backoff that doubles with each death within ``window`` seconds; more deaths
than ``max_restarts`` within ``window`` and the supervisor gives up on it (and
stops the hive with a message) instead of restarting it in a loop.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import psutil

from hive.procs.lifecycle import FAILURE_CHARS, START_FAILED
from hive.procs.stats import Process


def worker_main(*args: Any) -> None:
    """A worker child's entry point, as the supervisor names it to ``spawn``: the worker
    (and the fetch path it carries: HTML parser, public suffix list, WARC writer) is
    imported in the child only, not by the supervisor to name its target (~0.15 s of CPU
    at every start). Arguments as :func:`hive.procs.workerproc.run_worker`'s, the last
    its failure file: an installation whose worker does not import leaves its message
    there and exits START_FAILED, as a worker that cannot open its store does."""
    try:
        from hive.procs.workerproc import run_worker  # noqa: PLC0415 - the point of this
    except Exception as exc:  # noqa: BLE001 - whatever stops the import is the message
        with contextlib.suppress(OSError):
            Path(args[-1]).write_text(
                f"cannot import the worker: {type(exc).__name__}: {exc}"[:FAILURE_CHARS])
        raise SystemExit(START_FAILED) from None
    run_worker(*args)


# cpu% is each child's CPU time over the last CPU_WINDOW seconds, sampled every CPU_SAMPLE.
CPU_WINDOW = 10.0
CPU_SAMPLE = 1.0


@dataclass(slots=True)
class Child:
    name: str
    log: str
    start: Callable[[], BaseProcess]
    worker: int | None = None
    process: BaseProcess | None = None
    deaths: deque[float] = field(default_factory=deque)
    restart_at: float = 0.0
    ps: psutil.Process | None = None
    launched: float = 0.0
    cpu: deque[tuple[float, float]] = field(default_factory=deque)
    restarts: int = 0  # launches after the first (``hive_process_restarts_total``)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def sample_cpu(self, now: float) -> None:
        """Record the process's CPU seconds at ``now``; keep a window of CPU_WINDOW."""
        if self.ps is None:
            return
        try:
            times = self.ps.cpu_times()
        except psutil.Error:
            return
        samples = self.cpu
        samples.append((now, times.user + times.system))
        while len(samples) > 2 and now - samples[1][0] >= CPU_WINDOW:
            samples.popleft()

    def cpu_percent(self) -> float | None:
        """CPU use over the recent window in % of one core; None before two samples."""
        if len(self.cpu) < 2:
            return None
        (t0, c0), (t1, c1) = self.cpu[0], self.cpu[-1]
        return round(100 * (c1 - c0) / (t1 - t0), 1) if t1 > t0 else None

    def died(self, now: float, *, window: float, max_restarts: int,
             backoff: float) -> float | None:
        """Count a death at ``now``; the seconds to wait before restarting the child, or
        None if it died more than ``max_restarts`` times within ``window`` seconds."""
        self.deaths.append(now)
        while self.deaths and now - self.deaths[0] > window:
            self.deaths.popleft()
        if len(self.deaths) > max_restarts:
            return None
        delay: float = backoff * 2 ** (len(self.deaths) - 1)
        self.restart_at = now + delay
        return delay

    def row(self) -> Process:
        """What ``hive status`` shows of the process (without a worker's report)."""
        alive = self.alive
        row: Process = {"role": self.name, "pid": self.process.pid if self.process else None,
                        "alive": alive, "cpu": self.cpu_percent() if alive else None}
        if alive and self.ps is not None:
            try:
                with self.ps.oneshot():
                    row["rss_mb"] = round(self.ps.memory_info().rss / 2**20, 1)
                    row["open_files"] = self.ps.num_fds()
            except psutil.Error:
                row["alive"] = False
        return row
