"""The request log of a served web, and the checks a crawl's requests must pass.

Every request the server answers becomes a :class:`Request`, kept in memory
and, when asked, appended to a file as a JSON line (:func:`load_log` reads it
back). The checks: :func:`politeness_violations`, on the server's stamps or
corrected by hive's crawl log (:func:`received`, :func:`as_received`), and
:func:`duplicates`; :meth:`hive.testweb.graph.Web.strays` finds the requests
for names outside the web.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

# The crawl log rounds its times to the millisecond.
LOG_ROUNDING = 0.001


def hostname(host_header: str) -> str:
    """The name in a Host header, without its port (``[::1]:80`` -> ``[::1]``)."""
    if host_header.startswith("["):
        return host_header[: host_header.find("]") + 1]
    return host_header.rpartition(":")[0] if ":" in host_header else host_header


@dataclass(frozen=True, slots=True)
class Request:
    """One entry of the request log (GET and HEAD; other methods get 501, unlogged).

    ``host`` is the Host header as sent, lower-cased (with its port, if any);
    ``start`` is when the request had been read and ``end`` when the response
    had been written, both ``time.time()`` as the handler read it. A record is
    added just after its response is written. When a client abandons a stream,
    ``end`` is when the server noticed: at the next write, at most
    ``graph.DRIP_INTERVAL`` later. ``cookie`` is the request's Cookie header (""
    when it had none).

    ``arrived`` and ``sent`` are the kernel's stamps (the same clock), where it
    gives them (None where not): when the request's first bytes arrived and when
    the response's last byte was transmitted. A handler's own stamps can be late
    by however long its thread waited for the CPU or the GIL after the event, so
    a gap measured between ``end`` and the next ``start`` can look shorter than
    it was; ``received`` and ``finished`` are what the checks use: the kernel's
    stamps when there are, else the handler's. ``server`` is the address the request
    came in at (the test web may listen at several: :func:`address_violations`).
    """

    host: str
    path: str
    method: str
    status: int
    start: float
    end: float
    client: str
    cookie: str = ""
    arrived: float | None = None
    sent: float | None = None
    server: str = ""

    @property
    def received(self) -> float:
        """When the request arrived: the kernel's stamp, else the handler's."""
        return self.start if self.arrived is None else self.arrived

    @property
    def finished(self) -> float:
        """When the response's last byte went out: the kernel's stamp, else the handler's."""
        return self.end if self.sent is None else self.sent

    @property
    def hostname(self) -> str:
        return hostname(self.host)

    @property
    def url(self) -> str:
        return f"http://{self.host}{self.path}"

    def to_json(self) -> str:
        return json.dumps({
            "host": self.host, "path": self.path, "method": self.method, "status": self.status,
            "start": self.start, "end": self.end, "client": self.client,
            **({"cookie": self.cookie} if self.cookie else {}),
            "arrived": self.arrived, "sent": self.sent,
            **({"server": self.server} if self.server else {}),
        })

    @classmethod
    def from_json(cls, line: str) -> Request:
        data = json.loads(line)
        return cls(
            str(data["host"]), str(data["path"]), str(data["method"]), int(data["status"]),
            float(data["start"]), float(data["end"]), str(data["client"]),
            str(data.get("cookie", "")),
            _stamp(data.get("arrived")), _stamp(data.get("sent")), str(data.get("server", "")),
        )


