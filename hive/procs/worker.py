"""The worker: one frontier thread and T fetch threads crawling the hosts it owns.

The frontier thread is the only one that touches the frontier and its LMDB
store (no locks around it). Each turn of ``loop_once(now)`` it applies the
outcomes the fetch threads finished, hands discovered links to ``on_links``
(standalone: admitted here; in the hive: the outbox to the splitter), leases
URLs until each thread has one to fetch and a backlog waits (``max_leases``),
checks them against the host's robots.txt rules, commits once (group commit;
a lease is on disk before its fetch starts), and only then dispatches the
leases. Busy threads do not wake it per page: a turn takes several finished
fetches at once.

A fetch thread does the I/O for one lease: DNS (cache, ``--resolve``
overrides) → address guard → robots.txt or page request through the one
fetcher → WARC records (flushed before the outcome is returned) → links from
HTML, canonicalized and filtered by scope. Every failure becomes an Outcome;
nothing raises out of a fetch thread. A host's politeness clock runs from
when its response finished arriving (``finished``), as the frontier applies it.
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
from dataclasses import dataclass, field
from pathlib import Path

from hive import __version__
from hive.config import Config
from hive.core.frontier import HANDOFF_FAILED, PAGE, ROBOTS, Frontier, Lease, Outcome
from hive.core.politeness import Politeness
from hive.core.record import UrlRecord
from hive.core.urls import canonicalize, host_key
from hive.errors import StoreError, URLError
from hive.fetch.client import Fetcher, FetchResult
from hive.fetch.cookies import CookieJars
from hive.fetch.crawllog import CrawlLog
from hive.fetch.dns import AddressGuard, DnsCache, Resolver
from hive.fetch.headers import refresh_target, robots_nofollow
from hive.fetch.parse import Scope, extract_links
from hive.fetch.proxy import Proxy
from hive.fetch.robots import RobotsCache, RobotsPolicy, RobotsRules
from hive.fetch.warc import Truncation, WarcWriter
from hive.procs.fetchtimes import FetchTimes
from hive.procs.hoststatus import HostView
from hive.procs.recentlinks import RecentLinks

log = logging.getLogger(__name__)

LinkSink = Callable[[list[UrlRecord], float], None]
Job = tuple[Lease, RobotsRules | None]
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
# Parsing a robots.txt holds ~60 bytes per byte of it while protego reads it (30 MB for a
# 512 KB file of wildcards, bench/bench_robots.py): at most this many fetch threads parse
# one larger than BIG_ROBOTS at once, so T threads meeting such files hold ~60 MB, not T x 30.
ROBOTS_PARSES = 2
BIG_ROBOTS = 64 << 10
DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS)
# Hosts whose last outcome delayed them beyond the ordinary politeness delay, remembered
# (why, HTTP status) so that stats can say what the tail of a batch waits for; the oldest
# is forgotten beyond this many (its reason is then read from its host state).
DELAYED_HOSTS = 4096


@dataclass(slots=True)
class Fetched:
    """A fetch thread's report on one lease."""

    lease: Lease
    outcome: Outcome
    started: float
    finished: float
    size: int = 0
    message: str = ""
    links: list[UrlRecord] = field(default_factory=list)
    refused_links: Counter[str] = field(default_factory=Counter)
    # The links refused by scope or a trap guard, to be counted by host and logged: (reason,
    # url, depth).
    refused: list[tuple[str, str, int]] = field(default_factory=list)
    recent_links: int = 0
    links_truncated: bool = False
    rules: RobotsRules | None = None


def backlog(threads: int) -> int:
    """Leases queued for ``threads`` busy fetch threads, at most."""
    return min(BACKLOG_PER_THREAD * threads, MAX_BACKLOG)


def max_leases(threads: int) -> int:
    """Leases a worker with ``threads`` fetch threads holds at most: fetching, queued, or
    fetched and not yet applied (so fetched again after a kill -9, at most)."""
    return threads + backlog(threads)


def hostname(key: str) -> str:
    """The DNS name (or IP literal) of a host key: ``a.test:8080`` → ``a.test``."""
    if key.startswith("["):
        return key[1 : key.index("]")]
    return key.rsplit(":", 1)[0] if ":" in key else key


def truncation(result: FetchResult) -> Truncation | None:
    """WARC-Truncated's reason for an incomplete body: the size cap, the clock, the
    connection dropped mid-body (reset, or closed short of its length), or else."""
    if not result.truncated:
        return None
    if result.outcome == "too_large":
        return "length"
    if result.outcome == "timeout":
        return "time"
    return "disconnect" if result.outcome in ("connect", "protocol") else "unspecified"


