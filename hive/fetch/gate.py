"""The frontier gate: the fetch room's part that runs on the worker's frontier thread.

A worker has one frontier thread and T fetch threads (hive.procs.worker). The
fetch room's work falls on both sides of that boundary, and its names say which:
``FrontierGate`` here runs on the frontier thread only, before a lease goes out
(``screen``, ``stale_rules``) and after its ``Fetched`` comes back (``keep``);
``Pipeline`` (hive.fetch.pipeline) runs a lease on a fetch thread (``run``).

**robots.txt has one owner, the gate's rules cache** (hive.fetch.robots_cache),
read and written here only, on the thread that owns the store behind it. The
frontier leases an origin's robots.txt before its pages when its host state says
the rules expired (``robots_until``), which only schedules the fetch; whether a
page may be fetched is decided by the rules in the cache alone (``screen``). A
page whose origin has no usable rules there (an entry lost or unreadable in the
store, one of a format this version does not read) is never fetched: the worker
gives it back and its origin's robots.txt is fetched first. The rules a fetch
thread settles reach the cache through ``keep``.

A page a sitemap listed outside the sitemaps.org location rule (``listed``,
hive.fetch.sitemap_policy) is decided here too, when its origin's robots.txt is
known: fetched if that robots.txt names the sitemap (cross-submission), else it
ends ``refused`` with the rule's reason, unfetched.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from hive.config import Config
from hive.core.lease import Lease, LeaseKind
from hive.core.record import LISTED
from hive.fetch.fetched import Fetched, Screened, Verdict
from hive.fetch.robots_cache import RobotsCache
from hive.fetch.robots_rules import RobotsRules, product_token
from hive.fetch.sinks import Sinks
from hive.fetch.sitemap_policy import scope_refusal
from hive.outcome import Kind


class FrontierGate:
    """The frontier thread's side of the fetch room (see the module docstring).

    ``load``/``store`` back the robots.txt rules cache (the worker's LMDB store);
    ``sinks``: the worker's outputs (hive.fetch.sinks), whose state the fetch threads
    left for the store ``keep`` has them persist.
    """

    def __init__(
        self,
        cfg: Config,
        *,
        load: Callable[[str], bytes | None],
        store: Callable[[str, bytes], None],
        sinks: Sinks,
    ) -> None:
        self.obey_robots = cfg.robots.enabled
        self.robots = RobotsCache(
            max(1, int(cfg.robots.cache_mb * (1 << 20))), product_token(cfg.fetch.user_agent),
            load=load, store=store,
        )
        self.sinks = sinks
        self.counts: Counter[str] = Counter()

    def screen(self, lease: Lease, now: float) -> Screened:
        """Whether a lease may be fetched, by its origin's rules in the cache.

        A page its origin's rules disallow ends as ``robots``, one whose origin is
        unreachable as ``robots_unreachable`` (a check over its budget refuses
        too); a page whose origin has no rules in the cache is ``lost``: the
        worker gives it back behind a new fetch of its origin's robots.txt. A page
        ``listed`` by a sitemap outside the location rule is refused unless its
        origin's robots.txt names that sitemap (with robots.txt off, nothing vouches).
        """
        if lease.kind != LeaseKind.PAGE:
            return Verdict.FETCH
        record = lease.record
        if not self.obey_robots:
            return (record.kind == LISTED and self._vouched(lease, (), now)) or Verdict.FETCH
        rules = self.robots.get(record.url, now)
        if rules is None:
            return Verdict.LOST
        if record.kind == LISTED and (refused := self._vouched(lease, rules.sitemaps, now)):
            return refused
        verdict = rules.check(record.url)
        if verdict:
            return Verdict.FETCH
        if verdict is None:
            self.counts["robots/over_budget"] += 1
        refusal = Kind.ROBOTS_UNREACHABLE if rules.kind == "unreachable" else Kind.ROBOTS
        return Fetched(refusal, contacted=False, lease=lease, started=now, finished=now)

    def _vouched(self, lease: Lease, named: tuple[str, ...], now: float) -> Fetched | None:
        """None if the sitemap that listed the lease may list it, else its refusal."""
        record = lease.record
        reason = scope_refusal(record.url, record.via, named)
        if reason is None:
            return None
        return Fetched(
            Kind.REFUSED, contacted=False, lease=lease, started=now, finished=now, reason=reason,
            message="listed by a sitemap its robots.txt does not name",
        )

    def stale_rules(self, lease: Lease, now: float) -> RobotsRules | None:
        """For a robots.txt lease: its origin's expired rules, which stand in if the
        refetch fails (RFC 9309 section 2.4)."""
        robots = lease.kind is LeaseKind.ROBOTS
        return self.robots.stale(lease.record.url, now) if robots else None

    def keep(self, fetched: Fetched) -> None:
        """Keep the robots.txt rules a fetch settled, in the cache and its store, and have
        the sinks persist what the fetch threads left them (the WARC sink: the payloads
        archived meanwhile, into the payload index's store)."""
        if fetched.rules is not None:
            self.robots.put(fetched.lease.record.url, fetched.rules)
        self.sinks.persist()

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = dict(self.robots.stats())
        out.update(self.counts)
        return out
