"""The Frontier: Mercator's two-stage URL frontier over one LMDB store.

``admit(records, now)`` → seen set → prioritizer → front FIFO of a level;
``pop_ready(now)`` → refill the back end from the front (biased chooser) →
the best ready host's head URL, leased; ``done(lease, outcome, started,
finished)`` → the delay policy, the URL's final state, the host back into the
waiting heap (or released when its queue is empty, or parked when its next time
is beyond the horizon).

The caller owns the clock (``now`` everywhere) and the transaction rhythm: it
calls ``commit(now)`` once per loop turn, and must commit after ``pop_ready``
and before it starts the fetch, so that a crash can never make a host whose
fetch was in flight look uncontacted. On open, such hosts wait their full delay
from the restart and their URLs are pending again.

Retry policy: an outcome whose kind is in ``frontier.retry_outcomes`` is
retried, with ``attempts + 1``, until ``max_retries``; every other outcome is
final. A URL's own failure (a 500) sends it to wait out its back-off on disk
(``retries``, hive/frontier/retries.py) while its host goes on with its
other URLs at its ordinary delay; when due it takes its old place in its host's
queue again. After a host failure (``politeness.host_failure_outcomes``: 429,
503, connect, timeout) the host waits anyway, so the URL waits at the head of
its queue and the host the longer of the two back-offs.
``handoff_failed`` (a page whose links could not be handed on) is always
retryable. The host's own back-off grows only with its consecutive host
failures, the outcomes that speak of the server (hive/core/politeness.py says
which and why). Robots leases (kind
``robots``, for the origin of the host's head URL: robots.txt is per scheme)
take the outcomes ``robots_ok``, ``robots_stale``, ``robots_retry`` and
``robots_unreachable`` (see ``_robots_done``); any other (``refused_address``)
blocks the host, whose URLs then end with that outcome.

A "host" here is a politeness key (hive.core.keys; today the host key): the
back queues, the heap, the leases and the host records are keyed by its hash
(``hh``), and a record's politeness key is taken from its host key where the
record enters (``admit``) and where it leaves the front (``_draw``).

Sitemaps (records of kind ``sitemap``) are leased like pages, under their host's
politeness and robots.txt; each host admits at most ``max_sitemaps`` of them
over the crawl (``sitemaps.max_files_per_host``; past it they are refused as
``max_sitemaps_per_host``, counted and not recorded, as ``max_urls_per_host``
refusals are: see ``_refuse``), and they count against neither ``max_depth`` (their
depth is their index level, bounded by the pipeline) nor ``max_urls_per_host``.
A lease refused before its fetch (``refused``: a page listed by a sitemap its
origin does not vouch for) leaves the seen set, so a link may still bring it in.

A URL found again by a stronger discovery (a link to a page so listed, a feed or
sitemap record for a URL queued as a page, a seed for a URL queued as a deep
link) gets a new live entry, and the one queued before is dropped when it comes
up; one refused at admission for how it was found (too deep) is admitted when a
discovery passes (hive.frontier.seen). So each lease first checks that its
record is still its URL's live entry.

**Evidence** (hive.frontier.evidence): a link to a URL already pending adds its linking
host and score to the URL's state; when that raises its level, ``_move`` deletes its
entry where its state places it (its host's back queue, else the front) and puts it at
the new level under a new seq, the state naming the new place, in the same transaction:
one URL, one live entry, found without a scan. A leased entry, or one waiting out a
retry, stays where it is (its evidence is kept; the next link moves it).

Why one module: this is the façade, Mercator's three verbs and the rules that need
more than one part at once. A URL's state in the seen set, its entry in a queue, its
host's record, the heap and the lease move together, in one transaction, or the
invariants ``hive verify`` checks break; each part that holds state of its own is a
module of its own (``seen``, ``front``, ``back``, ``heap``, ``hosts``, ``retries``,
``priority``, ``refusals``). What stays here is that choreography: split, each piece
would have to know every part again.
"""

from __future__ import annotations

import functools
import logging
import random
import struct
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from hive.config import Config, FrontierConfig, PriorityConfig
from hive.core.keys import politeness_key, registered_domain
from hive.core.lease import Lease, LeaseKind
from hive.core.politeness import Politeness
from hive.core.record import LISTED, SITEMAP, UrlRecord
from hive.core.urls import SessionIds, fingerprint, host_hash
from hive.frontier import domains
from hive.frontier.back import BackQueues
from hive.frontier.evidence import LevelRule, linker_bit
from hive.frontier.front import FrontQueues
from hive.frontier.heap import ReadyHeap
from hive.frontier.hosts import HostState
from hive.frontier.priority import Prioritizer, load_prioritizer
from hive.frontier.refusals import Refusals
from hive.frontier.retries import Retries
from hive.frontier.seen import SeenSet, stronger
from hive.outcome import Kind, Outcome, parse_kinds
from hive.storage.schema import (
    HOST_LEVEL_SEQ,
    LEVEL_SEQ,
    META_REFUSALS,
    REFUSED,
    U64,
    URL_KEY,
    MetaState,
    Pending,
    damaged_key,
    evidence_of,
    pending,
    pending_entry,
    url_key,
)
from hive.storage.store import Store
from hive.storage.store import store_errors as _store_errors

