"""The worker: one frontier thread and T fetch threads crawling the hosts it owns.

The frontier thread is the only one that touches the frontier and its LMDB store (no locks
around it). Each turn of ``loop_once(now)`` it applies the outcomes the fetch threads
finished, admits the discovered links whose hosts it owns under the hive's ring and hands
the others to ``on_links`` (standalone, with no ring: all of them, admitted here; in the
hive: the outbox to the splitter, which would only route an owned link back), leases URLs
until each thread has one to fetch and a backlog waits (``max_leases``), screens them by
their origin's robots.txt rules, commits once (group commit; a lease is on disk before its
fetch starts), and only then dispatches the leases. Busy threads do not wake it per page:
a turn takes several finished fetches at once.

The fetch room works on both sides of the thread boundary: the frontier thread screens
each lease and keeps what its fetch settled through the gate (hive.fetch.gate: robots.txt
rules), and a fetch thread runs one lease at a time through the fetch pipeline
(hive.fetch.pipeline: DNS, address guard, fetch, the sinks with the WARC first, links,
scope) and queues its ``Fetched`` for the frontier thread; a bug in a fetch becomes an
``error`` outcome, never a dead thread or a lost lease. A cluster machine's worker whose
lease from the head lapsed (hive/procs/fence.py) leases nothing, and its fetch threads
start nothing already leased until it is renewed. The payload index (hive.fetch.revisits)
is the one part of the store a fetch thread reads, through its own read transactions; the
frontier thread writes it. So is a recrawl's ``prior`` database (hive.procs.plan), which
the frontier thread fills from the plan a batch of lines a turn, before it leases. A prior
crawl's index (``--dedup-from``, hive.procs.dedup) is read into the payload index a batch
of lines a turn too, and the worker leases nothing until it is read whole.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import queue
import random
import select
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from hive.config import Config
from hive.core.addressstock import Slot
from hive.core.lease import Lease, LeaseKind
from hive.core.recentlinks import RecentLinks, recent_key
from hive.core.record import FEED, SITEMAP, UrlRecord
from hive.core.ring import Ring
from hive.core.urls import host_key
from hive.errors import StoreError, URLError
from hive.fetch.crawllog import CrawlLog
from hive.fetch.dns import Resolver
from hive.fetch.fetched import Fetched, Verdict
from hive.fetch.gate import FrontierGate
from hive.fetch.pipeline import Pipeline
from hive.fetch.revisits import PayloadIndex
from hive.fetch.robots_rules import RobotsRules
from hive.fetch.sinks import SinkContext, Sinks
from hive.frontier.frontier import HANDOFF_FAILED, Frontier
from hive.outcome import Kind, Outcome
from hive.procs.addresses import Addresses
from hive.procs.dedup import DedupSeeding
from hive.procs.fetchtimes import FetchTimes
from hive.procs.hoststatus import AddressPace, HostView
from hive.procs.plan import Plan
from hive.procs.seeds import seed_record
from hive.storage.datadir import DataDir

log = logging.getLogger(__name__)

LinkSink = Callable[[list[UrlRecord], float], None]
# A lease, its stale robots.txt rules and its address grant (None: address politeness is
# off, or its host has no address); a host name on the job queue is looked up.
Job = tuple[Lease, RobotsRules | None, Slot | None]
IDLE_WAIT = 0.5
# A backlog of leases waits in the job queue behind the ones being fetched (two per fetch
# thread, at most 16), so that busy threads need no frontier turn per page: they wake the
# frontier thread when less than a quarter of the backlog is left, and it otherwise takes their
# finished fetches in batches, at least every TURN_INTERVAL (one commit, one crawl-log flush
# and one wake-up for several pages). A host's clock runs from when its response finished,
# so applying it later is no less polite.
BACKLOG_PER_THREAD = 2
MAX_BACKLOG = 16
TURN_INTERVAL = 0.02
DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS)
# Hosts whose last outcome delayed them beyond the ordinary politeness delay, remembered
# (why, HTTP status) so that stats can say what the tail of a batch waits for; the oldest
# is forgotten beyond this many (its reason is then read from its host state).
DELAYED_HOSTS = 4096
# Hosts whose sitemaps and feeds are counted one by one in stats (``sitemaps/host/<host>/…``);
# past this many, a worker counts the others in its totals only, so stats stay bounded.
LISTING_HOSTS = 100
# A lease's record kind -> its stats prefix (hive.core.record); a page read as a feed or a
# sitemap (hive.fetch.sniff) is counted as one by its outcome.
_LISTINGS = {SITEMAP: "sitemaps", FEED: "feeds"}
_READ_AS = {
    Kind.SITEMAP_OK: "sitemaps", Kind.SITEMAP_TRUNCATED: "sitemaps", Kind.SITEMAP_ERROR: "sitemaps",
    Kind.FEED_OK: "feeds", Kind.FEED_TRUNCATED: "feeds", Kind.FEED_ERROR: "feeds",
}


def _always() -> bool:
    return True


def backlog(threads: int) -> int:
    """Leases queued for ``threads`` busy fetch threads, at most."""
    return min(BACKLOG_PER_THREAD * threads, MAX_BACKLOG)


def max_leases(threads: int) -> int:
    """Leases a worker with ``threads`` fetch threads holds at most: fetching, queued, or
    fetched and not yet applied (so fetched again after a kill -9, at most)."""
    return threads + backlog(threads)


class Worker:
    """A single crawling process's frontier and fetch threads (see the module docstring)."""

    def __init__(
        self,
        cfg: Config,
        directory: Path,
        *,
        worker_id: int = 0,
        warc_dir: Path | None = None,
        log_dir: Path | None = None,
        resolver: Resolver | None = None,
        rng: random.Random | None = None,
        on_links: LinkSink | None = None,
        ring: Ring | None = None,
    ) -> None:
        self.cfg = cfg
        self.ring = ring
        self.worker_id = worker_id
        self.threads = cfg.fetch.threads
        self.max_leases = max_leases(self.threads)
        self._low_water = max(1, backlog(self.threads) // 4)
        self.frontier = Frontier.from_config(directory, cfg, rng=rng, now=time.time())
        self.recent = RecentLinks(int(cfg.hive.recent_links_mb * (1 << 20)))
        name = f"{worker_id:02d}"
        self._closing = threading.Event()
        payloads = None
        self.seeding: DedupSeeding | None = None
        if cfg.warc.enabled and cfg.warc.revisits:
            payloads = PayloadIndex(self._load_payload, self._store_payload,
                                    cfg.warc.revisit_min_bytes,
                                    known=self.frontier.store.keys("payloads"))
            if cfg.warc.dedup_from:
                self.seeding = DedupSeeding(self.frontier, payloads, Path(cfg.warc.dedup_from))
        self.plan = (Plan(self.frontier.store, cfg, Path(cfg.recrawl.plan)) if cfg.recrawl.plan
                     else None)
        self.sinks = Sinks.from_config(
            SinkContext(cfg, name, warc_dir or directory / "warc", payloads))
        # The fetch room's two sides: the gate on this (the frontier) thread, the pipeline
        # on the fetch threads.
        self.gate = FrontierGate(cfg, load=self._load_robots, store=self._store_robots,
                                 sinks=self.sinks)
        self.pipeline = Pipeline(
            cfg, resolver=resolver, sinks=self.sinks, crawl_delay=self._crawl_delay,
            recent=self.recent, closing=self._closing,
            prior=self.plan.load if self.plan is not None else None,
        )
        self.crawl_log = CrawlLog(
            log_dir or directory / "logs", DataDir.crawl_log_stem(worker_id),
            cfg.log.crawl_log_max_bytes,
        )
        self.on_links: LinkSink = on_links or self._admit_links
        self.counts: Counter[str] = Counter()
        self.fetch_times = FetchTimes()
        self.host_view = HostView(self.frontier, cfg.hive.status_hosts)
        self.delayed: dict[str, tuple[str, int | None]] = {}
        self.listing_hosts: set[str] = set()
        self.in_flight = 0
        self.stopping = False
        # Whether a URL may be leased or a lease start now (a cluster machine's lease,
        # hive/procs/fence.py): asked before each lease, and before each fetch starts.
        self.may_lease: Callable[[], bool] = _always
        self.disk_error = ""
        self._results: queue.SimpleQueue[Fetched] = queue.SimpleQueue()
        self._prefetch: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._jobs: queue.SimpleQueue[Job | str | None] = queue.SimpleQueue()
        self.addresses: Addresses | None = None
        if cfg.politeness.ip_concurrency:
            self.addresses = Addresses(cfg, self.frontier.store, worker_id, ring,
                                       self.pipeline.resolved, self._jobs.put, time.time())
            self.frontier.commit(time.time())  # its ledger's marker, before any grant
            self.host_view.on_address = self.addresses.waiting_hosts
            self.host_view.pace = AddressPace(cfg.politeness.ip_concurrency,
                                              cfg.politeness.ip_min_delay,
                                              self.addresses.address_of)
        self.wake_fd, self._wake_w = os.pipe()
        os.set_blocking(self.wake_fd, False)
        os.set_blocking(self._wake_w, False)
        self._threads = [
            threading.Thread(target=self._fetch_loop, name=f"fetch-{i}", daemon=True)
            for i in range(self.threads)
        ]
        self._threads.append(
            threading.Thread(target=self._prefetch_loop, name="dns-prefetch", daemon=True)
        )
        for thread in self._threads:
            thread.start()

    # -- the frontier thread --------------------------------------------------------

    def _load_robots(self, host: str) -> bytes | None:
        return self.frontier.store.get("robots", host.encode())

    def _store_robots(self, host: str, data: bytes) -> None:
        self.frontier.store.put("robots", host.encode(), data)

    def _load_payload(self, sha1: bytes) -> bytes | None:
        """For any thread: a committed entry of the payload index."""
        return self.frontier.store.read_committed("payloads", sha1)

    def _store_payload(self, sha1: bytes, value: bytes) -> None:
        self.frontier.store.put("payloads", sha1, value, overwrite=False)

    def _owns(self, url: str) -> bool:
        """True if this worker owns url's host under its hive's ring (or has no ring)."""
        return self.ring is None or self.ring.owner(host_key(url)) == self.worker_id

    def _crawl_delay(self, host_hash: int) -> float:
        """A leased host's Crawl-delay, for a fetch thread: the host's state is stable
        while its lease is out, and reading a float needs no lock."""
        state = self.frontier.back.bound.get(host_hash)
        return state.crawl_delay if state is not None else 0.0

    def add(self, urls: Iterable[str], now: float, hint: int = 1) -> int:
        """Admit seed URLs (depth 0; ``sitemap:<url>`` a sitemap) given to a worker run alone:
        where they enter, canonicalized once (hive.procs.seeds.seed_record); malformed ones
        are counted and logged, not raised. In a hive seeds come as records, trusted."""
        records = []
        for line in urls:
            try:
                records.append(seed_record(line, self.cfg.scope.max_url_length, hint))
            except URLError as exc:
                self.counts[f"seeds/refused/{exc.reason}"] += 1
                self.crawl_log.write(now, Kind.REFUSED, exc.url, message=str(exc))
        return self.admit(records, now)

    def admit(self, records: list[UrlRecord], now: float) -> int:
        return self.frontier.admit(records, now)

    def _admit_links(self, links: list[UrlRecord], now: float) -> None:
        self.frontier.admit(links, now)

    def loop_once(self, now: float) -> float:
        """One turn of the frontier thread; returns how long to wait for the next one.

        A full disk (seen by a fetch thread writing WARC) stops the worker with a
        StoreError before anything else is committed: a crawl must not go on
        fetching pages it can no longer keep.
        """
        if self.disk_error:
            raise StoreError(self.disk_error)
        self._apply_results(now)
        seeding = self.seeding is not None and not self.seeding.step(self._owns, now)
        if self.plan is not None and not self.plan.done:
            self.plan.step(self.frontier, self._owns, now)
        dispatch: list[Job] = []
        if self.addresses is not None:  # hosts looked up, leases late for their grant
            go, late = self.addresses.news(now)
            dispatch += [(*pending, None) for pending in go]
            self.in_flight -= late
        wake_at: float | None = None
        while not self.stopping and not seeding \
                and self.in_flight + len(dispatch) < self.max_leases and self.may_lease():
            ready = self.frontier.pop_ready(now)
            if ready.lease is None:
                wake_at = ready.wake_at
                break
            lease = ready.lease
            screened = self.gate.screen(lease, now)
            if screened is Verdict.FETCH:
                pending = (lease, self.gate.stale_rules(lease, now))
                if self.addresses is None or self.addresses.start(pending, now):
                    dispatch.append((*pending, None))
            elif screened is Verdict.LOST:
                self.frontier.robots_lost(lease, now)
            else:
                self._record(screened, now)
        if self.addresses is not None and not self.stopping:  # a stop starts nothing more
            dispatch += [(*pending, slot) for pending, slot in self.addresses.turn(now)]
            self.frontier.held_back = self.addresses.waiting_count()
        self.frontier.commit(now)
        for job in dispatch:
            self.in_flight += 1
            self._jobs.put(job)
        for host in self.frontier.newly_bound:
            self._prefetch.put(host)
        self.frontier.newly_bound.clear()
        for record, outcome in self.frontier.ended:
            self.crawl_log.write(now, outcome, record.url, via=record.via, depth=record.depth,
                                 message=f"its host ended as {outcome}")
        self.frontier.ended.clear()
        for record, reason, message in self.frontier.refused:
            self.crawl_log.write(now, Kind.REFUSED, record.url, via=record.via, depth=record.depth,
                                 reason=reason, message=message)
        self.frontier.refused.clear()
        self.crawl_log.flush()
        if seeding:
            return 0.0  # the next batch at once
        wait = IDLE_WAIT
        if self.in_flight < self.max_leases and wake_at is not None:
            wait = max(0.0, min(wake_at - now, IDLE_WAIT))
        due = self.addresses.next_due(now) if self.addresses is not None else None
        if due is not None:  # a grant's time, or an ask to send again
            wait = max(0.0, min(due - now, wait))
        return min(wait, TURN_INTERVAL) if self.in_flight else wait

    def _apply_results(self, now: float) -> None:
        while True:
            try:
                fetched = self._results.get_nowait()
            except queue.Empty:
                return
            self.in_flight -= 1
            if self.addresses is not None:
                if fetched.fallbacks and self.addresses.fall_back(
                        fetched.lease, fetched.fallbacks, fetched.started, now):
                    continue  # it waits for a grant at the host's next address
                self.addresses.finished(fetched.lease, fetched.started, now)
            self.gate.keep(fetched)
            if fetched.links:
                self._hand_on(fetched, now)
            self._record(fetched, now)
            for reason, n in fetched.refused_links.items():
                self.counts[f"links/refused/{reason}"] += n
            if fetched.refused:
                self._refused_links(fetched, now)
            if fetched.capped:  # the sitemap's crawl-log line says how many
                self.counts["links/refused/max_sitemaps_per_host"] += fetched.capped
                self.frontier.refusals.count("max_sitemaps_per_host",
                                             fetched.lease.record.host_key, fetched.capped)
            self.counts["links/found"] += len(fetched.links) - fetched.embeds
            if fetched.embeds:
                self.counts["embeds/found"] += fetched.embeds
            self.counts["links/recent_dropped"] += fetched.recent_links
            self.counts["links/truncated_pages"] += fetched.links_truncated

    def _hand_on(self, fetched: Fetched, now: float) -> None:
        """Admit a page's links to owned hosts and hand the others on before its outcome is
        recorded, in the same transaction.

        A link to a host this worker owns needs no round trip: the ring does not change
        while the hive runs (a resize happens offline, hive/procs/resize.py), so the
        splitter would send it straight back; admitted here it is on disk with the
        page's outcome, as an outbox entry would be. If the others cannot be handed on
        (a bug: the outbox splits what the wire limits), the page is not done: its
        outcome becomes ``handoff_failed``, which the frontier retries, so no page
        ends ``ok`` with its links lost (the ones admitted are seen, not lost). A
        storage error stops the worker, as everywhere.
        """
        links = fetched.links
        if self.ring is not None:
            owner, me = self.ring.owner, self.worker_id
            mine: list[UrlRecord] = []
            others: list[UrlRecord] = []
            for record in links:
                (mine if owner(record.host_key) == me else others).append(record)
            if mine:
                self.frontier.admit(mine, now)
                self.counts["links/admitted_here"] += len(mine)
            links = others
        if not links:
            return
        try:
            self.on_links(links, now)
        except StoreError:
            raise
        except Exception as exc:
            url, url_host = fetched.lease.record.url, fetched.lease.record.host_key
            log.error("the %d links of %s were not handed on, so it will be fetched again: %s",
                      len(fetched.links), url, exc)
            self.counts["links/handoff_failed"] += 1
            fetched.kind, fetched.retry_after = HANDOFF_FAILED, None
            fetched.message = f"links not handed on: {type(exc).__name__}: {exc}"
            linker = url_host if self.cfg.priority.inlink_levels > 0 else ""
            for record in fetched.links:  # or the page's next fetch would drop them as recent
                self.recent.forget(recent_key(record.url, record.kind, linker))
            fetched.links = []

    def _refused_links(self, fetched: Fetched, now: float) -> None:
        """Count the links scope refused by reason and host; log them up to the bound."""
        note, source = self.frontier.refusals.note, fetched.lease.record.url
        for reason, url, depth in fetched.refused:
            message = note(reason, host_key(url))
            if message is not None:
                self.crawl_log.write(now, Kind.REFUSED, url, via=source, depth=depth,
                                     reason=reason, message=message)

    def _record(self, fetched: Fetched, now: float) -> None:
        lease, kind = fetched.lease, fetched.kind
        self.frontier.done(lease, fetched, fetched.started, fetched.finished)
        self.counts[f"worker/outcome/{kind}"] += 1
        if fetched.change:
            self.counts[f"changes/{fetched.change}"] += 1
        self.fetch_times.observe(fetched.finished - fetched.started, fetched)
        record = lease.record
        self._remember_delay(record.host_key, fetched)
        if fetched.reason:
            self.counts[f"links/refused/{fetched.reason}"] += 1
            self.frontier.refusals.note(fetched.reason, record.host_key)
        listing = _LISTINGS.get(record.kind) or _READ_AS.get(kind)
        if listing is not None and lease.kind == LeaseKind.PAGE:
            self._count_listing(listing, record.host_key, fetched)
        self.crawl_log.write(
            fetched.finished, kind, record.url, status=fetched.status,
            size=fetched.size, download=fetched.finished - fetched.started, via=record.via,
            depth=record.depth, mime=fetched.mime, reason=fetched.reason, message=fetched.message,
            hop=record.path, change=fetched.change, evidence=fetched.evidence,
            location=fetched.location, score=fetched.score, scorer=fetched.scorer,
            address=fetched.address if fetched.contacted else "",
        )

    def _count_listing(self, prefix: str, host: str, fetched: Fetched) -> None:
        """A sitemap's or feed's fetch in stats: in all, and by host for LISTING_HOSTS hosts
        (``fetched``, ``urls`` listed, ``truncated``, ``errors``: any outcome that is one)."""
        names = [prefix]
        if host in self.listing_hosts or len(self.listing_hosts) < LISTING_HOSTS:
            self.listing_hosts.add(host)
            names.append(f"{prefix}/host/{host}")
        kind = fetched.kind
        for name in names:
            self.counts[f"{name}/fetched"] += 1
            self.counts[f"{name}/urls"] += fetched.listed
            self.counts[f"{name}/truncated"] += kind in (Kind.SITEMAP_TRUNCATED,
                                                        Kind.FEED_TRUNCATED)
            self.counts[f"{name}/errors"] += kind.error

    def _remember_delay(self, host: str, outcome: Outcome) -> None:
        """Keep why a host's last outcome put off its next fetch (see ``wait_stats``)."""
        if outcome.kind == Kind.ROBOTS_RETRY:
            why = "robots_retry"
        elif outcome.retry_after:
            why = "retry_after"
        elif outcome.kind in self.frontier.retryable:
            why = "backoff"
        else:
            self.delayed.pop(host, None)
            return
        self.delayed.pop(host, None)
        if len(self.delayed) >= DELAYED_HOSTS:
            del self.delayed[next(iter(self.delayed))]
        self.delayed[host] = why, outcome.status

    def wait_stats(self) -> dict[str, float]:
        """When the waiting host due first may go, and why (for the tail of a batch).

        ``frontier/wait/until`` is its time; one ``frontier/wait/why/<reason>``
        (``retry_after``, ``backoff``, ``robots_retry``, ``crawl_delay`` or
        ``delay``) and one ``frontier/wait/host/<host key>`` say why and which
        (stats values are numbers); ``frontier/wait/status`` is the HTTP status
        that put it off, when there was one.
        """
        due = self.frontier.next_due()
        if due is None:
            return {}
        until, host = due
        why, status = self.delayed.get(host.host_key, ("", None))
        if not why:
            if host.robots_tries and host.robots_until <= until:
                why = "robots_retry"
            elif host.failures:
                why = "backoff"
            else:
                why = "crawl_delay" if host.crawl_delay >= host.delay > 0 else "delay"
        out = {"frontier/wait/until": until, f"frontier/wait/why/{why}": 1,
               f"frontier/wait/host/{host.host_key}": 1}
        if status is not None:
            out["frontier/wait/status"] = status
        return out

    def wait(self, seconds: float) -> None:
        """Sleep until the fetch threads run short of leases or ``seconds`` pass."""
        if seconds > 0:
            select.select([self.wake_fd], [], [], seconds)
        self.drain_wake()

    def drain_wake(self) -> None:
        """Empty the wake pipe (a fetch thread writes a byte when the job queue runs low)."""
        with contextlib.suppress(BlockingIOError):
            while os.read(self.wake_fd, 4096):
                pass

    @property
    def idle(self) -> bool:
        return (self.in_flight == 0 and self.frontier.pending == 0 and self._results.empty()
                and (self.plan is None or self.plan.done)
                and (self.seeding is None or self.seeding.done))

    def run_until_idle(self, timeout: float) -> bool:
        """Crawl until nothing is pending or in flight; False if ``timeout`` came first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.wait(self.loop_once(time.time()))
            if self.idle:
                return True
        return False

    def drain(self, timeout: float = 30.0) -> None:
        """Warm stop: lease nothing more, let in-flight fetches finish and record them."""
        self.stopping = True
        deadline = time.monotonic() + timeout
        while self.in_flight and not self.disk_error and time.monotonic() < deadline:
            self.wait(self.loop_once(time.time()))
        self.frontier.commit(time.time())

    def close(self, join_timeout: float = 5.0) -> None:
        """Stop the threads and close the frontier, the crawl log, the sinks and the
        pipeline. A fetch thread still busy after ``join_timeout`` (a fetch past every
        timeout, a huge parse) is left to end with the process: its result is dropped (its
        URL stays pending, to be fetched at the next start), and the wake pipe it may still
        write to stays open, so its descriptor can never be reused under it by a file
        opened later."""
        self._closing.set()
        for _ in self._threads:
            self._jobs.put(None)
        self._prefetch.put(None)
        deadline = time.monotonic() + join_timeout
        for thread in self._threads:
            thread.join(timeout=max(deadline - time.monotonic(), 0.0))
        busy = sum(thread.is_alive() for thread in self._threads)
        if busy:
            log.warning("%d fetch threads still busy at close; their results are dropped and "
                        "their URLs stay pending", busy)
        if self.plan is not None:
            self.plan.close()
        if self.seeding is not None:
            self.seeding.close()
        if self.addresses is not None and not busy:
            self.addresses.close()
        self.frontier.close(time.time())
        self.crawl_log.close()
        self.sinks.close()
        self.pipeline.close()
        if not busy:
            os.close(self.wake_fd)
            os.close(self._wake_w)

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = dict(self.frontier.stats())
        out.update(self.gate.stats())
        out.update(self.pipeline.stats())
        out.update(self.sinks.stats())
        out.update(self.counts)
        if self.plan is not None:
            out.update(self.plan.counts)
        out["worker/in_flight"] = self.in_flight
        out["links/recent_bytes"] = self.recent.held_bytes
        out.update(self.wait_stats())
        out.update(self.fetch_times.stats())
        out.update(self.host_view.stats(time.time()))
        if self.addresses is not None:
            out.update(self.addresses.stats())
        return out

    # -- fetch threads ---------------------------------------------------------------

    def _prefetch_loop(self) -> None:
        while (host := self._prefetch.get()) is not None:
            self.pipeline.prefetch(host)

    def _fetch_loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            while not isinstance(job, str) and job[2] is None and not self.may_lease():
                if self._closing.wait(0.1):  # a lease taken before the fence lapsed waits
                    break
            if self._closing.is_set():
                continue  # queued after a close began: its URL stays pending in the store
            # A host to look up; a lease late for its grant, or granted after the machine's
            # lease lapsed (it waited across the lapse: hive/procs/fence.py): it waits again.
            if isinstance(job, str) or (job[2] is not None and (
                    time.time() > job[2].start_by or not self.may_lease())):
                assert self.addresses is not None
                self.addresses.aside(job, self.pipeline.prefetch)
                self._wake()
                continue
            lease, stale, slot = job
            started = time.time()
            try:
                fetched = self.pipeline.run(lease, stale, started,
                                            slot.address if slot is not None else None)
            except Exception as exc:  # a bug must not kill the thread or lose the lease
                if isinstance(exc, OSError) and exc.errno in DISK_ERRORS:
                    self.disk_error = f"writing WARC: {exc}"
                log.exception("fetch of %s failed", lease.record.url)
                fetched = Fetched(
                    Kind.ERROR, lease=lease, started=started, finished=time.time(),
                    message=f"{type(exc).__name__}: {exc}",
                )
            self._results.put(fetched)
            if self._jobs.qsize() < self._low_water and not self._closing.is_set():
                self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_w, b"x")
