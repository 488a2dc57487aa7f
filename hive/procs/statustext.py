"""What ``hive status``, the live line and ``hive stop`` say, from a status answer (pure).

The supervisor's ``status`` answer (hive/procs/stats.py) is the one source: a row
per process, the totals, what the rest of the batch waits for (``waiting``),
whether it is stopping. This module turns it into text: a table that drops its
least needed columns to fit the terminal's width (80 columns keep role, pid,
cpu%, memory, pending, ready, parked, in flight, pages and errors), and one-line
notes on a wait, a stop, refusals, cookies refused or dropped and failing outputs, wrapped to
the same width.
"""

from __future__ import annotations

import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hive.core.prior import CHANGES
from hive.fetch.cookies import DROPPED, REFUSED
from hive.fetch.sinks import failures
from hive.frontier.refusals import describe

Row = dict[str, Any]


def _rate(hits: int, misses: int) -> str:
    return f"{100 * hits / (hits + misses):.0f}%" if hits + misses else "-"


@dataclass(frozen=True)
class Column:
    """A column of the status table: ``cell`` reads a process row, ``total`` the totals."""

    title: str
    width: int
    cell: Callable[[Row], object]
    total: Callable[[Row], object] = lambda t: ""
    keep: int = 0  # narrower terminals drop the highest ``keep`` first; 0 always stays


def _stat(key: str) -> Callable[[Row], object]:
    return lambda row: row["stats"].get(key, 0) if "stats" in row else ""


def _total(key: str) -> Callable[[Row], object]:
    return lambda t: t.get(key, 0)


def _hit_rate(hits: tuple[str, ...], misses: str) -> Callable[[Row], object]:
    def cell(row: Row) -> object:
        if "stats" not in row:
            return ""
        stats = row["stats"]
        return _rate(sum(stats.get(k, 0) for k in hits), stats.get(misses, 0))

    return cell


COLUMNS = (
    Column("role", 11, lambda r: r["role"]),
    Column("pid", 8, lambda r: r.get("pid") or "-"),
    Column("cpu%", 6, lambda r: "-" if r.get("cpu") is None else f"{r['cpu']:.0f}"),
    Column("rss MB", 7, lambda r: f"{r['rss_mb']:.0f}" if "rss_mb" in r else "-", keep=1),
    Column("files", 6, lambda r: r.get("open_files", "-"), keep=4),
    Column("pending", 9, _stat("frontier/pending"), _total("frontier/pending")),
    Column("bound", 6, _stat("frontier/hosts/bound"), _total("frontier/hosts/bound"), keep=3),
    Column("ready", 6, _stat("frontier/hosts/ready"), _total("frontier/hosts/ready"), keep=1),
    Column("parked", 7, _stat("frontier/hosts/parked"), _total("frontier/hosts/parked"), keep=1),
    Column("flight", 7, _stat("worker/in_flight"), _total("worker/in_flight")),
    Column("pages", 9, _stat("frontier/done/ok"), _total("frontier/done/ok")),
    Column("errors", 7, lambda r: r.get("errors", ""), _total("errors")),
    Column("outbox", 7, _stat("outbox/size"), _total("outbox/size"), keep=2),
    Column("dns hit", 8, _hit_rate(("dns/hits",), "dns/misses"), keep=5),
    Column("robots hit", 11, _hit_rate(("robots/hits", "robots/loads"), "robots/misses"), keep=6),
)


def columns(width: int) -> list[Column]:
    """The columns that fit ``width``, in table order: the least needed go first."""
    shown = list(COLUMNS)
    for level in sorted({c.keep for c in COLUMNS if c.keep}, reverse=True):
        if sum(c.width for c in shown) <= width:
            break
        shown = [c for c in shown if c.keep != level]
    return shown


def _cell(value: object, column: Column, first: bool) -> str:
    """A cell padded to its column; a longer figure widens the line rather than being cut."""
    text = f"{value:.0f}" if isinstance(value, float) else str(value)
    return f"{text:<{column.width}}" if first else f" {text:>{column.width - 1}}"


def duration(seconds: float) -> str:
    """``45s``, ``9m58s``, ``2h03m``."""
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


WAIT_REASONS = {
    "retry_after": "the server's Retry-After",
    "backoff": "back-off after failed fetches",
    "robots_retry": "robots.txt retry",
    "crawl_delay": "robots.txt Crawl-delay",
    "delay": "politeness delay",
}


def waiting_note(waiting: Mapping[str, Any] | None, now: float) -> str:
    """What all that is left of the batch waits for, and until when; empty if nothing waits."""
    if not waiting:
        return ""
    until, hosts = waiting["until"], int(waiting["hosts"])
    why = WAIT_REASONS.get(waiting["why"], waiting["why"] or "its delay")
    if waiting.get("status"):
        why += f" (HTTP {waiting['status']})"
    return (f"waiting: {hosts} host{'' if hosts == 1 else 's'}, next {waiting['host']} at "
            f"{time.strftime('%H:%M:%S', time.localtime(until))} (in "
            f"{duration(until - now)}): {why}")


def drain_note(hosts: Mapping[str, Any] | None) -> str:
    """The forecast of hive/procs/hoststatus.py: ``drain ≥ 2m05s (slowest: a.test:80, worker
    1)``; empty before any report."""
    forecast = (hosts or {}).get("forecast")
    if not forecast:
        return ""
    note = f"drain ≥ {duration(forecast['seconds'])}"
    if forecast.get("host") and forecast["seconds"] > 0:
        note += f" (slowest: {forecast['host']}, worker {forecast['worker']})"
    return note