log = logging.getLogger(__name__)

# Refusals counted, never recorded (``_refuse``).
CAPS = frozenset({"max_urls_per_host", "max_sitemaps_per_host"}) | domains.REASONS
# What decoding a damaged record raises: it is set aside, never retried every turn.
DAMAGED = (ValueError, struct.error)
# A page whose links could not be handed on: always retried, never done with its links lost.
HANDOFF_FAILED = Kind.HANDOFF_FAILED
EVICTION_SAMPLE = 16
# The refusals tally is saved with a commit at most this often (and at close): it is a
# report, and a crash costs it at most this much of its counts.
REFUSALS_SAVE_INTERVAL = 1.0
# A host's consecutive failures are counted up to here: its back-off reached its cap long
# before, and the stored count (a u32) stays bounded.
MAX_FAILURES = 64
BASE_COUNTERS = (
    "frontier/admitted", "frontier/duplicates", "frontier/retried", "frontier/evicted",
    "frontier/parked", "frontier/recovered_leases",
)



def _hold(host: HostState, kind: str) -> None:
    """Count a URL newly admitted to its host by what it is: a sitemap, a listing of a
    foreign sitemap not yet vouched for, or one of the host's own pages."""
    if kind == SITEMAP:
        host.sitemaps += 1
    elif kind == LISTED:
        host.listed += 1
    else:
        host.admitted += 1


class Ready(NamedTuple):
    """``pop_ready``'s answer: a lease, or none and when to ask again (None: no work)."""

    lease: Lease | None
    wake_at: float | None


