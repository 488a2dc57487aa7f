"""Hosts at a glance: each worker's top hosts by pending URLs, and how long the batch has left.

A host goes no faster than one URL per cycle — its download time plus its
politeness delay (hive/core/politeness.py) — so a host's *drain* is the wait
before its next fetch (a back-off or Retry-After shows there) plus pending ×
cycle, and the slowest host bounds the whole batch: the *forecast* is the
largest drain. With address politeness on (hive/procs/addresses.py), the hosts
a worker sees at one IP address drain no faster than the address allows: one
start per ``ip_min_delay`` and ``ip_concurrency`` fetches at once, so each of them
drains no sooner than all their pending URLs at that pace (``AddressPace``; a
host's address is what the DNS cache knows without waiting, none if it knows
nothing). It is a lower bound: URLs still in the front queues belong to
no host yet (``front`` counts them), parked hosts beyond the first
PARKED_SCAN by due time are not looked at (``unseen``), and other workers' hosts
at the same address are not counted.

Worker side, ``HostView.stats(now)``: at most every REFRESH seconds, and never
for more than 1% of the frontier thread's time (COST_FACTOR; else it gives the
last answer again), it reads the bound hosts' states from memory and the first
PARKED_SCAN parked ones from the store, and gives, as stats keys (values are
numbers, so the host is in the key, as ``refusals/<reason>/<host>`` does):

- ``hosts/time``, ``hosts/drain`` (seconds from ``hosts/time``), ``hosts/seen``
  and ``hosts/unseen``;
- for each of its top N hosts by pending (and the slowest, if not among them)
  ``hosts/<field>/<host key>`` for the fields of FIELDS, ``state`` as an index
  into STATES (``address``: leased, its lease waiting for a start slot at its IP
  address, hive/procs/addresses.py, which reports ``address/waiting/<address>``).

Its cost per refresh is bounded by ``frontier.max_bound_hosts`` + PARKED_SCAN
hosts and N (``hive.status_hosts``, at most 100) keys per field, never by the
number of pending URLs.

Supervisor side, ``summary(reports, now)`` merges the workers' reports for
``hive status`` (``hosts`` in ``--json``), the live line and ``/metrics``;
``format_hosts`` (and hive/procs/statustext.py's ``drain_note``) say it in text.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hive.procs.statustext import drain_note, duration

if TYPE_CHECKING:
    from hive.frontier.frontier import Frontier
    from hive.frontier.hosts import HostState

REFRESH = 2.0
# A refresh waits at least this many times as long as the last one took, so that the view
# costs the frontier thread at most 1% of its time, however many hosts are bound.
COST_FACTOR = 100
PARKED_SCAN = 1000
PREFIX = "hosts/"
STATES = ("parked", "waiting", "ready", "leased", "address")
ADDRESS_PREFIX = "address/waiting/"
# Addresses holding hosts back that ``hive status --hosts`` names, the most held first.
ADDRESS_LINES = 5
FIELDS = ("pending", "state", "next", "delay", "backoff", "failures", "robots_until",
          "robots_tries", "drain")


@dataclass(frozen=True, slots=True)
class AddressPace:
    """The most an IP address allows (hive/procs/addresses.py), and where a host is."""

    concurrency: int
    min_delay: float
    address_of: Callable[[str, float], str | None]  # a host key's address, if known now

    def drain(self, pending: int, work: float) -> float:
        """The least time ``pending`` fetches at one address take, ``work`` seconds of
        downloads in all."""
        return max(pending * self.min_delay, work / self.concurrency)


class HostView:
    """A worker's hosts, for its reports (see the module docstring)."""

    def __init__(self, frontier: Frontier, top: int) -> None:
        self.frontier = frontier
        self.top = top
        self._next = 0.0
        self._last: dict[str, float] = {}
        self.on_address: Callable[[], Mapping[int, str]] | None = None
        self._on_address: Mapping[int, str] = {}
        self.pace: AddressPace | None = None

    def stats(self, now: float) -> dict[str, float]:
        if self.top and now >= self._next:
            started = time.perf_counter()
            self._last = self._compute(now)
            self._next = now + max(REFRESH, COST_FACTOR * (time.perf_counter() - started))
        return self._last

    def _compute(self, now: float) -> dict[str, float]:
        frontier = self.frontier
        back = frontier.back
        hosts: list[tuple[int, HostState]] = [
            (hh, host) for hh, host in back.bound.items() if not host.blocked
        ]
        self._on_address = self.on_address() if self.on_address is not None else {}
        parked = back.parked_count()
        scanned = 0
        for hh in back.parked_hosts(PARKED_SCAN):
            scanned += 1
            state = back.host(hh)
            if state is not None and not state.blocked:
                hosts.append((hh, state))
        delay = frontier.politeness.delay

        at_address = self._address_drains(hosts, now)

        def drain(host: HostState) -> float:
            cycle = host.download_time + delay(host.download_time, host.crawl_delay)
            own = max(host.next_allowed - now, 0.0) + host.pending * cycle
            return max(own, at_address.get(host.host_key, 0.0))

        out: dict[str, float] = {
            "hosts/time": now, "hosts/seen": len(hosts), "hosts/unseen": parked - scanned,
            "hosts/drain": 0.0,
        }
        if not hosts:
            return out
        top = heapq.nlargest(self.top, hosts, key=lambda item: item[1].pending)
        slowest = max(hosts, key=lambda item: drain(item[1]))
        if all(hh != slowest[0] for hh, _ in top):
            top.append(slowest)
        out["hosts/drain"] = drain(slowest[1])
        for hh, host in top:
            self._describe(hh, host, drain(host), now, out)
        return out

    def _address_drains(self, hosts: list[tuple[int, HostState]], now: float
                        ) -> dict[str, float]:
        """Each host's least drain at its address's pace: all the pending URLs of the hosts
        seen there, at one start per ``min_delay`` and ``concurrency`` at once (host key ->
        seconds; none without address politeness)."""
        pace = self.pace
        if pace is None:
            return {}
        placed: dict[str, list[HostState]] = {}
        for _, host in hosts:
            address = pace.address_of(host.host_key, now)
            if address is not None:
                placed.setdefault(address, []).append(host)
        out: dict[str, float] = {}
        for together in placed.values():
            drained = pace.drain(sum(host.pending for host in together),
                                 sum(host.pending * host.download_time for host in together))
            for host in together:
                out[host.host_key] = drained
        return out

    def _describe(self, hh: int, host: HostState, drained: float, now: float,
                  out: dict[str, float]) -> None:
        frontier = self.frontier
        if hh in self._on_address:
            state = "address"
        elif hh in frontier.leased:
            state = "leased"
        elif hh not in frontier.back.bound:
            state = "parked"
        else:
            state = "ready" if host.next_allowed <= now else "waiting"
        politeness = frontier.politeness
        values = {
            "pending": host.pending, "state": STATES.index(state), "next": host.next_allowed,
            "delay": politeness.delay(host.download_time, host.crawl_delay),
            "backoff": politeness.backoff(host.failures) if host.failures else 0.0,
            "failures": host.failures,
            "robots_until": max(host.robots_until, host.http_robots_until),
            "robots_tries": max(host.robots_tries, host.http_robots_tries),
            "drain": drained,
        }
        key = host.host_key
        for name, value in values.items():
            out[f"{PREFIX}{name}/{key}"] = value


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def worker_hosts(worker: int, stats: Mapping[str, object], now: float) -> list[dict[str, Any]]:
    """One worker's reported hosts as rows (``drain`` counted from ``now``)."""
    rows: dict[str, dict[str, Any]] = {}
    for key, value in stats.items():
        if not key.startswith(PREFIX):
            continue
        name, _, host = key[len(PREFIX):].partition("/")
        if host and name in FIELDS and isinstance(value, int | float):
            rows.setdefault(host, {"host": host, "worker": worker})[name] = value
    age = max(now - _number(stats.get("hosts/time")), 0.0)
    out = []
    for row in rows.values():
        state = int(row.get("state", 0))
        row["state"] = STATES[state] if 0 <= state < len(STATES) else "unknown"
        row["drain"] = max(_number(row.get("drain")) - age, 0.0)
        row.setdefault("pending", 0)
        out.append(row)
    return out


