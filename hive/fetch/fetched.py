"""What a lease ends as: ``Fetched``, and what the frontier gate says of one (``Screened``).

A fetch ends as one ``Fetched``: it is the Outcome the frontier applies and it
carries what the worker hands on (links, refusals, robots.txt rules), so no
second result is made per page. The fetch threads make it (hive.fetch.pipeline,
hive.fetch.robots_fetch), and so does the frontier gate for a lease it refuses
unfetched (hive.fetch.gate); the frontier thread applies it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from hive.core.lease import Lease
from hive.core.record import UrlRecord
from hive.fetch.robots_rules import RobotsRules
from hive.outcome import Outcome


@dataclass(slots=True, kw_only=True)
class Fetched(Outcome):
    """A lease's one result: its Outcome, and what the worker hands on from it."""

    lease: Lease
    started: float
    finished: float
    size: int = 0
    message: str = ""
    mime: str = ""  # the response's Content-Type, for the crawl log
    address: str = ""  # the address the fetch connected to (its last try), for the crawl log
    # The host's addresses left to try, in order, when the fetch could not connect to the
    # one its address politeness granted (hive/procs/addresses.py: each waits for a grant
    # of its own); empty otherwise.
    fallbacks: tuple[str, ...] = ()
    unconnected: bool = False  # its last request could not connect (FetchResult's)
    links: list[UrlRecord] = field(default_factory=list)
    refused_links: Counter[str] = field(default_factory=Counter)
    # The links refused by scope or a trap guard, to be counted by host and logged: (reason,
    # url, depth).
    refused: list[tuple[str, str, int]] = field(default_factory=list)
    recent_links: int = 0
    links_truncated: bool = False
    embeds: int = 0  # of ``links``, how many are embeds
    rules: RobotsRules | None = None
    reason: str = ""  # why a lease was refused unfetched (the crawl log's reason)
    listed: int = 0  # URLs a sitemap or feed listed (before scope and the recent links)
    # Child sitemaps an index listed past sitemaps.max_files_per_host (same origin as the
    # index, which the location rule asks): counted as refused, no record each.
    capped: int = 0
    # A recrawl's (hive.core.prior.classify): what changed since the prior crawls, and how
    # that was known; "" in a crawl without a plan, or when the answer says nothing.
    change: str = ""
    evidence: str = ""
    location: str = ""  # a moved URL's redirect target
    # The page's score by the scorer (priority.scorer, hive.fetch.scoring), or None; and why
    # the scorer gave none when it failed (``error``, ``timeout``, ``bad_value``, ``off``).
    score: float | None = None
    scorer: str = ""


class Verdict(Enum):
    """What ``screen`` says of a lease it does not end: fetch it, or give it back (its
    origin's rules are lost from the cache)."""

    FETCH = "fetch"
    LOST = "lost"


# What ``FrontierGate.screen`` says of a lease: a verdict, or the outcome it ends with
# unfetched.
Screened = Verdict | Fetched
