"""A crawl's report data: its crawl logs streamed into a tally, its stores asked for pending
URLs, gathered in one :class:`Report` that :mod:`hive.report.render` draws."""

from __future__ import annotations

import time
from dataclasses import dataclass
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


def collect(data_dir: Path, top: int = TOP) -> Report:
    """Read the crawl in ``data_dir``: a HiveError if it has no crawl log directory."""
    started = time.perf_counter()
    dd = DataDir(data_dir)
    log_dir = dd.logs
    if not log_dir.is_dir():
        raise HiveError(f"{data_dir} has no crawl logs ({log_dir} is not a directory): "
                        "is it a hive data directory?")
    try:
        files = dd.crawl_logs()
    except OSError as exc:
        raise HiveError(f"cannot list {log_dir}: {exc.strerror}") from exc
    skips, tally = Skips(), Tally()
    try:
        for entry in read_lines(files, skips):
            tally.add(entry)
    except OSError as exc:
        raise HiveError(f"cannot read the crawl logs in {log_dir}: {exc}") from exc
    report = Report(data_dir, time.time(), files, tally, skips, pending_by_host(data_dir, top),
                    busiest_domains(data_dir, top), top=top)
    report.seconds = time.perf_counter() - started
    return report