def summary(reports: Mapping[int, Mapping[str, object]], now: float) -> dict[str, Any]:
    """The workers' hosts merged: ``top`` (by pending, each worker's top N), the
    ``forecast`` (seconds to drain, its ``host`` and ``worker``; None before any report),
    ``front`` (URLs not yet assigned to a host) and ``unseen`` parked hosts."""
    rows: list[dict[str, Any]] = []
    forecast: dict[str, Any] | None = None
    front = unseen = 0.0
    for worker, stats in reports.items():
        front += _number(stats.get("frontier/front"))
        if "hosts/time" not in stats:
            continue
        unseen += _number(stats.get("hosts/unseen"))
        hosts = worker_hosts(worker, stats, now)
        rows += hosts
        seconds = max(_number(stats.get("hosts/drain"))
                      - max(now - _number(stats.get("hosts/time")), 0.0), 0.0)
        if forecast is None or seconds > forecast["seconds"]:
            slowest = max(hosts, key=lambda row: row["drain"], default=None)
            forecast = {"seconds": seconds, "worker": worker,
                        "host": slowest["host"] if slowest else None}
    rows.sort(key=lambda row: (-row["pending"], row["host"]))
    return {"top": rows, "forecast": forecast, "front": int(front), "unseen": int(unseen),
            "addresses": addresses_waited_on(reports)}


