"""What became of a lease: its outcome kind (one enumerated type) and the Outcome itself.

Every module that names an outcome names a ``Kind``: the fetcher's failures,
the worker's refusals, the frontier's retry and robots.txt policy, the crawl
log, the config's ``frontier.retry_outcomes`` and
``politeness.host_failure_outcomes``, and the supervisor's error count. A
``Kind`` is a ``str`` whose value is the spelling on disk, in the crawl log,
in stats keys and on the wire, unchanged from when kinds were plain strings:
``f"frontier/done/{kind}"`` is ``frontier/done/ok``, and a store written
before reads the same.

Besides the named kinds, a response with a status that is not a success nor a
followed redirect is ``http_<status>`` (``http_404``, ``http_503``; any status
from 100 to 999, as http.client reads them). Those are made on first use
rather than listed (900 members would cost every process start ~30 ms).

Each kind says of itself:

- ``retryable``: a page's fetch may end this way for a passing reason, so
  ``frontier.retry_outcomes`` may name it (and ``handoff_failed`` is always
  retried); the others are settled answers or the robots.txt lease's own.
- ``error``: a URL that ends this way counts as an error in the batch's stats
  (everything but ``ok``, ``redirect``, ``robots``, ``denied``, a robots.txt
  lease's successes, ``not_modified``, and a sitemap's or feed's read whole or cut at a limit:
  ``sitemap_error`` and ``feed_error``, a file that did not parse to its end, are errors).
- ``final``: a URL that ends this way once is done, whatever the config
  retries: neither retryable nor one of a robots.txt lease's own outcomes
  (``robots_ok``, ``robots_stale``, ``robots_retry``, which settle the lease
  and never a URL).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

_HTTP = re.compile(r"http_[1-9][0-9][0-9]")


class Kind(StrEnum):
    """An outcome kind; its value is its spelling everywhere outside the process."""

    # The fetcher's (hive.fetch.client): a response, or why none came whole.
    OK = "ok"
    REDIRECT = "redirect"
    DNS = "dns"
    CONNECT = "connect"
    TIMEOUT = "timeout"
    TLS = "tls"
    TOO_LARGE = "too_large"
    DECODED_TOO_LARGE = "decoded_too_large"
    PROTOCOL = "protocol"
    ERROR = "error"
    # The fetch pipeline's (hive.fetch.pipeline).
    REFUSED_ADDRESS = "refused_address"
    REDIRECT_TO_SELF = "redirect_to_self"
    REDIRECT_HOPS = "redirect_hops"
    HANDOFF_FAILED = "handoff_failed"
    # robots.txt: a page its rules disallow, an origin that never answered, and the
    # outcomes of a robots.txt lease itself.
    ROBOTS = "robots"
    ROBOTS_UNREACHABLE = "robots_unreachable"
    ROBOTS_OK = "robots_ok"
    ROBOTS_STALE = "robots_stale"
    ROBOTS_RETRY = "robots_retry"
    # A host taken out of the crawl: by the operator (hive deny), or for its Crawl-delay.
    DENIED = "denied"
    CRAWL_DELAY_TOO_LONG = "crawl_delay_too_long"
    # A URL refused before it was queued (the crawl log's line for it; its reason says why),
    # or, leased, before it was fetched (a page listed by a sitemap its origin does not vouch
    # for, hive.fetch.gate).
    REFUSED = "refused"
    # A sitemap or feed lease (hive.fetch.pipeline) whose response was read: whole, cut at a
    # limit (what came before the cut was taken), or at a fault (likewise).
    SITEMAP_OK = "sitemap_ok"
    SITEMAP_TRUNCATED = "sitemap_truncated"
    SITEMAP_ERROR = "sitemap_error"
    FEED_OK = "feed_ok"
    FEED_TRUNCATED = "feed_truncated"
    FEED_ERROR = "feed_error"
    # A recrawl's conditional request answered 304 Not Modified (hive.fetch.pipeline): the
    # page as the prior crawl had it, archived as a revisit of that capture.
    NOT_MODIFIED = "not_modified"

    @classmethod
    def _missing_(cls, value: object) -> Kind | None:
        """``http_<status>``, made once and kept with the named kinds."""
        if not isinstance(value, str) or _HTTP.fullmatch(value) is None:
            return None
        member = str.__new__(cls, value)
        member._name_ = value.upper()
        member._value_ = value
        known: dict[Any, Any] = cls._value2member_map_
        return known.setdefault(value, member)  # type: ignore[no-any-return]

    @classmethod
    def http(cls, status: int) -> Kind:
        """The kind of a response with this status that is not a success nor a redirect."""
        return cls(f"http_{status}")

    @property
    def retryable(self) -> bool:
        return self in _RETRYABLE or self.startswith("http_")

    @property
    def error(self) -> bool:
        return self not in _NOT_ERRORS

    @property
    def final(self) -> bool:
        return not self.retryable and self not in _ROBOTS_LEASE


_RETRYABLE = frozenset({
    Kind.DNS, Kind.CONNECT, Kind.TIMEOUT, Kind.TLS, Kind.TOO_LARGE, Kind.DECODED_TOO_LARGE,
    Kind.PROTOCOL, Kind.ERROR, Kind.HANDOFF_FAILED,
})
_NOT_ERRORS = frozenset({
    Kind.OK, Kind.REDIRECT, Kind.ROBOTS, Kind.DENIED, Kind.ROBOTS_OK, Kind.ROBOTS_STALE,
    Kind.SITEMAP_OK, Kind.SITEMAP_TRUNCATED, Kind.FEED_OK, Kind.FEED_TRUNCATED,
    Kind.NOT_MODIFIED,
})
_ROBOTS_LEASE = frozenset({Kind.ROBOTS_OK, Kind.ROBOTS_STALE, Kind.ROBOTS_RETRY})
_BY_VALUE: dict[str, Kind] = Kind._value2member_map_  # type: ignore[assignment]


def kind(value: str) -> Kind:
    """The Kind spelled ``value`` (ValueError if none is): a dict probe once it was seen,
    which is what a fetch thread pays per page."""
    found = _BY_VALUE.get(value)
    return found if found is not None else Kind(value)


def parse_kinds(key: str, values: list[str]) -> frozenset[Kind]:
    """The kinds a config list names; ValueError naming the key, the bad value and the
    valid kinds. Only ``retryable`` kinds may be retried (``frontier.retry_outcomes``)
    or count as the host's failures (``politeness.host_failure_outcomes``)."""
    out = set()
    for value in values:
        try:
            found = kind(value)
        except ValueError:
            found = None
        if found is None or not found.retryable:
            valid = ", ".join(k.value for k in Kind if k.retryable)
            why = "not an outcome kind" if found is None else "not a kind a fetch can retry"
            raise ValueError(
                f"{key}: {value!r} is {why}; valid kinds: {valid}, http_<status> (100-999)"
            )
        out.add(found)
    return frozenset(out)


@dataclass(slots=True)
class Outcome:
    """What became of a lease. ``contacted`` is False when no request reached the host;
    ``retry_after``, ``crawl_delay`` and ``robots_until`` are what the host's next turn
    and its robots.txt state take from it."""

    kind: Kind
    status: int | None = None
    contacted: bool = True
    retry_after: float | None = None
    crawl_delay: float | None = None
    robots_until: float | None = None