def warcinfo_fields(cfg: Config) -> list[tuple[str, str]]:
    """What a warcinfo record says of the crawl: its robots policy and the headers it sends."""
    fields = [
        ("robots", "obey" if cfg.robots.enabled else "ignore"),
        ("http-header-user-agent", cfg.fetch.user_agent),
    ]
    for line in cfg.fetch.headers:
        name, _, value = line.partition(":")
        if name.strip().lower() == "from":
            fields.append(("http-header-from", value.strip()))
    return fields


def split_head(head: bytes) -> tuple[str, list[tuple[str, str]]]:
    """An HTTP head as sent (``GET / HTTP/1.1\r\nName: value...``) as its line and fields."""
    lines = head.decode("latin-1").split("\r\n")
    fields = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            fields.append((name.strip(), value.strip()))
    return lines[0], fields


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
    ) -> None:
        self.cfg = cfg
        self.worker_id = worker_id
        self.threads = cfg.fetch.threads
        self.max_leases = max_leases(self.threads)
        self._low_water = max(1, backlog(self.threads) // 4)
        self.frontier = Frontier.from_config(directory, cfg, rng=rng, now=time.time())
        self.dns = DnsCache.from_config(cfg.dns, resolver)
        self.guard = AddressGuard.from_config(cfg.dns, cfg.fetch.proxy_allow_nets)
        self.proxy = Proxy.parse(cfg.fetch.proxy, cfg.fetch.no_proxy)
        self.robots_policy = RobotsPolicy.from_config(cfg)
        self.robots = RobotsCache(
            max(1, int(cfg.robots.cache_mb * (1 << 20))), self.robots_policy.agent,
            load=self._load_robots, store=self._store_robots,
        )
        self.politeness = Politeness.from_config(cfg.politeness)
        self._robots_parses = threading.BoundedSemaphore(ROBOTS_PARSES)
        self.fetcher = Fetcher.from_config(cfg.fetch)
        self.scope = Scope.from_config(cfg.scope)
        self.recent = RecentLinks(int(cfg.hive.recent_links_mb * (1 << 20)))
        name = f"{worker_id:02d}"
        self.cookies = CookieJars() if cfg.fetch.cookies else None
        self._closing = threading.Event()
        self.warc = (
            WarcWriter.from_config(
                cfg.warc, warc_dir or directory / "warc", f"hive-{name}", f"hive/{__version__}",
                info=warcinfo_fields(cfg),
            )
            if cfg.warc.enabled else None
        )
        self.crawl_log = CrawlLog(
            log_dir or directory / "logs", f"crawl-{name}", cfg.log.crawl_log_max_bytes
        )
        self.on_links: LinkSink = on_links or self._admit_links
        self.counts: Counter[str] = Counter()
        self.fetch_times = FetchTimes()
        self.host_view = HostView(self.frontier, cfg.hive.status_hosts)
        self.delayed: dict[str, tuple[str, int | None]] = {}
        self.in_flight = 0
        self.stopping = False
        self.disk_error = ""
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[Fetched] = queue.SimpleQueue()
        self._prefetch: queue.SimpleQueue[str | None] = queue.SimpleQueue()
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

    def add(self, urls: Iterable[str], now: float, hint: int = 1) -> int:
        """Admit seed URLs (depth 0); malformed ones are counted and logged, not raised."""
        records = []
        for url in urls:
            try:
                canonical = canonicalize(url, max_length=self.cfg.scope.max_url_length)
            except URLError as exc:
                self.counts[f"seeds/refused/{exc.reason}"] += 1
                self.crawl_log.write(now, "refused", url, message=str(exc))
                continue
            records.append(UrlRecord(canonical, host_key(canonical), 0, hint=hint))
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
        dispatch: list[Job] = []
        wake_at: float | None = None
        while not self.stopping and self.in_flight + len(dispatch) < self.max_leases:
            ready = self.frontier.pop_ready(now)
            if ready.lease is None:
                wake_at = ready.wake_at
                break
            if self._robots_refuses(ready.lease, now):
                continue
            # A robots.txt fetch takes the origin's expired rules along: they stand in
            # if the refetch fails (RFC 9309 section 2.4); only this thread reads the store.
            stale = (
                self.robots.stale(ready.lease.record.url, now)
                if ready.lease.kind == ROBOTS else None
            )
            dispatch.append((ready.lease, stale))
        self.frontier.commit(now)
        for job in dispatch:
            self.in_flight += 1
            self._jobs.put(job)
        for host in self.frontier.newly_bound:
            self._prefetch.put(hostname(host))
        self.frontier.newly_bound.clear()
        for record, outcome in self.frontier.ended:
            self.crawl_log.write(now, outcome, record.url, via=record.via, depth=record.depth,
                                 message=f"its host ended as {outcome}")
        self.frontier.ended.clear()
        for record, reason, message in self.frontier.refused:
            self.crawl_log.write(now, "refused", record.url, via=record.via, depth=record.depth,
                                 reason=reason, message=message)
        self.frontier.refused.clear()
        self.crawl_log.flush()
        wait = IDLE_WAIT
        if self.in_flight < self.max_leases and wake_at is not None:
            wait = max(0.0, min(wake_at - now, IDLE_WAIT))
        return min(wait, TURN_INTERVAL) if self.in_flight else wait

    def _robots_refuses(self, lease: Lease, now: float) -> bool:
        """Refuse a page its origin's rules disallow, or whose origin is unreachable.

        The frontier leases an origin's robots.txt before its pages and keeps it
        fresh, so rules are missing only when the store lost them (a damaged
        entry, one of an older format): the page goes back, behind a new fetch
        of its origin's robots.txt. Never fetched without rules.
        """
        if lease.kind != PAGE or not self.cfg.robots.enabled:
            return False
        rules = self.robots.get(lease.record.url, now)
        if rules is None:
            self.frontier.robots_lost(lease, now)
            return True
        verdict = rules.check(lease.record.url)
        if verdict:
            return False
        if verdict is None:
            self.counts["robots/over_budget"] += 1
        kind = "robots_unreachable" if rules.kind == "unreachable" else "robots"
        self._record(Fetched(lease, Outcome(kind, contacted=False), now, now), now)
        return True

    def _apply_results(self, now: float) -> None:
        while True:
            try:
                fetched = self._results.get_nowait()
            except queue.Empty:
                return
            self.in_flight -= 1
            if fetched.rules is not None:
                self.robots.put(fetched.lease.record.url, fetched.rules)
            if fetched.links:
                self._hand_on(fetched, now)
            self._record(fetched, now)
            for reason, n in fetched.refused_links.items():
                self.counts[f"links/refused/{reason}"] += n
            if fetched.refused:
                self._refused_links(fetched, now)
            self.counts["links/found"] += len(fetched.links)
            self.counts["links/recent_dropped"] += fetched.recent_links
            self.counts["links/truncated_pages"] += fetched.links_truncated

    def _hand_on(self, fetched: Fetched, now: float) -> None:
        """Hand a page's links on before its outcome is recorded, in the same transaction.

        If they cannot be (a bug: the outbox splits what the wire limits), the page
        is not done: its outcome becomes ``handoff_failed``, which the frontier
        retries, so no page ends ``ok`` with its links lost. A storage error stops
        the worker, as everywhere.
        """
        try:
            self.on_links(fetched.links, now)
        except StoreError:
            raise
        except Exception as exc:
            url = fetched.lease.record.url
            log.error("the %d links of %s were not handed on, so it will be fetched again: %s",
                      len(fetched.links), url, exc)
            self.counts["links/handoff_failed"] += 1
            fetched.outcome = Outcome(HANDOFF_FAILED, fetched.outcome.status)
            fetched.message = f"links not handed on: {type(exc).__name__}: {exc}"
            for record in fetched.links:  # or the page's next fetch would drop them as recent
                self.recent.forget(record.url)
            fetched.links = []

    def _refused_links(self, fetched: Fetched, now: float) -> None:
        """Count the links scope refused by reason and host; log them up to the bound."""
        note, source = self.frontier.refusals.note, fetched.lease.record.url
        for reason, url, depth in fetched.refused:
            message = note(reason, host_key(url))
            if message is not None:
                self.crawl_log.write(now, "refused", url, via=source, depth=depth,
                                     reason=reason, message=message)

    def _record(self, fetched: Fetched, now: float) -> None:
        lease, outcome = fetched.lease, fetched.outcome
        self.frontier.done(lease, outcome, fetched.started, fetched.finished)
        self.counts[f"worker/outcome/{outcome.kind}"] += 1
        self.fetch_times.observe(fetched.finished - fetched.started, outcome)
        record = lease.record
        self._remember_delay(record.host_key, outcome)
        self.crawl_log.write(
            fetched.finished, outcome.kind, record.url, status=outcome.status,
            size=fetched.size, download=fetched.finished - fetched.started, via=record.via,
            depth=record.depth, message=fetched.message,
        )

    def _remember_delay(self, host: str, outcome: Outcome) -> None:
        """Keep why a host's last outcome put off its next fetch (see ``wait_stats``)."""
        if outcome.kind == "robots_retry":
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
        return self.in_flight == 0 and self.frontier.pending == 0 and self._results.empty()

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

    def close(self) -> None:
        self._closing.set()
        for _ in self._threads:
            self._jobs.put(None)
        self._prefetch.put(None)
        for thread in self._threads:
            thread.join(timeout=5)
        self.frontier.close(time.time())
        self.crawl_log.close()
        if self.warc is not None:
            self.warc.close()
        self.fetcher.close()
        os.close(self.wake_fd)
        os.close(self._wake_w)

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = dict(self.frontier.stats())
        out.update(self.dns.stats())
        out.update(self.robots.stats())
        out.update(self.fetcher.stats())
        if self.warc is not None:
            out.update(self.warc.stats())
        out.update(self.counts)
        out["worker/in_flight"] = self.in_flight
        out["links/recent_bytes"] = self.recent.held_bytes
        out.update(self.wait_stats())
        out.update(self.fetch_times.stats())
        out.update(self.host_view.stats(time.time()))
        return out

    # -- fetch threads ---------------------------------------------------------------

    def _prefetch_loop(self) -> None:
        while (host := self._prefetch.get()) is not None:
            self.dns.lookup(host, time.time())

    def _fetch_loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            lease, stale = job
            started = time.time()
            try:
                fetched = self._fetch(lease, stale, started)
            except Exception as exc:  # a bug must not kill the thread or lose the lease
                if isinstance(exc, OSError) and exc.errno in DISK_ERRORS:
                    self.disk_error = f"writing WARC: {exc}"
                log.exception("fetch of %s failed", lease.record.url)
                fetched = Fetched(
                    lease, Outcome("error", contacted=True), started, time.time(),
                    message=f"{type(exc).__name__}: {exc}",
                )
            self._results.put(fetched)
            if self._jobs.qsize() < self._low_water:
                with contextlib.suppress(BlockingIOError):
                    os.write(self._wake_w, b"x")

    def _address(self, host: str, now: float) -> tuple[str | None, str, str]:
        """(address, outcome kind, message) for a host key: the kind is empty on success."""
        resolution = self.dns.lookup(hostname(host), now)
        if not resolution.ok:
            return None, "dns", resolution.message
        address = resolution.addresses[0]
        refusal = self.guard.check(address)
        if refusal is not None:
            return None, "refused_address", refusal
        _, refusal = self._via(host, now)
        if refusal:
            return None, "refused_address", refusal
        return address, "", ""

    def _via(self, host: str, now: float) -> tuple[str, str]:
        """(the proxy's address to tunnel through or "", why it may not be used or "")."""
        proxy = self.proxy
        if proxy is None or proxy.bypassed(hostname(host)):
            return "", ""
        resolution = self.dns.lookup(proxy.host, now)
        if not resolution.ok:
            return "", f"proxy {proxy.host}: {resolution.message}"
        via = resolution.addresses[0]
        return via, self.guard.check_proxy(via) or ""

    def _fetch(self, lease: Lease, stale: RobotsRules | None, started: float) -> Fetched:
        address, kind, message = self._address(lease.record.host_key, started)
        if address is None:
            if lease.kind == ROBOTS and kind == "dns":
                return self._robots_outcome(lease, stale, None, b"", started, time.time(),
                                            message)
            return Fetched(lease, Outcome(kind, contacted=False), started, time.time(),
                           message=message)
        if lease.kind == ROBOTS:
            return self._fetch_robots(lease, stale, address, started)
        host = lease.record.host_key
        result = self._get(lease.record.url, address, host)
        if self._sets_a_cookie_and_comes_back(lease, result):
            # The page set a cookie and sent us back to itself, as sites that gate pages on
            # a cookie do: ask again once, after the host's delay (its lease is still ours).
            # The host's state is stable while its lease is out; reading a float needs no lock
            # (and robots.get could read the store, which only the frontier thread may).
            state = self.frontier.back.bound.get(lease.host_hash)
            crawl_delay = state.crawl_delay if state is not None else 0.0
            wait = self.frontier.politeness.delay(result.download_time, crawl_delay)
            if not self._closing.wait(wait):
                result = self._get(lease.record.url, address, host)
        return self._page(lease, result, started)

    def _sets_a_cookie_and_comes_back(self, lease: Lease, result: FetchResult) -> bool:
        return (
            self.cookies is not None and result.outcome == "redirect"
            and any(name.lower() == "set-cookie" for name, _ in result.headers)
            and self._redirects_to_self(lease.record.url, result.location)
        )

    def _redirects_to_self(self, url: str, location: str | None) -> bool:
        if not location:
            return False
        try:
            return canonicalize(location, url, self.cfg.scope.max_url_length) == url
        except URLError:
            return False

    def _get(self, url: str, address: str, host: str | None = None) -> FetchResult:
        """GET url, its cookies sent and kept when cookies are on, and archive the exchange."""
        host = host or host_key(url)
        via = self._via(host, time.time())[0] if self.proxy is not None else ""
        if self.cookies is None:
            result = self.fetcher.fetch(url, address, via=via)
        else:
            cookie = self.cookies.header(host, url)
            result = self.fetcher.fetch(url, address, cookie=cookie, via=via)
            self.cookies.keep(host, url, result.headers)
        if self.warc is not None and result.status is not None:
            request_line, request_headers = split_head(result.request_bytes)
            self.warc.write_exchange(
                url=url, ip=address, request_line=request_line,
                request_headers=request_headers, status_line=result.status_line,
                response_headers=result.headers, body=result.raw_body,
                truncated=truncation(result), date=result.started,
            )
        return result

    def _page(self, lease: Lease, result: FetchResult, started: float) -> Fetched:
        record = lease.record
        outcome = Outcome(result.outcome, result.status, retry_after=result.retry_after)
        fetched = Fetched(
            lease, outcome, started, result.finished, size=len(result.raw_body),
            message=result.message,
        )
        if result.outcome == "ok":
            cap = self.cfg.parse.max_links_per_page
            links = extract_links(
                record.url, result.body, result.content_type, self.cfg.scope.honour_nofollow,
                max_links=cap, max_url_length=self.cfg.scope.max_url_length,
            )
            fetched.refused_links.update(links.refused)
            if links.truncated:
                fetched.links_truncated = True
                fetched.message = f"links cut at {cap} (parse.max_links_per_page)"
                log.info("%s: links cut at %d (parse.max_links_per_page)", record.url, cap)
            found = self._header_links(record.url, result.headers, links.links, fetched)
            self._follow(fetched, found, record.depth + 1, record.hops)
        elif result.outcome == "redirect" and self._redirects_to_self(record.url, result.location):
            fetched.outcome = Outcome("redirect_to_self", result.status)
            fetched.message = "redirected to itself" + (
                " (setting a cookie: fetch.cookies is off)"
                if any(name.lower() == "set-cookie" for name, _ in result.headers) else ""
            )
        elif result.outcome == "redirect" and result.location:
            if record.hops >= self.cfg.fetch.max_redirect_hops:
                fetched.outcome = Outcome("redirect_hops", result.status)
                fetched.message = f"more than {self.cfg.fetch.max_redirect_hops} redirects"
            else:
                try:
                    target = canonicalize(
                        result.location, record.url, self.cfg.scope.max_url_length
                    )
                except URLError as exc:
                    fetched.refused_links[exc.reason] += 1
                    fetched.message = f"redirect to {exc}"
                else:
                    self._follow(fetched, [target], record.depth, record.hops + 1)
        return fetched

    def _header_links(
        self, url: str, headers: list[tuple[str, str]], links: list[str], fetched: Fetched
    ) -> list[str]:
        """The page's links as its response headers amend them: ``X-Robots-Tag: nofollow``
        (or ``none``) drops them as the robots meta tag does, and a ``Refresh`` header's
        target is followed as a meta refresh is, nofollow or not."""
        refresh: str | None = None
        tags: list[str] = []
        for name, value in headers:
            lower = name.lower()
            if lower == "x-robots-tag":
                tags.append(value)
            elif lower == "refresh" and refresh is None:
                refresh = refresh_target(url, value)
        if tags and self.cfg.scope.honour_nofollow and robots_nofollow(
            tags, self.robots_policy.agent
        ):
            if links:
                fetched.refused_links["nofollow"] += len(links)
            links = []
        if refresh is not None:
            try:
                target = canonicalize(refresh, url, self.cfg.scope.max_url_length)
            except URLError as exc:
                fetched.refused_links[exc.reason] += 1
            else:
                if target != url and target not in links:
                    links = [target, *links]
        return links

    def _follow(self, fetched: Fetched, urls: list[str], depth: int, hops: int) -> None:
        """Keep the links in scope that were not handed on a moment ago.

        A link joins ``recent`` only once in scope: scope depends on the page a
        link is found on, so one refused here may be followed from another page.
        """
        source, recent = fetched.lease.record.url, self.recent
        for url in urls:
            if url in recent:
                fetched.recent_links += 1
                continue
            reason = self.scope.check(url, source)
            if reason is not None:
                fetched.refused_links[reason] += 1
                fetched.refused.append((reason, url, depth))
                continue
            recent.add(url)
            fetched.links.append(UrlRecord(url, host_key(url), depth, source, hops))

    def _fetch_robots(
        self, lease: Lease, stale: RobotsRules | None, address: str, started: float
    ) -> Fetched:
        """Fetch robots.txt, following redirects on the same host only (hive.fetch.robots).

        Every hop is a request to this host under its lease, so each waits the
        host's delay after the last response, as its pages do. A hop to another
        host (another politeness key) is not requested: the 3xx stands, and the
        policy reads it as an unavailable robots.txt.
        """
        url, hops = lease.record.url, 0
        while True:
            result = self._get(url, address)
            target = (
                self.robots_policy.next_hop(url, result.location, hops)
                if result.outcome == "redirect" else None
            )
            if target is None:
                break
            try:
                target = canonicalize(target)
            except URLError:
                break
            if host_key(target) != lease.record.host_key:
                message = f"robots.txt redirects to another host: {target}"
                return self._robots_outcome(
                    lease, stale, result.status, b"", started, result.finished, message
                )
            wait = self.politeness.delay(result.download_time)
            time.sleep(max(0.0, result.finished + wait - time.time()))
            url, hops = target, hops + 1
        return self._robots_outcome(
            lease, stale, robots_status(result), result.body, started, result.finished,
            result.message, result.retry_after,
        )

    def _robots_outcome(
        self, lease: Lease, stale: RobotsRules | None, status: int | None, body: bytes,
        started: float, finished: float, message: str, retry_after: float | None = None,
    ) -> Fetched:
        gate = self._robots_parses if len(body) > BIG_ROBOTS else contextlib.nullcontext()
        with gate:
            decision = self.robots_policy.from_fetch(
                status, body, finished, attempt=lease.record.attempts + 1,
                retry_after=retry_after, stale=stale,
            )
        contacted = status is not None
        rules = decision.rules
        if decision.unreachable:
            outcome = Outcome("robots_unreachable", status, contacted, robots_until=rules.expires)
        elif decision.stale:
            outcome = Outcome("robots_stale", status, contacted, crawl_delay=rules.crawl_delay(),
                              robots_until=rules.expires)
        elif decision.retry_at is not None:
            outcome = Outcome(
                "robots_retry", status, contacted, retry_after=decision.retry_at - finished
            )
        else:
            outcome = Outcome(
                "robots_ok", status, contacted, crawl_delay=rules.crawl_delay(),
                robots_until=rules.expires,
            )
        keep = decision.final or decision.stale
        return Fetched(lease, outcome, started, finished, size=len(body), message=message,
                       rules=rules if keep else None)


def robots_status(result: FetchResult) -> int | None:
    """The status robots.txt's policy reads from a fetch: None unless the answer came whole.

    A 2xx whose body was cut by a failure (connection dropped, timeout) or could
    not be decoded is no robots.txt: taking it as an empty file would allow all.
    Cut at the size cap (``too_large``, ``decoded_too_large``) it is a file: its
    first ``robots.max_bytes`` are what RFC 9309 asks to parse.
    """
    if result.status is None:
        return None
    if result.outcome == "redirect" or result.outcome.startswith("http_"):
        return result.status
    if result.outcome in ("too_large", "decoded_too_large"):
        return result.status
    if result.outcome != "ok":
        return None
    codings = {
        c.strip().lower()
        for name, value in result.headers if name.lower() == "content-encoding"
        for c in value.split(",")
    } - {"", "identity"}
    if codings and result.raw_body and result.body == result.raw_body:
        return None  # a content coding the fetcher could not undo: the bytes are not the file
    return result.status