def addresses_waited_on(reports: Mapping[int, Mapping[str, object]]) -> list[dict[str, Any]]:
    """The IP addresses holding hosts back, over all workers, the most hosts first:
    ``address``, ``hosts`` waiting on it, ``workers`` they wait at."""
    merged: dict[str, dict[str, Any]] = {}
    for worker, stats in reports.items():
        for key, value in stats.items():
            if key.startswith(ADDRESS_PREFIX) and isinstance(value, int | float) and value:
                address = key[len(ADDRESS_PREFIX):]
                row = merged.setdefault(address, {"address": address, "hosts": 0, "workers": []})
                row["hosts"] += int(value)
                row["workers"].append(worker)
    return sorted(merged.values(), key=lambda row: (-row["hosts"], row["address"]))


def _clock(epoch: float, now: float) -> str:
    if epoch <= 0:
        return "-"
    if epoch <= now:
        return "now"
    return time.strftime("%H:%M:%S", time.localtime(epoch))


def _robots(row: Mapping[str, Any], now: float) -> str:
    until, tries = _number(row.get("robots_until")), int(_number(row.get("robots_tries")))
    if tries:
        return f"retry {tries}"
    if until <= 0:
        return "none"
    return f"to {_clock(until, now)}" if until > now else "expired"


def format_hosts(hosts: Mapping[str, Any], count: int, now: float) -> str:
    """The top ``count`` hosts as a table, then the forecast and what it does not see."""
    head = (f"{'host':<32} {'worker':>6} {'pending':>8} {'state':<8} {'next':>8} "
            f"{'delay':>7} {'backoff':>7} {'robots.txt':<12} {'drain':>7}")
    lines = [head]
    for row in hosts["top"][:count]:
        lines.append(
            f"{row['host']:<32} {row['worker']:>6} {row['pending']:>8.0f} {row['state']:<8} "
            f"{_clock(_number(row.get('next')), now):>8} {_number(row.get('delay')):>7.2f} "
            f"{_number(row.get('backoff')):>7.1f} {_robots(row, now):<12} "
            f"{duration(row['drain']):>7}"
        )
    if len(lines) == 1:
        lines.append("(no host has pending URLs in the workers' last reports)")
    note = drain_note(hosts)
    if note:
        lines.append(note)
    for row in hosts.get("addresses", [])[:ADDRESS_LINES]:
        workers = ",".join(str(w) for w in sorted(row["workers"]))
        lines.append(f"held back by their address {row['address']}: {row['hosts']} hosts "
                     f"(workers {workers}; politeness.ip_concurrency, ip_min_delay)")
    if hosts.get("front") or hosts.get("unseen"):
        lines.append(f"not counted: {hosts.get('front', 0)} URLs in the front queues (no host "
                     f"yet), {hosts.get('unseen', 0)} parked hosts beyond the first "
                     f"{PARKED_SCAN} of each worker")
    return "\n".join(lines)