def cookie_note(reports: Iterable[Mapping[str, Any]]) -> str:
    """``cookies: 9,800 refused (too_large 9,800); 48 dropped (header_bytes 48); 1.2 MiB
    held`` over the workers' reports; empty unless a cookie was refused or dropped."""
    refused: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    held = 0.0
    for stats in reports:
        for key, value in stats.items():
            if not isinstance(value, int | float):
                continue
            if key.startswith(REFUSED):
                refused[key[len(REFUSED):]] += int(value)
            elif key.startswith(DROPPED):
                dropped[key[len(DROPPED):]] += int(value)
            elif key == "cookies/bytes":
                held += value
    if not refused and not dropped:
        return ""

    def part(counts: Counter[str], what: str) -> str:
        each = ", ".join(f"{reason} {n:,}" for reason, n in counts.most_common())
        return f"{sum(counts.values()):,} {what} ({each})"

    parts = [part(counts, what) for counts, what in ((refused, "refused"), (dropped, "dropped"))
             if counts]
    return f"cookies: {'; '.join(parts)}; {held / (1 << 20):.1f} MiB held"


def sink_note(rows: Iterable[Row]) -> str:
    """``outputs failing: text 12 (worker-01 12); see each worker's log`` when an
    optional sink failed; empty otherwise. The exchanges it missed are not in its
    output, while the crawl and the sinks after it went on (hive.fetch.sinks)."""
    by_sink: dict[str, Counter[str]] = {}
    for row in rows:
        for label, count in failures(row.get("stats", {})).items():
            if count:
                by_sink.setdefault(label, Counter())[row["role"]] += count
    if not by_sink:
        return ""
    parts = [f"{label} {sum(roles.values()):,} ("
             + ", ".join(f"{role} {n:,}" for role, n in sorted(roles.items())) + ")"
             for label, roles in sorted(by_sink.items())]
    return ("outputs failing: " + "; ".join(parts)
            + "; their pages are missing from that output (see each worker's log)")


def changes_note(reports: Iterable[Mapping[str, Any]]) -> str:
    """``changes: 3 new, 12 changed, 80 unchanged, 2 gone, 0 moved`` over the workers'
    reports (``changes/<change>``, a recrawl's: hive.core.prior); empty for a crawl
    that is no recrawl."""
    counts: Counter[str] = Counter()
    for stats in reports:
        for change in CHANGES:
            value = stats.get(f"changes/{change}")
            if isinstance(value, int | float):
                counts[change] += int(value)
    if not counts:
        return ""
    return "changes: " + ", ".join(f"{counts[change]:,} {change}" for change in CHANGES)


def stopping_note(status: dict[str, Any]) -> str:
    """What a stopping hive still waits for: fetches in flight, then processes closing."""
    if not status.get("stopping"):
        return ""
    alive = [row for row in status["processes"] if row.get("alive")]
    flight = [(row["role"], row.get("stats", {}).get("worker/in_flight", 0)) for row in alive]
    flight = [(role, n) for role, n in flight if n]
    if flight:
        total = sum(n for _, n in flight)
        each = ", ".join(f"{role}: {n}" for role, n in flight)
        limit = status.get("fetch_total_timeout")
        within = f"; each ends within {limit:g}s" if limit else ""
        return (f"stopping: waiting for {total} fetch{'' if total == 1 else 'es'} in flight "
                f"to finish ({each}{within})")
    if alive:
        return "stopping: waiting for " + ", ".join(row["role"] for row in alive) + " to close"
    return "stopping"


def machines_note(machines: list[dict[str, Any]] | None) -> str:
    """A cluster's machines (``hive start --cluster``): each one's epoch and state."""
    if not machines:
        return ""
    shown = []
    for machine in machines:
        state = ("dropped" if machine.get("dropped") else "lost" if machine.get("lost")
                 else "down" if not machine.get("alive")
                 else "quiet" if machine.get("quiet") else "crawling")
        rejoins = machine.get("rejoins") or 0
        again = f", started again {rejoins}x" if rejoins else ""
        shown.append(f"{machine.get('machine')} (epoch {machine.get('epoch')}, {state}{again})")
    return f"machines: {', '.join(shown)}"


def format_status(status: dict[str, Any], width: int, now: float) -> str:
    """The status table narrowed to ``width`` columns, then its notes."""
    shown = columns(width)
    lines = ["".join(_cell(c.title, c, i == 0) for i, c in enumerate(shown))]
    for row in status["processes"]:
        lines.append("".join(_cell(c.cell(row), c, i == 0) for i, c in enumerate(shown)))
    totals = status["totals"]
    lines.append("".join(_cell("total" if i == 0 else c.total(totals), c, i == 0)
                         for i, c in enumerate(shown)))
    notes = [
        machines_note(status.get("machines")),
        f"{totals['pages_per_s']:.1f} pages/s over the last minute, "
        f"{totals.get('pages_this_start', 0):.0f} pages this start; cpu% over the last "
        f"{status.get('cpu_window', 10):g}s",
        stopping_note(status),
        waiting_note(status.get("waiting"), now),
        drain_note(status.get("hosts")),
        describe(row.get("stats", {}) for row in status["processes"]),
        cookie_note(row.get("stats", {}) for row in status["processes"]),
        changes_note(row.get("stats", {}) for row in status["processes"]),
        sink_note(status["processes"]),
    ]
    lines += [textwrap.fill(note, width, subsequent_indent="  ", break_on_hyphens=False)
              for note in notes if note]
    return "\n".join(lines)
