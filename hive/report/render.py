"""The report drawn: one HTML page that needs nothing else (inline CSS, inline SVG, no script).

Plots are matplotlib figures written as SVG (text as text, so the page stays
small and searchable) and inlined. Every string that comes from a log is
escaped for HTML and drawn with matplotlib's math text off, so a host or an
outcome cannot change the page. A section with nothing to show says so.
"""

from __future__ import annotations

import html
import io
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hive.core.prior import CHANGES
from hive.report.crawl import Report
from hive.report.tally import WAIT_EDGES

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Labels longer than this are cut on plots (tables show them whole).
LABEL_CHARS = 48
WIDTH = 7.5
STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:60em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.15em .7em;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}tr:nth-child(even){background:#f4f4f4}
.empty{color:#777;font-style:italic}.note{color:#a40}.cols{display:flex;gap:2em;flex-wrap:wrap;align-items:flex-start}
svg{max-width:100%;height:auto}
"""


def render(report: Report) -> str:
    """The whole page."""
    from matplotlib import rc_context

    # Text as SVG text, not paths; no math text, so a "$" in a host name is just a "$".
    with rc_context({
        "svg.fonttype": "none", "text.parse_math": False, "font.size": 9,
        "font.family": "sans-serif", "axes.spines.top": False, "axes.spines.right": False,
    }):
        sections = [
            _summary(report), _machines(report), _rates(report), _outcomes(report),
            _changes(report), _mimes(report),
            _hosts(report), _domains(report), _addresses(report), _refusals(report),
            _depth(report), _waits(report), _slowest(report), _skipped(report),
        ]
    title = f"hive crawl report: {html.escape(str(report.data_dir))}"
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title><style>{STYLE}</style></head>\n<body><h1>{title}</h1>\n"
        + "\n".join(section for section in sections if section) + "\n</body></html>\n"
    )


def _section(anchor: str, heading: str, *parts: str) -> str:
    body = "\n".join(p for p in parts if p)
    return f'<section id="{anchor}"><h2>{html.escape(heading)}</h2>\n{body}</section>'


def _empty(text: str) -> str:
    return f'<p class="empty">{html.escape(text)}</p>'


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(value: object) -> str:
    if isinstance(value, int):
        return f'<td class="n">{value:,}</td>'
    if isinstance(value, float):
        return f'<td class="n">{value:,.3f}</td>'
    return f"<td>{html.escape(str(value))}</td>"


def _figure(height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(WIDTH, height), layout="constrained")


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def _cut(label: object) -> str:
    text = str(label)
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _barh(rows: Sequence[tuple[object, float]], xlabel: str) -> str:
    """Horizontal bars, largest on top."""
    figure = _figure(0.6 + 0.22 * len(rows))
    axes: Axes = figure.add_subplot()
    labels = [_cut(label) for label, _ in rows][::-1]
    axes.barh(range(len(rows)), [value for _, value in rows][::-1], color="#4a7ab0")
    axes.set_yticks(range(len(rows)), labels)
    axes.set_xlabel(xlabel)
    return _svg(figure)


def _bars(labels: Sequence[str], values: Sequence[float], xlabel: str, ylabel: str) -> str:
    figure = _figure(2.6)
    axes: Axes = figure.add_subplot()
    axes.bar(range(len(values)), values, color="#4a7ab0")
    axes.set_xticks(range(len(values)), labels, rotation=45 if len(values) > 12 else 0)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    return _svg(figure)


def _pruned_note(pruned: int, what: str) -> str:
    if not pruned:
        return ""
    return (f'<p class="note">The {what} table overflowed {pruned:,} times and kept its largest '
            "entries: counts shown are lower bounds.</p>")


def _summary(report: Report) -> str:
    tally, skips = report.tally, report.skips
    span = tally.last - tally.first if tally.lines else 0.0
    rows: list[tuple[str, object]] = [
        ("crawl log files", len(report.files)),
        ("lines read", tally.lines),
        ("lines skipped", skips.total),
        ("fetches", tally.fetches),
        ("pages (ok)", tally.pages),
        ("bytes", tally.size),
        ("hosts seen", len(tally.hosts)),
        ("URLs pending (stores)",
         report.pending.queued + report.pending.front + report.pending.retrying),
    ]
    if tally.lines:
        rows += [
            ("first line (UTC)", _utc(tally.first)),
            ("last line (UTC)", _utc(tally.last)),
            ("span (s)", round(span, 3)),
        ]
    rows.append(("report made (UTC)", _utc(report.made)))
    rows.append(("read in (s)", round(report.seconds, 3)))
    return _section("summary", "Summary", _table(("", ""), rows),
                    "" if tally.lines else _empty("The crawl logs hold no usable line yet."))


def _machines(report: Report) -> str:
    """A cluster's machines, each by its own directory; nothing for one machine's crawl."""
    if not report.machines:
        return ""
    rows = [(m.name, "dropped" if m.dropped else "", m.files, m.lines, m.fetches, m.pages,
             m.size, m.pending, str(m.data_dir)) for m in report.machines if m.has_logs]
    missing = [f"{m.name} ({m.data_dir})" for m in report.machines if not m.has_logs]
    note = (f'<p class="note">{html.escape("No crawl logs for " + ", ".join(missing))}: their '
            "lines are not in this report (copy each machine's directory there first).</p>"
            if missing else "")
    return _section("machines", "Machines", _table(
        ("machine", "", "crawl log files", "lines", "fetches", "pages (ok)", "bytes",
         "URLs pending", "directory"), rows), note,
        "<p>The sections below are over every machine's crawl logs and stores.</p>")


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))


def _rates(report: Report) -> str:
    series = report.tally.times.series()
    if not series:
        return _section("rates", "Pages and bytes per second", _empty("No line has a time."))
    span = series[-1][0] + report.tally.times.width
    unit, scale = ("h", 3600.0) if span > 3 * 3600 else ("min", 60.0) if span > 300 else ("s", 1.0)
    width = report.tally.times.width
    edges = [row[0] / scale for row in series] + [span / scale]
    figure = _figure(4.2)
    top, bottom = figure.subplots(2, 1, sharex=True)
    top.stairs([row[1] for row in series], edges, label="pages/s (ok)", linewidth=1.5)
    top.stairs([row[2] for row in series], edges, label="fetches/s", alpha=0.6)
    top.set_ylabel("per second")
    top.legend(loc="upper right", frameon=False)
    peak = max(row[3] for row in series)
    bytes_unit, divisor = ("MB/s", 1e6) if peak >= 1e6 else ("kB/s", 1e3)
    bottom.stairs([row[3] / divisor for row in series], edges, color="#b05a4a")
    bottom.set_ylabel(bytes_unit)
    bottom.set_xlabel(f"{unit} since {_utc(report.tally.times.start or 0)} UTC")
    note = f"<p>Each step is {width:g} s; {len(series)} steps.</p>"
    return _section("rates", "Pages and bytes per second", _svg(figure), note)


def _outcomes(report: Report) -> str:
    tally = report.tally
    outcomes, statuses = tally.outcomes.top(report.top), tally.statuses.top(report.top)
    parts = [
        _barh(outcomes, "lines") if outcomes else _empty("No outcome."),
        _barh([(str(s), n) for s, n in statuses], "fetches")
        if statuses else _empty("No HTTP status."),
        '<div class="cols">',
        _table(("outcome", "lines"), outcomes),
        _table(("status", "fetches"), [(str(s), n) for s, n in statuses]),
        "</div>",
        _pruned_note(tally.outcomes.pruned, "outcome"),
        _pruned_note(tally.statuses.pruned, "status"),
    ]
    return _section("outcomes", "Outcomes and status codes", *parts)


def _mimes(report: Report) -> str:
    tally = report.tally
    mimes = tally.mimes.top(report.top)
    if not mimes:
        return _section("mime", "MIME types", _empty(
            "No line of these crawl logs names a MIME type (the field mime)."))
    note = (f"<p>{tally.mime_lines:,} of {tally.fetches:,} fetches name their type.</p>")
    return _section("mime", "MIME types", _barh(mimes, "fetches"), note,
                    _table(("MIME type", "fetches"), mimes),
                    _pruned_note(tally.mimes.pruned, "MIME type"))


def _hosts(report: Report) -> str:
    tally, pending, n = report.tally, report.pending, report.top
    by_pages, by_errors = tally.top_hosts("pages", n), tally.top_hosts("errors", n)
    parts = [
        "<h3>By pages</h3>",
        _barh(by_pages, "pages") if by_pages else _empty("No host has a page yet."),
        "<h3>By pending URLs</h3>",
        _barh(pending.top, "URLs queued") if pending.top else _empty(
            "No host has URLs queued in the stores."),
        "<p>" + html.escape(
            f"{pending.queued:,} URLs queued in hosts' queues, {pending.front:,} in the front "
            f"queues (no host yet), {pending.retrying:,} waiting for a retry, in "
            f"{pending.stores} store(s).") + "</p>",
        *(f'<p class="note">{html.escape(problem)}</p>' for problem in pending.problems),
        "<h3>By errors</h3>",
        _barh(by_errors, "errors") if by_errors else _empty("No host has an error."),
        '<div class="cols">',
        _table(("host", "pages"), by_pages),
        _table(("host", "pending"), pending.top),
        _table(("host", "errors"), by_errors),
        "</div>",
        _pruned_note(tally.hosts_pruned, "host"),
    ]
    return _section("hosts", "Top hosts", *parts)


def _domains(report: Report) -> str:
    """The busiest registered domains: hosts, pages and the URLs their caps refused."""
    found = report.domains
    problems = [f'<p class="note">{html.escape(problem)}</p>' for problem in found.problems]
    if not found.top:
        return _section("domains", "Busiest registered domains", _empty(
            "No store has domain rows (a crawl of before them, or none yet)."), *problems)
    rows = [(r.domain, r.fetched, r.pages, r.hosts, r.refused_hosts, r.refused_pages)
            for r in found.top]
    refused = ", ".join(f"{reason} {count:,}" for reason, count in sorted(found.refused.items()))
    return _section(
        "domains", "Busiest registered domains",
        _barh([(r.domain, r.fetched) for r in found.top], "pages fetched"),
        _table(("domain", "fetched", "pages admitted", "hosts", "refused: max_hosts_per_domain",
                "refused: max_pages_per_domain"), rows),
        "<p>" + html.escape(
            "Refused by the domain caps in all: " + (refused or "none") + ". By domain, as "
            "far as the workers' refusal tallies name it.") + "</p>",
        *problems,
    )


def _addresses(report: Report) -> str:
    """The IP addresses the crawl fetched from most, with how many of its hosts each
    served: where servers are shared, the per-address limits (politeness.ip_*) hold."""
    tally = report.tally
    rows = tally.busiest_addresses(report.top)
    if not rows:
        return _section("addresses", "Busiest addresses", _empty(
            "No line of these crawl logs names an address (the field address)."))
    return _section(
        "addresses", "Busiest addresses", _barh([(a, f) for a, f, _ in rows], "fetches"),
        _table(("address", "fetches", "hosts"), rows),
        _pruned_note(tally.addresses.pruned, "address"),
        _pruned_note(tally.address_hosts.pruned, "address-host"))


def _changes(report: Report) -> str:
    """A recrawl's changes since its prior crawls (nothing for a crawl that is none)."""
    changes = report.tally.changes
    if not changes:
        return ""
    rows = [(change, changes[change]) for change in CHANGES]
    return _section("changes", "Changes since the prior crawls", _barh(rows, "URLs"),
                    _table(("change", "URLs"), rows))


def _refusals(report: Report) -> str:
    rows = report.tally.refusals.top(report.top)
    if not rows:
        return _section("refusals", "Refusals by reason", _empty("Nothing was refused."))
    return _section("refusals", "Refusals by reason", _barh(rows, "URLs"),
                    _table(("reason", "URLs"), rows),
                    _pruned_note(report.tally.refusals.pruned, "refusal"))


def _depth(report: Report) -> str:
    depths = report.tally.depths
    if not depths:
        return _section("depth", "Depth", _empty("No page yet."))
    deepest = max(depths)
    labels = [str(d) for d in range(deepest + 1)]
    values = [depths.get(d, 0) for d in range(deepest + 1)]
    return _section("depth", "Depth", _bars(labels, values, "depth (links from a seed)", "pages"))


def _waits(report: Report) -> str:
    tally = report.tally
    total = sum(tally.waits)
    if not total:
        return _section("waits", "Politeness waits", _empty(
            "No host was fetched twice yet."))
    labels = [f"<{edge:g}" for edge in WAIT_EDGES] + [f"≥{WAIT_EDGES[-1]:g}"]
    mean = tally.wait_total / total
    note = (f"<p>The time from the end of one fetch of a host to the start of its next: "
            f"{total:,} waits, {mean:.3f} s on average.</p>")
    return _section("waits", "Politeness waits", _bars(labels, tally.waits, "seconds", "waits"),
                    note)


def _slowest(report: Report) -> str:
    rows = report.tally.slowest_hosts(report.top)
    if not rows:
        return _section("slowest", "Slowest hosts", _empty(
            "No host has enough fetches to be ranked yet."))
    return _section(
        "slowest", "Slowest hosts",
        _barh([(host, mean) for host, mean, _ in rows], "mean download time (s)"),
        _table(("host", "mean download (s)", "fetches"), rows),
    )


def _skipped(report: Report) -> str:
    skips = report.skips
    if not skips.total:
        return _section("skipped", "Skipped lines", "<p>No line was skipped.</p>")
    return _section(
        "skipped", "Skipped lines",
        f"<p>{skips.total:,} lines were skipped.</p>",
        _table(("cause", "lines"), skips.by_cause.most_common()),
        "<p>First skipped:</p><ul>"
        + "".join(f"<li>{html.escape(s)}</li>" for s in skips.named) + "</ul>",
    )
