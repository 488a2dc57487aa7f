"""Refusals: the URLs a crawl refused, counted by reason and host, and which of them to log.

A URL is refused at admission by the frontier (``max_urls_per_host``,
``max_depth``, a blocked host, and the caps of its registered domain,
``max_hosts_per_domain`` and ``max_pages_per_domain``, counted under the domain
rather than the host: hive.frontier.domains) or, as a link, by scope and its trap guards in
the worker (``scope_domain``, ``path_depth``, ``segment_repeat`` …). Nothing is
refused in silence: each refusal is counted here under its reason and the
host of the refused URL, and the crawl log gets a line for each one up to
``log_per_host`` per reason and host; the line that reaches that bound says
that later ones are only counted. The worker's stats carry the totals by
reason and the hosts with the most refusals (``refusals/<reason>`` and
``refusals/<reason>/<host>``), which ``hive status`` and the end-of-batch line
summarize with :func:`describe`.

Bounded: at most ``MAX_PAIRS`` (reason, host) pairs are counted by host (a
crawl of the open web meets millions of out-of-scope hosts); the refusals of
pairs beyond are counted by reason only, and logged up to the same bound per
reason. The frontier persists the tally in its store's meta (``refusals``); a
damaged one is a lost report, not a lost crawl: the tally starts again, and
``frontier/refusals_damaged`` says so.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping

MAX_PAIRS = 1024
# Hosts named per reason in the stats, and in a summary line (which names a few reasons).
STATS_HOSTS = 5
SUMMARY_HOSTS = 3
SUMMARY_REASONS = 4
PREFIX = "refusals/"


class Refusals:
    """The tally of one worker's refusals (see the module docstring)."""

    def __init__(self, log_per_host: int) -> None:
        self.log_per_host = log_per_host
        self.totals: dict[str, int] = {}
        self.by_host: dict[tuple[str, str], int] = {}
        self.others: dict[str, int] = {}
        self.changed = False
        self.damaged = False

    def note(self, reason: str, host: str) -> str | None:
        """Count one refusal: None if it is not to be logged, else its crawl-log message
        (empty but for the line that reaches the bound, which says so)."""
        n, where = self._add(reason, host, 1)
        if n < self.log_per_host:
            return ""
        if n == self.log_per_host:
            return f"{reason}: {n} refusals {where} logged; later ones are only counted"
        return None

    def count(self, reason: str, host: str, n: int) -> None:
        """Count ``n`` refusals that a line of their own in the crawl log already tells of
        (a sitemap index's children past the cap: its line says how many)."""
        self._add(reason, host, n)

    def _add(self, reason: str, host: str, n: int) -> tuple[int, str]:
        """Count n refusals; (the pair's count now, where it was counted)."""
        self.changed = True
        self.totals[reason] = self.totals.get(reason, 0) + n
        pair = (reason, host)
        held = self.by_host.get(pair)
        if held is not None or len(self.by_host) < MAX_PAIRS:
            total = self.by_host[pair] = (held or 0) + n
            return total, f"on {host}"
        total = self.others[reason] = self.others.get(reason, 0) + n
        return total, f"on hosts beyond the {MAX_PAIRS} counted by host"

    def stats(self) -> dict[str, int]:
        """``refusals/<reason>``: total; ``refusals/<reason>/<host>``: the top hosts' counts."""
        out = {f"{PREFIX}{reason}": n for reason, n in self.totals.items()}
        if self.damaged:
            out["frontier/refusals_damaged"] = 1
        by_reason: dict[str, list[tuple[int, str]]] = {}
        for (reason, host), n in self.by_host.items():
            by_reason.setdefault(reason, []).append((n, host))
        for reason, hosts in by_reason.items():
            for n, host in heapq.nlargest(STATS_HOSTS, hosts):
                out[f"{PREFIX}{reason}/{host}"] = n
        return out

    def encode(self) -> bytes:
        pairs = [[reason, host, n] for (reason, host), n in self.by_host.items()]
        return json.dumps({"totals": self.totals, "pairs": pairs, "others": self.others}).encode()

    @classmethod
    def decode(cls, data: bytes | None, log_per_host: int) -> Refusals:
        """The tally saved by :meth:`encode` (an empty one for None or a damaged one)."""
        refusals = cls(log_per_host)
        if not data:
            return refusals
        try:
            state = json.loads(data)
            totals = {str(k): int(v) for k, v in state["totals"].items()}
            pairs = {(str(r), str(h)): int(n) for r, h, n in state["pairs"][:MAX_PAIRS]}
            others = {str(k): int(v) for k, v in state["others"].items()}
        except (ValueError, TypeError, KeyError, AttributeError):
            refusals.damaged = True
            return refusals
        refusals.totals, refusals.by_host, refusals.others = totals, pairs, others
        return refusals


def merge(stats: Iterable[Mapping[str, object]]) -> dict[str, tuple[int, dict[str, int]]]:
    """Several workers' ``refusals/`` stats as reason → (total, {host: count})."""
    out: dict[str, tuple[int, dict[str, int]]] = {}
    for values in stats:
        for key, value in values.items():
            if not key.startswith(PREFIX) or not isinstance(value, int):
                continue
            reason, _, host = key[len(PREFIX):].partition("/")
            total, hosts = out.get(reason, (0, {}))
            if host:
                hosts[host] = hosts.get(host, 0) + value
                out[reason] = (total, hosts)
            else:
                out[reason] = (total + value, hosts)
    return out


def describe(stats: Iterable[Mapping[str, object]]) -> str:
    """One line: ``870 refused: max_urls_per_host 870 (pg.test 870), …``; empty if none."""
    merged = merge(stats)
    total = sum(n for n, _ in merged.values())
    if not total:
        return ""
    parts = []
    ranked = sorted(merged.items(), key=lambda item: (-item[1][0], item[0]))
    for reason, (n, hosts) in ranked[:SUMMARY_REASONS]:
        top = heapq.nlargest(SUMMARY_HOSTS, hosts.items(), key=lambda item: (item[1], item[0]))
        named = ", ".join(f"{host} {count:,}" for host, count in top)
        more = ", …" if sum(count for _, count in top) < n else ""
        parts.append(f"{reason} {n:,} ({named}{more})" if named else f"{reason} {n:,}")
    if len(ranked) > SUMMARY_REASONS:
        parts.append(f"{len(ranked) - SUMMARY_REASONS} more reasons in the stats")
    return f"{total:,} refused: " + ", ".join(parts)