def _stamp(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def load_log(path: Path) -> list[Request]:
    """The request log a ``python -m hive.testweb --log FILE`` process wrote (complete lines)."""
    with path.open(encoding="utf-8") as lines:
        return [Request.from_json(line) for line in lines if line.endswith("\n")]


def politeness_violations(
    records: Iterable[Request], min_gap: float | Mapping[str, float] = 0.0, tolerance: float = 0.0
) -> list[str]:
    """Every breach of politeness in a request log, one message each.

    Per host name (port ignored), in order of arrival: a request that arrives
    before an earlier one to that host has finished (overlap), or less than the
    host's gap after it finished (``Request.received`` and ``Request.finished``:
    the kernel's stamps where the server has them). ``min_gap`` is one gap for every host or a map
    host -> gap (hosts not in it: 0, only overlaps count). ``tolerance`` forgives
    that much of each rule, for clock granularity.
    """
    by_host: dict[str, list[Request]] = defaultdict(list)
    for record in records:
        by_host[record.hostname].append(record)
    violations = []
    for host, requests in sorted(by_host.items()):
        gap = min_gap.get(host, 0.0) if isinstance(min_gap, Mapping) else min_gap
        requests.sort(key=lambda r: r.received)
        last = requests[0]  # the request, so far, that finished last
        for request in requests[1:]:
            start, end = request.received, last.finished
            if start < end - tolerance:
                violations.append(
                    f"{host}: {request.path} started at {start:.3f} while "
                    f"{last.path} was in flight (until {end:.3f})"
                )
            elif start - end < gap - tolerance:
                violations.append(
                    f"{host}: {request.path} started {start - end:.3f}s after "
                    f"{last.path} ended; the gap is {gap:g}s"
                )
            if request.finished > end:
                last = request
    return violations


def address_violations(records: Iterable[Request], concurrency: int, starts_per_second: int,
                       tolerance: float = 0.0) -> list[str]:
    """Every breach of the per-address limits in a request log, one message each: at one
    server address, more than ``concurrency`` requests in flight at once (arrived and not
    yet finished: the kernel's stamps), or more than ``starts_per_second`` arriving within
    one second. ``tolerance`` forgives that much of each time, for clock granularity."""
    by_address: dict[str, list[Request]] = defaultdict(list)
    for record in records:
        by_address[record.server].append(record)
    violations = []
    for address, requests in sorted(by_address.items()):
        events = sorted([(r.received + tolerance, 1) for r in requests]
                        + [(r.finished, -1) for r in requests])
        flying = peak = 0
        for when, step in events:
            flying += step
            if flying > concurrency and flying > peak:
                violations.append(f"{address}: {flying} requests in flight at {when:.3f}")
            peak = max(peak, flying)
        starts = sorted(r.received for r in requests)
        first = 0
        worst = 0
        for i, start in enumerate(starts):
            while starts[first] < start - 1.0 + tolerance:
                first += 1
            worst = max(worst, i - first + 1)
        if worst > starts_per_second:
            violations.append(f"{address}: {worst} requests started within one second")
    return violations


def busiest_second(records: Iterable[Request]) -> dict[str, int]:
    """Per server address, the most requests that arrived within one second."""
    by_address: dict[str, list[float]] = defaultdict(list)
    for record in records:
        by_address[record.server].append(record.received)
    out = {}
    for address, starts in by_address.items():
        starts.sort()
        first = worst = 0
        for i, start in enumerate(starts):
            while starts[first] < start - 1.0:
                first += 1
            worst = max(worst, i - first + 1)
        out[address] = worst
    return out


def received(log_dir: Path) -> dict[str, list[float]]:
    """When the crawler had each response, from hive's crawl logs in ``log_dir``: URL ->
    sorted times. A line cut by a kill (and continued by a restarted worker) is skipped."""
    times: dict[str, list[float]] = defaultdict(list)
    for path in log_dir.glob("crawl-*.jsonl"):
        for line in path.read_text(encoding="utf-8").split("\n"):
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            times[entry["url"]].append(float(entry["t"]))
    for values in times.values():
        values.sort()
    return times


def as_received(requests: Iterable[Request], times: Mapping[str, list[float]]) -> list[Request]:
    """The request log, each response ending when the crawler had it if that came first.

    A busy server stamps a response's end late, never early, so a politeness
    check on the raw stamps sees gaps shorter than the crawler left. A
    request's response is the first one the crawler had at or after the request
    started (the crawl log rounds times to the millisecond).
    """
    out = []
    for request in requests:
        seen = times.get(request.url, [])
        i = bisect.bisect_left(seen, request.start - LOG_ROUNDING)
        end = min(request.end, seen[i]) if i < len(seen) else request.end
        out.append(dataclasses.replace(request, end=end))
    return out


def duplicates(records: Iterable[Request]) -> dict[str, int]:
    """URLs fetched more than once: url -> number of fetches.

    Counts GETs with a final answer only: robots.txt (re-fetched when its cache
    expires or after a failure) and retryable answers (429, 5xx) are retries,
    not duplicates.
    """
    counts = Counter(
        r.url
        for r in records
        if r.method == "GET" and r.path != "/robots.txt" and r.status != 429 and r.status < 500
    )
    return {url: n for url, n in counts.items() if n > 1}