class Frontier:
    def __init__(
        self,
        path: Path,
        cfg: FrontierConfig,
        politeness: Politeness,
        *,
        threads: int,
        robots: bool = True,
        crawl_delay_skip: bool = False,
        session_ids: Sequence[str] = (),
        max_sitemaps: int = 0,
        rng: random.Random | None = None,
        now: float = 0.0,
        politeness_key: Callable[[str], str] = politeness_key,
        max_hosts_per_domain: int = 0,
        max_pages_per_domain: int = 0,
        priority: PriorityConfig | None = None,
    ) -> None:
        self.cfg = cfg
        self.domain_caps = domains.Caps(max_hosts_per_domain, max_pages_per_domain)
        # How links move a queued URL (hive.frontier.evidence); none: never after admission.
        self.rule = LevelRule(priority or PriorityConfig(0.0, "", 1.0, 0.0), cfg.levels)
        # A record's politeness key (hive.core.keys): what its "host" here is, the unit of
        # the back queues, the heap, the leases and the host records, all keyed by its hash.
        self.politeness_key = politeness_key
        self.max_sitemaps = max_sitemaps
        # The seen set's fingerprint of a URL leaves its session ids out (hive.core.urls).
        self.fingerprint = functools.partial(fingerprint, session_ids=SessionIds(session_ids))
        self.politeness = politeness
        self.threads = threads
        self.robots = robots
        self.crawl_delay_skip = crawl_delay_skip
        self.rng = rng or random.Random()
        self.prioritize: Prioritizer = load_prioritizer(cfg.prioritizer)
        self.retryable = parse_kinds("frontier.retry_outcomes", cfg.retry_outcomes) | {
            HANDOFF_FAILED}
        self.store = Store(
            path, map_size_mb=cfg.map_size_mb, txn_max_ops=cfg.txn_max_ops,
            sync_interval=cfg.sync_interval,
        )
        self.seen = SeenSet(self.store)
        self.front = FrontQueues(self.store, cfg.levels, cfg.level_ratio, self.rng)
        self.back = BackQueues(self.store)
        self.retries = Retries(self.store)
        self.heap = ReadyHeap(cfg.aging)
        self._leases_db = self.store.db["leases"]
        self._done_counter: dict[str, str] = {}
        self.newly_bound: list[str] = []
        self.ended: list[tuple[UrlRecord, str]] = []
        # URLs refused at admission that the caller is to log: (record, reason, message).
        self.refused: list[tuple[UrlRecord, str, str]] = []
        self.leased: dict[int, Lease] = {}
        self._dirty: set[int] = set()
        # Fetches per registered domain since the last commit, added to the domain rows with
        # it (one write a domain a commit, not one a fetch), as the bound hosts' records are.
        self._fetched: dict[str, int] = {}
        self._download_ema = 0.05
        # Leased hosts held back outside the frontier (waiting for a start slot at their IP
        # address, hive/procs/addresses.py): set by the worker, added to the target so that
        # many hosts of one shared server cannot take every slot from the other servers.
        self.held_back = 0
        self._target = self._compute_target()
        state = MetaState.load(self.store)
        self._seq: int = state.seq
        self.counts: dict[str, int] = dict.fromkeys(BASE_COUNTERS, 0)
        self.counts.update(state.counts)
        self.back.queued = state.back_queued
        self._meta_extra = state.extra
        self.refusals = Refusals.decode(
            self.store.get("meta", META_REFUSALS), cfg.refusals_logged_per_host
        )
        self._refusals_saved = now
        self._recover(now)
        self._domain_rows(now)

    @classmethod
    def from_config(
        cls, path: Path, cfg: Config, *, rng: random.Random | None = None, now: float = 0.0
    ) -> Frontier:
        return cls(
            path, cfg.frontier, Politeness.from_config(cfg.politeness),
            threads=cfg.fetch.threads, robots=cfg.robots.enabled,
            crawl_delay_skip=cfg.politeness.crawl_delay_over_cap == "skip",
            session_ids=cfg.scope.session_ids,
            max_sitemaps=cfg.sitemaps.max_files_per_host, rng=rng, now=now,
            max_hosts_per_domain=cfg.scope.max_hosts_per_domain,
            max_pages_per_domain=cfg.scope.max_pages_per_domain,
            priority=cfg.priority,
        )

    def _count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    @_store_errors
    def _recover(self, now: float) -> None:
        """After any stop: leased hosts wait a full delay from now; bound hosts become parked."""
        cursor = self.store.cursor("leases")
        leased = [bytes(k) for k in cursor.iternext(values=False)]
        for raw in leased:
            hh = U64.unpack(raw)[0]
            host = self.back.host(hh)
            if host is not None:
                wait = max(host.delay, self.politeness.min_delay)
                host.next_allowed = max(host.next_allowed, now + wait)
                self.back.save(hh, host)
            self.store.delete("leases", raw)
            self._count("frontier/recovered_leases")
        cursor = self.store.cursor("bound")
        for raw in [bytes(k) for k in cursor.iternext(values=False)]:
            hh = U64.unpack(raw)[0]
            self.store.delete("bound", raw)
            host = self.back.host(hh)
            if host is not None and host.queued > 0:
                self.back.park(hh, host)
                self.back.save(hh, host)
        self.commit(now)

    @_store_errors
    def _domain_rows(self, now: float) -> None:
        """A store made before the ``domains`` rows gets them from its host records."""
        made = domains.ensure(self.store, lambda: (
            HostState.decode(bytes(value))
            for value in self.store.cursor("hosts").iternext(keys=False)))
        if made is not None:
            self.commit(now)
            if made:
                log.info("domain rows made from %d host records", made)

    # -- admission ---------------------------------------------------------------

    @_store_errors
    def admit(self, records: Iterable[UrlRecord], now: float) -> int:
        """Admit new URLs (duplicates and refusals are counted); returns how many were new.

        A URL seen before that is still pending takes the link as evidence
        (hive.frontier.evidence): its linking hosts and best linking score in its
        state, and a move to its new level if they raise it (``_evidence``)."""
        if self.store.due:
            self.commit(now)
        groups: dict[str, list[UrlRecord]] = {}
        unit_of = self.politeness_key
        for record in records:
            groups.setdefault(unit_of(record.host_key), []).append(record)
        max_depth, budget, levels = self.cfg.max_depth, self.cfg.max_urls_per_host, self.cfg.levels
        state_of, place, prioritize = self.seen.state, self.seen.place, self.prioritize
        rule = self.rule
        evidence, inlinks = rule.enabled, rule.inlinks
        url_hash = self.fingerprint
        queued: list[tuple[int, int, bytes]] = []
        admitted = 0
        caps, store = self.domain_caps, self.store
        via, bit = "", 0  # a page's links come together: its host's bit once for them
        for hk, group in groups.items():
            hh = host_hash(hk)
            known = self.back.host(hh)
            host = known or HostState(hk)
            before = host.admitted, host.sitemaps, host.listed, host.stale
            domain = registered_domain(hk)
            row = domains.read(store, domain)
            if known is None and caps.host_refused(row):
                for record in group:
                    self._refuse(URL_KEY.pack(hh, url_hash(record.url)), host, record,
                                 domains.MAX_HOSTS, domain)
                continue
            pages = row.pages
            for record in group:
                key = URL_KEY.pack(hh, url_hash(record.url))
                kind = record.kind
                if kind == SITEMAP:
                    if host.blocked or host.sitemaps >= self.max_sitemaps:
                        self._refuse(key, host, record)
                        continue
                elif host.blocked or record.depth > max_depth or (budget and (
                        host.admitted >= budget
                        or (kind == LISTED and host.admitted + host.listed >= budget))):
                    self._refuse(key, host, record)
                    continue
                elif caps.page_refused(pages + host.admitted + host.listed - before[0]
                                       - before[2]):
                    self._refuse(key, host, record, domains.MAX_PAGES, domain)
                    continue
                state = state_of(key)
                if inlinks and record.via != via:
                    via, bit = record.via, linker_bit(record.via)
                linkers = bit
                score = record.score
                if state is None:
                    _hold(host, kind)
                else:
                    upgrade = self._found_again(state, record, host)
                    if upgrade is None:
                        if evidence:
                            self._evidence(key, hh, host, state, linkers, score)
                        continue
                    if upgrade:
                        admitted -= 1  # the URL was admitted before: only its entry is new
                    kept = pending(state)
                    if kept is not None:  # a stronger discovery keeps the evidence so far
                        linkers |= kept.linkers
                        score = max(score, kept.score)
                base = int(prioritize(record, host))
                if not 1 <= base <= levels:
                    base = 1 if base < 1 else levels
                level = rule.level(base, linkers, score) if evidence else base
                self._seq += 1
                seq = self._seq
                place(key, Pending(kind, record.depth, level, seq, base, linkers, score))
                queued.append((level, seq, record.encode()))
            if (host.admitted, host.sitemaps, host.listed, host.stale) != before:
                self._touch(hh, host)
                domains.add(store, domain, known is None,
                            host.admitted + host.listed - before[0] - before[2])
        self.front.extend(queued)
        admitted += len(queued)
        self._count("frontier/admitted", admitted)
        return admitted

    def _found_again(self, state: bytes, record: UrlRecord, host: HostState) -> bool | None:
        """A URL admitted or refused before (in ``state``), found again by ``record``
        (which passed admission): None if it stays as it is (a duplicate), True if
        ``record`` is to be the live entry of its pending URL (an upgrade,
        hive.frontier.seen), False if it overturns the URL's refusal (a new admission).
        The host's counts follow; the caller places the new entry."""
        kind = record.kind
        if state[:1] == REFUSED:
            self._count(f"frontier/refused/{state[1:].decode('utf-8', 'replace')}", -1)
            self._count("frontier/overturned")
            _hold(host, kind)
            return False
        if not stronger(record, state):
            self._count("frontier/duplicates")
            return None
        self._count("frontier/upgraded")
        host.stale += 1  # the entry queued before now goes unfetched when it comes up
        entry = pending_entry(state)
        if entry is not None and entry[0] == LISTED:  # now the host's own, not a listing
            host.listed -= 1
            host.admitted += kind != SITEMAP
        if kind == SITEMAP:
            host.sitemaps += 1
        return True

    def _evidence(
        self, key: bytes, hh: int, host: HostState, state: bytes, linkers: int, score: int
    ) -> None:
        """A link to a pending URL (``state``) adds its linking host and score to the URL's
        evidence; if that raises its level, the URL moves there (``_move``). A URL whose
        state names no place (written by an earlier hive) or that is done takes none."""
        known = evidence_of(state)
        if known is None or (linkers | known[0] == known[0] and score <= known[1]):
            return  # no place named (done, refused, an earlier hive's state), or nothing new
        entry = pending(state)
        if entry is None:
            return
        linkers |= entry.linkers
        score = max(score, entry.score)
        self._count("priority/evidence")
        level, seq = entry.level, entry.seq
        rises = self.rule.level(entry.base, linkers, score)
        if rises < level:
            moved = self._move(key, hh, host, level, seq, rises)
            if moved:
                level, seq = rises, moved
        self.seen.place(key, entry._replace(level=level, seq=seq, linkers=linkers, score=score))

    def _move(self, key: bytes, hh: int, host: HostState, level: int, seq: int,
              to: int) -> int:
        """Move the queue entry of the URL ``key`` from ``level`` and ``seq`` to level ``to``
        under a new seq, returned (0: not moved). Its entry is found where its state says
        and nowhere else: its host's back queue (by the back key), else the front (by the
        front key, the record checked to be this URL's: after a resize the front may hold
        another URL at that level and seq); a leased entry (in flight) or one waiting out a
        retry stays where it is, its evidence kept for the next link."""
        back_key = HOST_LEVEL_SEQ.pack(hh, level, seq)
        lease = self.leased.get(hh)
        if lease is not None and lease.key == back_key:
            return 0
        store = self.store
        data = store.get("back", back_key)
        if data is not None:
            self._seq += 1
            moved = self.back.move(back_key, host, to, self._seq, data)
            if hh in self.back.bound:
                self._dirty.add(hh)
                if host.head is not None and host.head[0] == moved:  # a ready host ranks by it
                    self.heap.improve(hh, to)
            self._count("priority/moved/back")
            return self._seq
        front_key = LEVEL_SEQ.pack(level, seq)
        data = store.get("front", front_key)
        if data is None or not self._holds(data, key):
            return 0
        self._seq += 1
        self.front.move(front_key, to, self._seq, data)
        self._count("priority/moved/front")
        return self._seq

    def _holds(self, data: bytes, key: bytes) -> bool:
        """Whether the queued record ``data`` is of the URL whose seen-set key is ``key``."""
        try:
            url = UrlRecord.decode(data).url
        except DAMAGED:
            return False
        return U64.pack(self.fingerprint(url)) == key[8:]

    def _refuse(self, key: bytes, host: HostState, record: UrlRecord, cap: str = "",
                domain: str = "") -> None:
        """Count a URL refused at admission (blocked host, too deep, over the host's cap,
        over its domain's ``cap``: counted under the ``domain``); the reason is the block
        or the config key that refused it.

        A refusal for a cap the host has reached (``max_urls_per_host``,
        ``max_sitemaps_per_host``) is counted (``frontier/capped/<reason>``), not
        recorded: the cap never lifts, so a record would only spare a second count, at
        one store entry per URL past it, which a sitemap index (50,000 children, each
        listing 50,000) or a trap's links would make without end. The others are
        recorded as refused (``frontier/refused/<reason>``)."""
        if cap:
            reason = cap
        elif host.blocked:
            reason = host.blocked
        elif record.kind == SITEMAP:
            reason = "max_sitemaps_per_host"
        elif record.depth > self.cfg.max_depth:
            reason = "max_depth"
        else:
            reason = "max_urls_per_host"
        if reason in CAPS:
            if self.seen.state(key) is not None:
                self._count("frontier/duplicates")
                return
            self._count(f"frontier/capped/{reason}")
        elif not self.seen.refuse(key, reason):
            self._count("frontier/duplicates")
            return
        else:
            self._count(f"frontier/refused/{reason}")
        message = self.refusals.note(reason, domain or host.host_key)
        if message is not None:
            self.refused.append((record, reason, message))

    def _touch(self, hh: int, host: HostState) -> None:
        """Persist a host's state: bound hosts at the next commit, others now."""
        if hh in self.back.bound:
            self._dirty.add(hh)
        else:
            self.back.save(hh, host)

    # -- the back end ------------------------------------------------------------

    def target_bound(self) -> int:
        """b: enough bound hosts to keep every fetch thread busy, within the configured bounds."""
        return self._target

    def _compute_target(self) -> int:
        needed = self.politeness.bound_hosts(
            self.threads, self._download_ema, self.cfg.min_bound_hosts, self.cfg.max_bound_hosts
        )
        return min(needed + self.held_back, self.cfg.max_bound_hosts)

    def _bind(
        self, hh: int, host: HostState, now: float, head: tuple[bytes, bytes] | None = None
    ) -> None:
        self.back.bind(hh, host, head)
        self.heap.schedule(hh, host.next_allowed, now)
        self.newly_bound.append(host.host_key)
        self._dirty.add(hh)

    def _release(self, hh: int, host: HostState, park: bool) -> None:
        self.heap.discard(hh)
        self._dirty.discard(hh)
        if park:
            self.back.park(hh, host)
        else:
            self.back.unbind(hh)
        self.back.save(hh, host)

    def _refill(self, now: float) -> None:
        target = self._target
        back = self.back
        while len(back.bound) < target:
            first = back.first_parked()
            if first is None or first[0] > now + self.cfg.park_horizon:
                break
            host = back.host(first[1])
            if host is None:
                raise AssertionError(f"parked host {first[1]:x} has no state")
            self._bind(first[1], host, now)
        for _ in range(min(self.cfg.draw_batch, len(self.front))):
            if len(back.bound) >= target:
                break
            self._draw(now, evict=False)

    def _draw(self, now: float, evict: bool) -> tuple[str, HostState | None]:
        """Move one URL from the front to its host's back queue.

        Returns where it went — ``joined`` a bound host, ``bound`` its host
        (the host is returned), ``parked`` on disk, ``refused`` (blocked host),
        or ``empty`` — so that callers can stop drawing at the right moment.
        """
        drawn = self.front.pop()
        if drawn is None:
            return "empty", None
        level, seq, data = drawn
        try:
            hk = self.politeness_key(UrlRecord.host_key_of(data))
        except DAMAGED as exc:
            self._set_aside("front", bytes([level]), data, exc)
            return "refused", None
        # The entry keeps its seq: its URL's state names its place by level and seq.
        return self._place(host_hash(hk), hk, level, seq, data, now, evict)

    def _place(
        self, hh: int, hk: str, level: int, seq: int, data: bytes, now: float, evict: bool
    ) -> tuple[str, HostState | None]:
        """Queue a record under ``hh|level|seq`` in its host's back queue: ``_draw``'s answer."""
        back = self.back
        host = back.bound.get(hh)
        if host is not None:
            back.append(hh, host, level, seq, data)
            self._dirty.add(hh)
            return "joined", host
        known = back.host(hh)
        if known is None:  # a queued URL of a host with no record: one now
            domains.add(self.store, registered_domain(hk), hosts=1)
        host = known or HostState(hk)
        if host.blocked:
            self._end_unfetched(hh, host, UrlRecord.decode(data), host.blocked, level, seq)
            return "refused", None
        key = back.append(hh, host, level, seq, data)
        if len(back.bound) < self._target or (evict and self._evict_for(host, now)):
            # A host with nothing else queued has this URL for its head: no need to read it.
            self._bind(hh, host, now, (key, data) if host.queued == 1 else None)
            return "bound", host
        back.park(hh, host)
        back.save(hh, host)
        return "parked", host

    def _set_aside(self, db: str, key: bytes, data: bytes, exc: Exception) -> None:
        """Move a queued record that does not decode (a damaged disk) to ``damaged``, with
        where it was and why: counted and logged, listed by ``hive verify``, and never
        again in its host's way. Its URL cannot be named, so its state stays pending."""
        why = f"{type(exc).__name__}: {exc}"
        self.store.put("damaged", damaged_key(db, key), why.encode() + b"\0" + data)
        self._count("frontier/damaged")
        log.error("frontier: a %s record (key %s) does not decode and was set aside: %s",
                  db, key.hex(), why)

    def _evict_for(self, newcomer: HostState, now: float) -> bool:
        """Park a bound host so that ``newcomer`` can be served sooner.

        The victim is drawn from a random sample of bound hosts (not in flight)
        by the longest wait per queued URL: a host with many URLs and a near
        time goes last, and evicting simply the longest queue — the host with
        the most work — is avoided. No eviction unless it brings a fetch forward.
        """
        best, best_score, best_wait = -1, -1.0, 0.0
        for hh in self.back.sample(EVICTION_SAMPLE, self.rng):
            if hh not in self.heap:
                continue
            host = self.back.bound[hh]
            wait = host.next_allowed - now
            score = wait / (1 + host.queued)
            if score > best_score:
                best, best_score, best_wait = hh, score, wait
        if best < 0 or best_wait <= max(newcomer.next_allowed - now, 0.0):
            return False
        self._release(best, self.back.bound[best], park=True)
        self._count("frontier/evicted")
        return True

    def _finish(self, key: bytes, outcome: str) -> None:
        self.seen.finish(key, outcome)
        name = self._done_counter.get(outcome)
        if name is None:
            name = self._done_counter[outcome] = f"frontier/done/{outcome}"
        self.counts[name] = self.counts.get(name, 0) + 1

    def _drain(self, hh: int, host: HostState) -> None:
        """End every queued URL of a blocked host with its block reason, then release it."""
        while (head := host.head) is not None:
            key, data = head
            self.back.remove(key, host)
            _, level, seq = HOST_LEVEL_SEQ.unpack(key)
            self._end_unfetched(hh, host, UrlRecord.decode(data), host.blocked, level, seq)
        self._release(hh, host, park=False)

    def _end_unfetched(self, hh: int, host: HostState, record: UrlRecord, outcome: str,
                       level: int, seq: int) -> None:
        """A queued URL (at ``level`` and ``seq``) ends without a fetch (its host is
        blocked); the caller logs ``ended``. A superseded entry just goes (its URL ends
        with its live entry, or has ended)."""
        key = url_key(hh, self.fingerprint(record.url))
        if not self.seen.live(key, record, level, seq):
            self._count("frontier/superseded")
            host.stale = max(host.stale - 1, 0)
            return
        if record.kind == LISTED:
            host.listed -= 1
            host.admitted += 1
            self._touch(hh, host)
        self._finish(key, outcome)
        self.ended.append((record, outcome))

    def _listed_ends(self, key: bytes, host: HostState, record: UrlRecord, back: bytes) -> bool:
        """A leased page listed by a sitemap of another origin ends (refused or fetched):
        True, and the host holds one listing less, if it was its URL's live entry (at the
        back key ``back``; else a stronger discovery took its place and the count went
        with it)."""
        _, level, seq = HOST_LEVEL_SEQ.unpack(back)
        if not self.seen.live(key, record, level, seq):
            return False
        host.listed -= 1
        return True

    def _head_level(self, hh: int) -> int:
        head = self.back.bound[hh].head
        return head[0][8] if head is not None else 1

    @_store_errors
    def pop_ready(self, now: float) -> Ready:
        """Lease the best ready host's head URL (or its robots.txt), or say when to ask again."""
        store, heap = self.store, self.heap
        if store.due:
            self.commit(now)
        if self.retries.count:
            self._requeue(now)
        if len(self.back.bound) < self._target:
            self._refill(now)
        heap.promote(now, self._head_level)
        while True:
            hh = heap.pop()
            if hh is None:
                if self._evict_and_bind(now):
                    heap.promote(now, self._head_level)
                    continue
                return Ready(None, self._wake_at(now))
            host = self.back.bound[hh]
            if host.blocked:
                self._drain(hh, host)
                continue
            head = host.head
            if head is None:
                self._release(hh, host, park=False)
                continue
            key, data = head
            try:
                record = UrlRecord.decode(data)
            except DAMAGED as exc:
                self._set_aside("back", key, data, exc)
                self.back.remove(key, host)
                self._dirty.add(hh)
                heap.schedule(hh, now, now)
                continue
            _, level, seq = HOST_LEVEL_SEQ.unpack(key)
            if not self.seen.live(url_key(hh, self.fingerprint(record.url)), record, level, seq):
                self.back.remove(key, host)
                self._count("frontier/superseded")
                host.stale = max(host.stale - 1, 0)
                self._dirty.add(hh)
                heap.schedule(hh, now, now)
                continue
            scheme = record.url.split(":", 1)[0]
            robots_until, robots_tries = host.robots_state(scheme)
            if self.robots and robots_until <= now:
                robots = UrlRecord(
                    f"{scheme}://{record.host_key}/robots.txt", record.host_key,
                    attempts=robots_tries,
                )
                lease = Lease(LeaseKind.ROBOTS, hh, robots, b"")
            else:
                lease = Lease(LeaseKind.PAGE, hh, record, key)
            store.txn.put(U64.pack(hh), lease.key, db=self._leases_db)
            store.ops += 1
            self.leased[hh] = lease
            return Ready(lease, None)

    def _requeue(self, now: float) -> None:
        """Put the URLs whose retry is due back in their hosts' queues, in their old places."""
        for key, data in self.retries.take_due(now, self.cfg.draw_batch):
            hh, level, seq = HOST_LEVEL_SEQ.unpack(key)
            host = self.back.host(hh)
            if host is None:
                self._set_aside("retries", key, data, ValueError("its host has no state"))
                continue
            self._place(hh, host.host_key, level, seq, data, now, evict=False)

    def _evict_and_bind(self, now: float) -> bool:
        """Nothing bound is ready: draw from the front, evicting for a host that comes sooner.

        Only hosts waiting in the heap can be evicted (never one in flight), so
        with none there is nothing to draw for. Drawing stops at the first URL
        of an unbound host, bound or parked: a failed eviction must not turn
        the front into parked queues (host-table thrash). True when the host
        bound is ready now.
        """
        if not len(self.heap):
            return False
        for _ in range(self.cfg.draw_batch):
            placed, host = self._draw(now, evict=True)
            if placed == "bound" and host is not None:
                return host.next_allowed <= now
            if placed in ("parked", "empty"):
                return False
        return False

    def _wake_at(self, now: float) -> float | None:
        times = []
        next_time = self.heap.next_time()
        if next_time is not None:
            times.append(next_time)
        retry = self.retries.first_due() if self.retries.count else None
        if retry is not None:
            times.append(retry)
        if len(self.back.bound) < self._target:
            if len(self.front):
                times.append(now)
            parked = self.back.first_parked()
            if parked is not None:
                times.append(max(parked[0] - self.cfg.park_horizon, now))
        return min(times) if times else None

    # -- outcomes ------------------------------------------------------------------

    @_store_errors
    def done(self, lease: Lease, outcome: Outcome, started: float, finished: float) -> None:
        """Apply a lease's outcome: the delay policy, the URL's state, the host's next turn."""
        store, back = self.store, self.back
        if store.due:
            self.commit(finished)
        hh = lease.host_hash
        if self.leased.pop(hh, None) is None:
            raise ValueError(f"done() for a lease that is not outstanding: {lease.record.url}")
        store.txn.delete(U64.pack(hh), db=self._leases_db)
        store.ops += 1
        host = back.bound[hh]
        kind = outcome.kind
        page = lease.kind is LeaseKind.PAGE
        retry = page and kind in self.retryable and lease.record.attempts < self.cfg.max_retries
        host_failure = kind in self.politeness.host_failures
        if outcome.contacted:
            download = max(finished - started, 0.0)
            self._download_ema += 0.05 * (download - self._download_ema)
            host.download_time = download
            # The host backs off for its own failures only (see hive/core/politeness.py): a page's
            # failure neither grows nor resets the count, a robots.txt retry has its own clock.
            if host_failure:
                host.failures = min(host.failures + 1, MAX_FAILURES)
            elif (page and kind not in self.retryable) or kind == Kind.ROBOTS_OK:
                host.failures = 0
            host.delay = self.politeness.delay(
                download, host.crawl_delay, outcome.retry_after, host.failures,
                lease.record.attempts + 1 if retry and host_failure else 0,
            )
            host.next_allowed = max(host.next_allowed, finished + host.delay)
        if lease.kind is LeaseKind.ROBOTS:
            self._robots_done(host, lease.record, outcome, finished)
        elif retry:
            lease.record.attempts += 1
            if host_failure and outcome.contacted:  # the host waits, its URL at its head
                back.replace(lease.key, host, lease.record.encode())
            else:
                back.remove(lease.key, host)
                due = finished + self.politeness.backoff(lease.record.attempts)
                self.retries.wait(lease.key, lease.record.encode(), due)
            self._count("frontier/retried")
        elif kind == Kind.REFUSED:
            back.remove(lease.key, host)
            key = URL_KEY.pack(hh, self.fingerprint(lease.record.url))
            if self._listed_ends(key, host, lease.record, lease.key):
                # Still its live entry: the URL leaves the seen set, and a link may bring it.
                self.seen.forget(key)
                self._count("frontier/admitted", -1)
                domains.add(self.store, registered_domain(host.host_key), pages=-1)
            self._count("frontier/listed_refused")
        else:
            back.remove(lease.key, host)
            key = URL_KEY.pack(hh, self.fingerprint(lease.record.url))
            if lease.record.kind == LISTED and self._listed_ends(key, host, lease.record,
                                                                 lease.key):
                host.admitted += 1  # vouched for (or its host ended): one of the host's own
            self._finish(key, kind)
            if outcome.contacted:
                host.fetched += 1
                domain = registered_domain(host.host_key)
                self._fetched[domain] = self._fetched.get(domain, 0) + 1
        self._dirty.add(hh)
        if host.head is None:
            self._release(hh, host, park=False)
        elif host.next_allowed - finished > self.cfg.park_horizon:
            self._release(hh, host, park=True)
            self._count("frontier/parked")
        else:
            self.heap.schedule(hh, host.next_allowed, finished)

    def _robots_done(
        self, host: HostState, record: UrlRecord, outcome: Outcome, finished: float
    ) -> None:
        """Apply a robots.txt outcome to the state of its origin (the lease's scheme).

        ``robots_ok`` and ``robots_stale`` (an expired copy stands in while the
        refetch fails) set the rules' Crawl-delay; ``robots_unreachable`` holds
        until ``robots_until`` too (the worker ends the origin's URLs meanwhile),
        then the tries start over; ``robots_retry`` counts a try. Any other
        outcome (``refused_address``) blocks the host.
        """
        self._count(f"frontier/robots/{outcome.kind}")
        scheme = record.url.split(":", 1)[0]
        _, tries = host.robots_state(scheme)
        until = outcome.robots_until or finished
        if outcome.kind in (Kind.ROBOTS_OK, Kind.ROBOTS_STALE):
            host.set_robots_state(scheme, until, 0 if outcome.kind == Kind.ROBOTS_OK else tries + 1)
            host.crawl_delay = outcome.crawl_delay or 0.0
            if self.crawl_delay_skip and host.crawl_delay > self.politeness.crawl_delay_cap:
                host.blocked = "crawl_delay_too_long"
            elif host.crawl_delay:
                host.next_allowed = max(
                    host.next_allowed,
                    finished + min(host.crawl_delay, self.politeness.crawl_delay_cap),
                )
        elif outcome.kind == Kind.ROBOTS_UNREACHABLE:
            host.set_robots_state(scheme, until, 0)
        elif outcome.kind == Kind.ROBOTS_RETRY:
            host.set_robots_state(scheme, host.robots_state(scheme)[0], tries + 1)
            if outcome.retry_after:
                host.next_allowed = max(host.next_allowed, finished + outcome.retry_after)
        else:
            host.set_robots_state(scheme, host.robots_state(scheme)[0], tries + 1)
            host.blocked = outcome.kind

    @_store_errors
    def robots_lost(self, lease: Lease, now: float) -> None:
        """Give a page lease back: the worker has no robots.txt rules for its origin.

        The origin's robots.txt counts as expired, so the host's next lease is
        its robots.txt and the page waits behind it (rules lost from a damaged
        store, or kept in a format this version does not read).
        """
        hh = lease.host_hash
        if self.leased.pop(hh, None) is None:
            raise ValueError(f"robots_lost() for a lease not outstanding: {lease.record.url}")
        self.store.txn.delete(U64.pack(hh), db=self._leases_db)
        self.store.ops += 1
        host = self.back.bound[hh]
        scheme = lease.record.url.split(":", 1)[0]
        host.set_robots_state(scheme, 0.0, host.robots_state(scheme)[1])
        self._count("frontier/robots/lost")
        self._dirty.add(hh)
        self.heap.schedule(hh, host.next_allowed, now)

    @_store_errors
    def block(self, host_key: str, reason: str, now: float) -> None:
        """Take a host out of the crawl: its queued URLs and every later one end with ``reason``
        (the host record of its politeness key: today the host's own)."""
        key = self.politeness_key(host_key)
        hh = host_hash(key)
        known = self.back.host(hh)
        if known is None:
            domains.add(self.store, registered_domain(key), hosts=1)
        host = known or HostState(key)
        host.blocked = reason
        if hh in self.back.bound and hh not in self.leased:
            self._drain(hh, host)
        else:
            self._touch(hh, host)

    # -- bookkeeping -----------------------------------------------------------------

    @property
    def pending(self) -> int:
        return len(self.front) + self.back.queued + self.retries.count

    @_store_errors
    def commit(self, now: float, final: bool = False) -> None:
        due = final or now >= self._refusals_saved + REFUSALS_SAVE_INTERVAL
        if self.refusals.changed and due:
            self.store.put("meta", META_REFUSALS, self.refusals.encode())
            self.refusals.changed = False
            self._refusals_saved = now
        if not self._dirty and not self.store.changed:
            self.store.sync_if_due(now)
            return
        for domain, n in self._fetched.items():
            domains.add(self.store, domain, fetched=n)
        self._fetched.clear()
        back = self.back
        for hh in self._dirty:
            host = back.bound.get(hh)
            if host is not None:
                back.save(hh, host)
        self._dirty.clear()
        MetaState(self._seq, self.back.queued, self.counts, self._meta_extra).save(self.store)
        self.store.commit(now)
        self._target = self._compute_target()

    @_store_errors
    def next_due(self) -> tuple[float, HostState] | None:
        """The waiting host, bound or parked or with a URL's retry, that may be fetched
        first: its time and state.

        What the tail of a batch waits for once no host is ready and nothing is in
        flight (a back-off, a Retry-After, a robots.txt retry); None when no host waits.
        """
        due: tuple[float, HostState] | None = None
        waiting = self.heap.next_waiting()
        if waiting is not None:
            due = waiting[0], self.back.bound[waiting[1]]
        parked = self.back.first_parked()
        if parked is not None and (due is None or parked[0] < due[0]):
            host = self.back.host(parked[1])
            if host is not None:
                due = max(parked[0], host.next_allowed), host
        retry = self.retries.first_due() if self.retries.count else None
        if retry is not None and (due is None or retry < due[0]):
            hh = self.retries.first_host()
            host = self.back.host(hh) if hh is not None else None
            if host is not None:
                due = max(retry, host.next_allowed), host
        return due

    def stats(self) -> dict[str, int]:
        ready, waiting = self.heap.counts()
        out = dict(self.counts)
        for level, size in enumerate(self.front.sizes, 1):
            out[f"frontier/front/{level}"] = size
        out.update({
            "frontier/pending": self.pending,
            "frontier/front": len(self.front),
            "frontier/back": self.back.queued,
            "frontier/hosts/bound": len(self.back.bound),
            "frontier/hosts/parked": self.store.entries("parked"),
            "frontier/hosts/ready": ready,
            "frontier/hosts/waiting": waiting,
            "frontier/hosts/target": self.target_bound(),
            "frontier/leased": len(self.leased),
            "frontier/retrying": self.retries.count,
        })
        out.update(self.refusals.stats())
        return out

    def close(self, now: float) -> None:
        self.commit(now, final=True)
        self.store.close(now)
