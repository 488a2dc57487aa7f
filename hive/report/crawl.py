"""A crawl's report data: its crawl logs streamed into a tally, its stores asked for pending
URLs, gathered in one :class:`Report` that :mod:`hive.report.render` draws.

A cluster driver's data directory (``hive start --cluster``) is reported over every
machine's (:meth:`hive.storage.datadir.DataDir.cluster_machines`: ``nodes/<name>``, or
where ``cluster.node_data`` put them, copied there first on a real cluster): their crawl
logs, one machine after the other, fold into the one tally, their stores into the pending
and domain counts, and each machine gets its row (:class:`MachineRow`: its own lines,
fetches, pages, bytes and pending URLs, and whether it was dropped). A machine whose
directory holds no crawl logs (not copied, or it never started) is named as such.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from hive.errors import HiveError
from hive.report.domains import Domains, busiest_domains
from hive.report.lines import Skips, read_lines
from hive.report.pending import Pending, pending_by_host
from hive.report.tally import Tally
from hive.storage.datadir import DataDir

# Rows in each top list of the report.
TOP = 20


@dataclass
class MachineRow:
    """One machine of a cluster, as its own directory tells."""

    name: str
    data_dir: Path
    dropped: bool
    has_logs: bool = True
    files: int = 0
    lines: int = 0
    fetches: int = 0
    pages: int = 0
    size: int = 0
    pending: int = 0


@dataclass
class Report:
    data_dir: Path
    made: float
    files: list[Path]
    tally: Tally
    skips: Skips
    pending: Pending
    domains: Domains
    seconds: float = 0.0
    top: int = TOP
    # A cluster's machines (empty for one machine's crawl).
    machines: list[MachineRow] = field(default_factory=list)


def collect(data_dir: Path, top: int = TOP) -> Report:
    """Read the crawl in ``data_dir``, one machine's or a cluster's: a HiveError if it has no
    crawl log directory (a cluster: if none of its machines has)."""
    started = time.perf_counter()
    machines = [MachineRow(name, directory, dropped)
                for name, directory, dropped in DataDir(data_dir).cluster_machines()]
    for machine in machines:
        machine.has_logs = DataDir(machine.data_dir).logs.is_dir()
    if machines and not any(m.has_logs for m in machines):
        raise HiveError(f"{data_dir} is a cluster's, and none of its machines' directories "
                        f"has crawl logs (looked in {machines[0].data_dir} and the others): "
                        "copy each machine's there first")
    read = [m.data_dir for m in machines if m.has_logs] or [data_dir]
    skips, tally, files = Skips(), Tally(), []
    rows = {m.data_dir: m for m in machines}
    for directory in read:
        before = (tally.lines, tally.fetches, tally.pages, tally.size)
        mine = _read(directory, tally, skips)
        files += mine
        row = rows.get(directory)
        if row is not None:
            row.files = len(mine)
            row.lines, row.fetches, row.pages, row.size = (
                now - then for now, then in zip(
                    (tally.lines, tally.fetches, tally.pages, tally.size), before, strict=True))
    pending = pending_by_host(read, top)
    for machine in machines:
        machine.pending = pending.by_dir.get(machine.data_dir, 0)
    report = Report(data_dir, time.time(), files, tally, skips, pending,
                    busiest_domains(read, top), top=top, machines=machines)
    report.seconds = time.perf_counter() - started
    return report


def _read(data_dir: Path, tally: Tally, skips: Skips) -> list[Path]:
    """Fold one data directory's crawl logs into ``tally``; the files read."""
    dd = DataDir(data_dir)
    log_dir = dd.logs
    if not log_dir.is_dir():
        raise HiveError(f"{data_dir} has no crawl logs ({log_dir} is not a directory): "
                        "is it a hive data directory?")
    try:
        files = dd.crawl_logs()
    except OSError as exc:
        raise HiveError(f"cannot list {log_dir}: {exc.strerror}") from exc
    try:
        for entry in read_lines(files, skips):
            tally.add(entry)
    except OSError as exc:
        raise HiveError(f"cannot read the crawl logs in {log_dir}: {exc}") from exc
    return files
