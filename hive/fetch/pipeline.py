"""The fetch pipeline: one lease, on a fetch thread, from the frontier to its Outcome.

lease → DNS (cache, ``--resolve`` overrides) → address guard (and the proxy's)
→ fetch through the one fetcher (a robots.txt lease: hive.fetch.robots_fetch), from
the host's first address or, when connecting to it fails, its next (``happy_eyeballs``
order, guard-passed, ``fetch.connect_attempts`` in all, each granted when address limits
are on; the one used is the WARC's ``WARC-IP-Address`` and the crawl log's ``address``)
→ each exchange to the sinks, in order (hive.fetch.sinks; the first, the WARC
sink, has its records in the kernel before the outcome is returned) → links
from HTML and headers, embeds from HTML and CSS → scope → ``Fetched``.
Every failure becomes an outcome kind; nothing raises out of ``run`` but a bug
or a required sink that failed (a disk that cannot take the WARC records).
The pipeline knows no output's format: it hands each exchange on.

**Sitemaps and feeds** (``sitemaps.mode`` other than ``off``). Where they
come from: the ``Sitemap:`` lines of every robots.txt read whole (kept with
its rules, hive.fetch.robots_cache), or ``/sitemap.xml`` when it names none and the
mode is ``robots+default``; seeds and ``hive add`` lines ``sitemap:<url>``; the
feeds a page announces (``<link rel=alternate>``). Each is a record of kind
``sitemap`` or ``feed`` handed on like a link (so one on another host goes to
that host's owner) and fetched under its host's politeness and robots.txt.
Its response is read as it streams (hive.fetch.sitemaps, hive.fetch.feeds),
within ``byte_cap(fetch.max_decoded_bytes)`` decoded bytes; a body cut at
``fetch.max_body_bytes`` (10 MB raw by default: a full 50 MB sitemap is served
gzipped at a few MB) is read up to the cut and ends ``sitemap_truncated``, its
entries before the cut taken. A child sitemap of an index is followed within
``sitemaps.max_index_depth`` and the sitemaps.org location rule (else refused,
``sitemap_depth`` or the rule's reason); past ``sitemaps.max_files_per_host``
children of one file, the rest are counted (``max_sitemaps_per_host``, the
frontier's reason when a host has its files) and dropped, no record each: a
file's children cost at most that many records. A listed page within the rule is
handed on at ``sitemap_level`` (its ``hint``); one outside it (another origin,
or above the sitemap's directory) is handed on as ``listed``, and its owner
decides at lease time (``FrontierGate.screen``), when its origin's robots.txt is known:
fetched if that robots.txt names the sitemap (cross-submission), else it ends
``refused`` with the rule's reason (``sitemap_origin``, ``sitemap_path``),
unfetched and out of the seen set (hive.fetch.gate). A feed's items are links.

A page's response that is a feed or a sitemap (by its Content-Type or root
element, hive.fetch.sniff) is read as one, whatever found its URL: a feed a page
links with ``<a href>`` as well as announcing it, a sitemap linked from a footer.
Such a sitemap is read at its page's depth (its entries one deeper, its children
within ``max_index_depth`` of it), so neither the crawl's depth nor the index
depth starts over; it is one page of its host, not one of its sitemap files, and
what it lists is bounded as any sitemap's is (the reader's limits, then the
frontier's: ``max_urls_per_host``, the listed pages of other origins vouched for
by their robots.txt, the child sitemaps by ``max_files_per_host``).

A fetch ends as one ``Fetched`` (hive.fetch.fetched): it is the Outcome the
frontier applies and it carries what the worker hands on (links, refusals,
robots.txt rules), so no second result is made per page. The client's
``FetchResult`` is the HTTP exchange it reads from.

**Which thread.** ``Pipeline`` runs on the worker's fetch threads, which share
one: ``run`` (a lease to its ``Fetched``) and ``prefetch``. What it holds is set
when it is built or safe to share between threads (the DNS cache, the fetcher's
pool, the cookie jars, the sinks, the recent links).
Before a lease reaches a fetch thread and after its ``Fetched`` comes back, the
worker's frontier thread runs the fetch room's other side, ``FrontierGate``
(hive.fetch.gate): it screens a lease by the robots.txt rules in its cache, the
only owner of those rules, and keeps what a fetch settled. A robots.txt lease is
fetched by ``RobotsFetch`` (hive.fetch.robots_fetch), on the same fetch thread.
A host's politeness clock runs from when its response finished arriving
(``finished``), as the frontier applies it.

**A recrawl** (``recrawl.plan``): ``prior`` reads what the prior crawls knew of a
page's URL (the worker's ``prior`` database, hive.core.prior); its request is then
conditional on the validators they saw, a 304 ends ``not_modified`` (the WARC sink
writes a server-not-modified revisit of the prior capture), and every answer is
classified as a change (``Fetched.change``: new, changed, unchanged, gone, moved).
Without a plan ``prior`` is None and a fetch pays nothing for it.

**Embeds** (page requisites: hive.fetch.requisites) are handed on as URLs like
links, through the frontier (robots.txt and politeness as for any URL), with the
hop ``E`` on their path (hive.core.record) and ranked at ``EMBED_LEVEL``, so a
page's requisites are fetched soon after it; at the page's own depth, so
``frontier.max_depth`` never refuses them; whatever nofollow says; kept or
refused by ``scope.embeds``. An embed's own embeds (a stylesheet's ``url()`` and
``@import``) follow until ``scope.max_embed_hops`` of them in a row; the links
found on an embed are not followed (counted as ``links/refused/on_embed``): an
embed may lie outside the scope, and a link scoped against it would leave it.
A redirect from an embed leads to an embed.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from hive.config import Config
from hive.core.lease import Lease, LeaseKind
from hive.core.politeness import Politeness
from hive.core.prior import MOVED, Prior, classify
from hive.core.recentlinks import recent_key
from hive.core.record import (
    FEED,
    HOP_EMBED,
    HOP_LINK,
    HOP_PREREQUISITE,
    HOP_REDIRECT,
    LISTED,
    SITEMAP,
    UrlRecord,
    embed_hops,
    extend_path,
    quantize,
)
from hive.core.record import PAGE as PAGE_RECORD
from hive.core.urls import canonicalize, host_key
from hive.errors import URLError
from hive.fetch.client import Fetcher, FetchResult
from hive.fetch.cookies import CookieJars, CookieLimits
from hive.fetch.dns import (
    Addresses,
    AddressGuard,
    DnsCache,
    Resolution,
    Resolver,
    happy_eyeballs,
)
from hive.fetch.feeds import FeedReader
from hive.fetch.fetched import Fetched
from hive.fetch.headers import refresh_target, robots_nofollow
from hive.fetch.parse import Scope, extract_links, media_type
from hive.fetch.requisites import EmbedBudget, css_embeds
from hive.fetch.robots_fetch import RobotsFetch
from hive.fetch.robots_policy import RobotsPolicy
from hive.fetch.robots_rules import RobotsRules
from hive.fetch.scoring import Page, Scorer
from hive.fetch.sinks import Exchange, Sinks
from hive.fetch.sitemap_policy import scope_refusal, sitemap_level
from hive.fetch.sitemaps import ChildSitemap, SitemapReader, byte_cap, within_depth
from hive.fetch.sniff import listing_kind
from hive.fetch.warc_records import digest_text
from hive.netspec import Proxy
from hive.outcome import Kind

if TYPE_CHECKING:
    from hive.core.recentlinks import RecentLinks

log = logging.getLogger(__name__)

# Sitemaps are leased before the pages of their host (level 1, as seeds): they are few
# (sitemaps.max_files_per_host) and say which pages matter.
SITEMAP_HINT = 1
# What a listing's outcome is: whole, cut at a limit, or at a fault.
_LISTING_KINDS = {
    SITEMAP: (Kind.SITEMAP_OK, Kind.SITEMAP_TRUNCATED, Kind.SITEMAP_ERROR),
    FEED: (Kind.FEED_OK, Kind.FEED_TRUNCATED, Kind.FEED_ERROR),
}
# What the scorer is called on: a page the link parser reads as HTML (hive.fetch.parse).
HTML_TYPES = frozenset({None, "text/html", "application/xhtml+xml"})
# The front-queue level of an embed: the highest, so a page's requisites are drawn soon
# after it and an archive holds the page and its requisites as they were at one moment.
EMBED_LEVEL = 1


def hostname(key: str) -> str:
    """The DNS name (or IP literal) of a host key: ``a.test:8080`` → ``a.test``."""
    if key.startswith("["):
        return key[1 : key.index("]")]
    return key.rsplit(":", 1)[0] if ":" in key else key


class Pipeline:
    """The fetch room's part on the fetch threads of one worker, which share it (see
    the module docstring; its frontier thread's part is ``FrontierGate``).

    ``crawl_delay`` reads a leased host's Crawl-delay; ``recent`` holds the links
    handed on a moment ago (the worker's, which forgets those it could not hand
    on); ``closing`` is set when the worker closes, to cut a wait short; ``sinks``:
    where each exchange goes (hive.fetch.sinks), which the worker owns and closes.
    """

    def __init__(
        self,
        cfg: Config,
        *,
        resolver: Resolver | None,
        sinks: Sinks,
        crawl_delay: Callable[[int], float],
        recent: RecentLinks,
        closing: threading.Event,
        prior: Callable[[str], Prior | None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.dns = DnsCache.from_config(cfg.dns, resolver)
        self.guard = AddressGuard.from_config(cfg.dns, cfg.fetch.proxy_allow_nets)
        self.proxy = Proxy.parse(cfg.fetch.proxy, cfg.fetch.no_proxy)
        self.politeness = Politeness.from_config(cfg.politeness)
        self.sitemaps = cfg.sitemaps.mode != "off"
        policy = RobotsPolicy.from_config(cfg)
        self.agent = policy.agent
        self.robots_fetch = RobotsFetch(policy, self.politeness, self._get, self.sitemaps)
        self.listing_bytes = byte_cap(cfg.fetch.max_decoded_bytes)
        self.fetcher = Fetcher.from_config(cfg.fetch)
        self.scope = Scope.from_config(cfg.scope)
        self.recent = recent
        # Links are evidence of their linking host (hive.frontier.evidence): the recent
        # links drop a host's repeats only (hive.core.recentlinks).
        self.inlinks = cfg.priority.inlink_levels > 0
        self.scorer = Scorer.from_config(cfg)
        self.cookies = (CookieJars(CookieLimits.from_config(cfg.fetch)) if cfg.fetch.cookies
                        else None)
        self.sinks = sinks
        self._to_sinks = bool(sinks)
        self._crawl_delay = crawl_delay
        self._closing = closing
        self._prior = prior

    def prefetch(self, host: str) -> Resolution:
        """Look a host's name up before its fetch needs it (a newly bound host, or one whose
        lease waits for its address to know its politeness, hive/procs/addresses.py)."""
        return self.dns.lookup(hostname(host), time.time())

    def resolved(self, host: str, now: float) -> Resolution | None:
        """A host's addresses if known without waiting on DNS (see ``prefetch``)."""
        return self.dns.cached(hostname(host), now)

    def run(self, lease: Lease, stale: RobotsRules | None, started: float,
            granted: str | None = None) -> Fetched:
        """Fetch one lease (``stale``: see ``stale_rules``) and say what became of it; only
        at ``granted`` if given (its address's grant; the others: ``Fetched.fallbacks``)."""
        addresses, failed, message = self._address(lease.record.host_key, started, granted)
        fetched = self._run(lease, stale, started, addresses[:1] if granted else addresses,
                            failed, message)
        fetched.fallbacks = addresses[1:] if granted and fetched.unconnected else ()
        return fetched

    def _run(self, lease: Lease, stale: RobotsRules | None, started: float,
             address: Addresses, failed: Kind, message: str) -> Fetched:
        if not address:
            if lease.kind == LeaseKind.ROBOTS and failed == Kind.DNS:
                return self.robots_fetch.outcome(lease, stale, None, b"", started, time.time(),
                                                 message)
            return Fetched(failed, contacted=False, lease=lease, started=started,
                           finished=time.time(), message=message)
        if lease.kind == LeaseKind.ROBOTS:
            fetched = self.robots_fetch.fetch(lease, stale, address, started)
            if self.sitemaps and fetched.kind is Kind.ROBOTS_OK and fetched.rules is not None:
                self._robots_sitemaps(fetched, fetched.rules.sitemaps)
            return fetched
        record = lease.record
        host, reached = record.host_key, (record.via, record.path)
        prior = self._prior(record.url) if self._prior is not None else None
        result = self._get(record.url, address, host, reached, prior)
        if self._sets_a_cookie_and_comes_back(lease, result):
            # The page set a cookie and sent us back to itself, as sites that gate pages on
            # a cookie do: ask again once, after the host's delay (its lease is still ours).
            wait = self.politeness.delay(result.download_time, self._crawl_delay(lease.host_hash))
            if not self._closing.wait(wait):
                result = self._get(record.url, address, host, reached, prior)
        fetched = self._page(lease, result, started)
        if self._prior is not None:
            self._changed(fetched, result, prior)
        return fetched

    @staticmethod
    def _changed(fetched: Fetched, result: FetchResult, prior: Prior | None) -> None:
        """A recrawl's fetch: what changed since the prior crawls (hive.core.prior), and a
        304 to its conditional request is ``not_modified``."""
        status = result.status
        if prior is not None and status == 304:
            fetched.kind, fetched.retry_after = Kind.NOT_MODIFIED, None
        digest = ""
        if prior is not None and status is not None and 200 <= status < 300:
            digest = digest_text(hashlib.sha1(result.raw_body).digest())
        found = classify(prior, status, digest, result.location)
        if found is not None:
            fetched.change, fetched.evidence = found
            if found[0] == MOVED and result.location:
                fetched.location = result.location

    def _address(self, host: str, now: float,
                 granted: str | None = None) -> tuple[Addresses, Kind, str]:
        """(addresses to try, outcome kind, message) for a host key: the kind is OK on
        success. The first address in ``happy_eyeballs`` order must pass the guard (else
        the host is refused, as ever); the others that pass follow it. A ``granted``
        address (hive/procs/addresses.py) is the first, whatever DNS says now: its grant
        is for it; the others follow (``run`` hands them back as fallbacks)."""
        resolution = self.dns.lookup(hostname(host), now)
        if granted is not None:
            others = happy_eyeballs(resolution.addresses) if resolution.ok else []
            order = [granted, *(a for a in others if a != granted)]
        elif not resolution.ok:
            return (), Kind.DNS, resolution.message
        else:
            order = happy_eyeballs(resolution.addresses)
        refusal = self.guard.check(order[0])
        if refusal is not None:
            return (), Kind.REFUSED_ADDRESS, refusal
        _, refusal = self._via(host, now)
        if refusal:
            return (), Kind.REFUSED_ADDRESS, refusal
        return (order[0], *(a for a in order[1:] if self.guard.check(a) is None)), Kind.OK, ""

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

    def _sets_a_cookie_and_comes_back(self, lease: Lease, result: FetchResult) -> bool:
        return (
            self.cookies is not None and result.outcome == Kind.REDIRECT
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

    def _get(
        self, url: str, addresses: Addresses, host: str | None = None,
        reached: tuple[str, str] = ("", HOP_PREREQUISITE), prior: Prior | None = None,
    ) -> FetchResult:
        """GET url, its cookies sent and kept when cookies are on, and hand the exchange to
        the sinks (the request as the fetcher sent it, byte for byte) with how url was
        reached (``reached``: the URL it was found on and its hop path; robots.txt is a
        prerequisite). A required sink's failure raises (hive.fetch.sinks). With a
        ``prior`` (a recrawl), the request is conditional on its validators."""
        host = host or host_key(url)
        via = self._via(host, time.time())[0] if self.proxy is not None else ""
        conditional = "".join(f"{line}\r\n" for line in prior.conditional_lines()) if prior else ""
        if self.cookies is None:
            result = self.fetcher.fetch(url, addresses[0], via=via, conditional=conditional,
                                        fallbacks=addresses[1:])
        else:
            cookie = self.cookies.header(host, url)
            result = self.fetcher.fetch(url, addresses[0], cookie=cookie, via=via,
                                        conditional=conditional, fallbacks=addresses[1:])
            self.cookies.keep(host, url, result.headers)
        if self._to_sinks and result.status is not None:
            self.sinks.write(Exchange.of(url, result.address, result, reached[0], reached[1],
                                         prior))
        return result

    def _page(self, lease: Lease, result: FetchResult, started: float) -> Fetched:
        record = lease.record
        fetched = Fetched(
            result.outcome, result.status, retry_after=result.retry_after, lease=lease,
            started=started, finished=result.finished, size=len(result.raw_body),
            message=result.message, mime=result.content_type or "", address=result.address,
            unconnected=result.unconnected,
        )
        listing = record.kind if record.kind in _LISTING_KINDS else self._sniff(record, result)
        if listing and (fetched.kind is Kind.OK or (
                fetched.kind in (Kind.TOO_LARGE, Kind.DECODED_TOO_LARGE) and result.body)):
            self._listing(fetched, result, listing)
        elif fetched.kind is Kind.OK:
            chain = embed_hops(record.path)
            budget = (
                EmbedBudget(self.cfg.parse.max_css_bytes, self.cfg.parse.max_embeds_per_page,
                            self.cfg.scope.max_url_length)
                if chain < self.cfg.scope.max_embed_hops else None
            )
            media, charset = media_type(result.content_type)
            if budget is not None and media == "text/css":
                embeds, refused = css_embeds(record.url, result.body, charset, budget)
                fetched.refused_links.update(refused)
            else:
                links, embeds, feeds = self._links(record, result, fetched, budget)
                if chain:
                    if links:
                        fetched.refused_links["on_embed"] += len(links)
                else:
                    score = 0
                    if self.scorer is not None and media in HTML_TYPES:
                        score = self._score(fetched, result, len(links))
                    path = extend_path(record.path, HOP_LINK)
                    self._follow(fetched, links, record.depth + 1, record.hops, path,
                                 score=score)
                    if feeds and self.sitemaps:
                        self._follow(fetched, feeds, record.depth + 1, 0, path, FEED)
            if embeds:
                before = len(fetched.links)
                self._follow(fetched, [url for url, _ in embeds], record.depth, record.hops,
                             extend_path(record.path, HOP_EMBED), embed=True)
                fetched.embeds = len(fetched.links) - before
        elif fetched.kind is Kind.REDIRECT and self._redirects_to_self(record.url, result.location):
            fetched.kind, fetched.retry_after = Kind.REDIRECT_TO_SELF, None
            fetched.message = "redirected to itself" + (
                " (setting a cookie: fetch.cookies is off)"
                if any(name.lower() == "set-cookie" for name, _ in result.headers) else ""
            )
        elif fetched.kind is Kind.REDIRECT and result.location:
            if record.hops >= self.cfg.fetch.max_redirect_hops:
                fetched.kind, fetched.retry_after = Kind.REDIRECT_HOPS, None
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
                    kept = record.kind if record.kind != LISTED else PAGE_RECORD
                    self._follow(fetched, [target], record.depth, record.hops + 1,
                                 extend_path(record.path, HOP_REDIRECT), kept,
                                 record.hint if kept else 0, embed=embed_hops(record.path) > 0)
        return fetched

    def _score(self, fetched: Fetched, result: FetchResult, links: int) -> int:
        """The page's score by the scorer (hive.fetch.scoring) on ``fetched``, and quantized
        for its links' records (0: none)."""
        assert self.scorer is not None
        fetched.score, fetched.scorer = self.scorer.score(Page(
            fetched.lease.record.url, result.status or 0, result.headers, result.content_type,
            result.body, links))
        return 0 if fetched.score is None else quantize(fetched.score)

    def _sniff(self, record: UrlRecord, result: FetchResult) -> str | None:
        """What a page's response is read as when it is a feed or a sitemap (hive.fetch.sniff):
        not an embed's, and only while sitemaps and feeds are read at all."""
        if not self.sitemaps or result.outcome is not Kind.OK or embed_hops(record.path):
            return None
        media = media_type(result.content_type)[0]
        return None if media == "text/html" else listing_kind(media, result.body)

    def _listing(self, fetched: Fetched, result: FetchResult, kind: str) -> None:
        """Read a sitemap's or feed's body (``kind``) and hand on what it lists (the module
        docstring)."""
        record = fetched.lease.record
        cut = fetched.kind is not Kind.OK
        whole, truncated, faulty = _LISTING_KINDS[kind]
        max_length = self.cfg.scope.max_url_length
        reader: SitemapReader | FeedReader
        if kind == FEED:
            reader = FeedReader(record.url, max_bytes=self.listing_bytes,
                                max_url_length=max_length)
            items = [item.url for item in reader.read(result.body)]
            fetched.listed = len(items)
            self._follow(fetched, items, record.depth + 1, 0, extend_path(record.path, HOP_LINK))
        else:
            reader = SitemapReader(record.url, record.depth, max_bytes=self.listing_bytes,
                                   max_url_length=max_length)
            self._sitemap_entries(fetched, reader, result.body, time.time())
        fetched.refused_links.update(reader.refused)
        fetched.kind, fetched.retry_after = whole, None
        note = fetched.message
        if reader.error is not None:
            fetched.kind, note = faulty, reader.error
        elif reader.truncated is not None or cut:
            fetched.kind, note = truncated, f"cut at {reader.truncated or note or 'a limit'}"
        fetched.message = f"{reader.kind or 'unknown'}: {fetched.listed} listed" + (
            f"; {note}" if note else "")
        if fetched.capped:
            fetched.message += (f"; {fetched.capped} child sitemaps past "
                                f"sitemaps.max_files_per_host dropped")

    def _sitemap_entries(
        self, fetched: Fetched, reader: SitemapReader, body: bytes, now: float
    ) -> None:
        """Child sitemaps within depth and the location rule, at most
        ``sitemaps.max_files_per_host`` of them (their host fetches no more files: the
        rest are counted in ``capped``, no record each); pages by the rule: within it at
        their sitemap level, outside it ``listed`` for their owner to vouch for."""
        url, sm = fetched.lease.record.url, self.cfg.sitemaps
        path = extend_path(fetched.lease.record.path, HOP_LINK)
        levels, children = self.cfg.frontier.levels, 0
        for entry in reader.read(body):
            fetched.listed += 1
            if isinstance(entry, ChildSitemap):
                reason = (scope_refusal(entry.loc, url) if within_depth(entry, sm.max_index_depth)
                          else "sitemap_depth")
                if reason is not None:
                    fetched.refused_links[reason] += 1
                    fetched.refused.append((reason, entry.loc, entry.depth))
                elif children >= sm.max_files_per_host:
                    fetched.capped += 1
                else:
                    children += 1
                    self._follow(fetched, [entry.loc], entry.depth, 0, path, SITEMAP,
                                 SITEMAP_HINT)
                continue
            kind = PAGE_RECORD if scope_refusal(entry.loc, url) is None else LISTED
            self._follow(fetched, [entry.loc], reader.depth + 1, 0, path, kind,
                         sitemap_level(entry, now, sm, levels))

    def _links(
        self, record: UrlRecord, result: FetchResult, fetched: Fetched, budget: EmbedBudget | None
    ) -> tuple[list[str], list[tuple[str, str]], list[str]]:
        """The links of a page, its headers' included, (with a budget) its embeds, and the
        feeds it announces."""
        cap = self.cfg.parse.max_links_per_page
        links = extract_links(
            record.url, result.body, result.content_type, self.cfg.scope.honour_nofollow,
            max_links=cap, max_url_length=self.cfg.scope.max_url_length, embeds=budget,
        )
        # Counter.update asks isinstance(Mapping) of an ABC first: not for the usual none.
        if links.refused:
            fetched.refused_links.update(links.refused)
        if links.embeds_refused:
            fetched.refused_links.update(links.embeds_refused)
        if links.truncated:
            fetched.links_truncated = True
            fetched.message = f"links cut at {cap} (parse.max_links_per_page)"
            log.info("%s: links cut at %d (parse.max_links_per_page)", record.url, cap)
        found = self._header_links(record.url, result.headers, links.links, fetched)
        return found, links.embeds, links.feeds

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
            tags, self.agent
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

    def _follow(
        self, fetched: Fetched, urls: list[str], depth: int, hops: int, path: str,
        kind: str = PAGE_RECORD, hint: int = 0, embed: bool = False, score: int = 0,
    ) -> None:
        """Keep the links (``embed``: the embeds) in scope that were not handed on a moment
        ago, as records of ``kind`` at level ``hint`` if not 0 (an embed's: EMBED_LEVEL);
        ``path`` is their hop path, ``score`` their page's quantized score (0: none).

        A link joins ``recent`` only once in scope: scope depends on the page a
        link is found on, so one refused here may be followed from another page.
        ``recent`` holds a URL by the kind it was handed on as, and by the host it
        was found on when in-links are evidence (``recent_key``).
        """
        source, recent = fetched.lease.record.url, self.recent
        linker = fetched.lease.record.host_key if self.inlinks else ""
        for url in urls:
            seen = recent_key(url, kind, linker) if kind or linker else url
            if seen in recent:
                fetched.recent_links += 1
                continue
            reason = self.scope.check(url, source, embed)
            if reason is not None:
                fetched.refused_links[reason] += 1
                fetched.refused.append((reason, url, depth))
                continue
            recent.add(seen)
            fetched.links.append(UrlRecord(
                url, host_key(url), depth, source, hops, 0, EMBED_LEVEL if embed else hint,
                kind, path, score,
            ))

    def _robots_sitemaps(self, fetched: Fetched, named: tuple[str, ...]) -> None:
        """Hand on the sitemaps a robots.txt names, or its origin's /sitemap.xml when it
        names none and the mode is ``robots+default``."""
        if not named and self.cfg.sitemaps.mode == "robots+default":
            named = (fetched.lease.record.url.removesuffix("robots.txt") + "sitemap.xml",)
        if named:
            self._follow(fetched, list(named), 0, 0,
                         extend_path(fetched.lease.record.path, HOP_LINK), SITEMAP, SITEMAP_HINT)

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = dict(self.dns.stats())
        out.update(self.fetcher.stats())
        if self.scorer is not None:
            out.update(self.scorer.stats())
        if self.cookies is not None:
            out.update(self.cookies.stats())
        return out

    def close(self) -> None:
        self.fetcher.close()
        if self.scorer is not None:
            self.scorer.close()
