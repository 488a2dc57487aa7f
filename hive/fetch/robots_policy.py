"""robots.txt policy (RFC 9309): what one fetch of robots.txt settles for its origin.

This module never fetches: a fetch thread fetches ``/robots.txt`` under the
host's politeness (hive.fetch.robots_fetch) and hands the outcome to
``RobotsPolicy.from_fetch``, which says what rules stand (hive.fetch.robots_rules)
and whether and when to try again. Rules are kept per **origin** (scheme, host and
port, RFC 9309 section 2.3): ``http://a.test`` and ``https://a.test`` share a
politeness key but not their robots.txt. The status policy, section 2.3.1:

- **2xx, read whole**: the first ``max_bytes`` bytes are parsed (RFC 9309 asks
  for at least 500 KiB). A file cut there loses its last, partial line too, so
  a truncated ``Allow: /private-stuff`` cannot become ``Allow: /``. A UTF-8 byte
  order mark is stripped; invalid UTF-8 is replaced, never fatal. A 2xx whose
  body did not arrive whole (the connection dropped mid-body, a timeout) or
  could not be decoded (corrupt gzip, an unknown content coding) is no file:
  the worker reports it as unreachable (``status=None``), never as empty.
- **3xx**: the fetch (hive.fetch.robots_fetch) follows redirects on the same
  host (host and port, the politeness key), up to ``max_redirects`` hops, each hop waiting the
  host's delay (``RobotsPolicy.next_hop``). A hop to another host is not
  followed: it would be a request to that host outside its lease, its delay
  and its own rules (30 hosts redirecting to one victim would put 30 requests
  in flight there at once). It is read as section 2.3.1.2 reads a chain too
  long to follow: the file is unavailable, allow all. Nothing is lost for the
  common case, a host that redirects everything elsewhere (to ``www.`` or to
  https on another port): its pages redirect too, and what they lead to is
  fetched under the target host's own robots.txt. What is given up: a host that
  serves its pages itself but keeps its robots.txt on another host is crawled
  as if it had none. A 3xx that reaches ``from_fetch`` (too many hops, no usable
  Location) is likewise unavailable.
- **4xx other than 429**: unavailable, allow all.
- **429, 5xx, any other status, timeout or unreachable** (``status=None``):
  disallow all and retry. Try ``n`` (counting from 1) that fails is retried
  ``retry_delay * 2**(n-1)`` seconds later, or after the answer's
  ``Retry-After`` if that is longer (at most ``cache_ttl`` either way), until
  ``tries`` tries in all have failed: the origin is then ``unreachable`` (its
  URLs end as ``robots_unreachable``) for ``unreachable_retry`` seconds, after
  which robots.txt is tried again (``tries`` more times), so a host that comes
  back is crawled again. The caller counts the tries (it keeps them with the
  host's state).
- **A stale copy** (section 2.4): when the refetch of an expired file fails,
  the copy that expired is used instead of disallowing all, for at most
  ``max_stale`` seconds past its expiry, while the tries go on with the same
  back-off (``unreachable_retry`` apart once ``tries`` have failed).

Definitive answers are kept for ``cache_ttl`` (RFC 9309: at most 24 hours).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from hive.config import Config
from hive.fetch.robots_rules import RobotsRules, product_token


def _clip(body: bytes, max_bytes: int) -> bytes:
    if len(body) <= max_bytes:
        return body
    cut = body[:max_bytes]
    end = max(cut.rfind(b"\n"), cut.rfind(b"\r"))
    return cut[: end + 1]



@dataclass(frozen=True, slots=True)
class RobotsDecision:
    """What one robots.txt fetch settles: rules to use, and maybe when to try again.

    ``retry_at`` is set for a transient failure: ``rules`` then disallow all
    (or, ``stale``, are the expired copy) until that time, when the caller
    fetches robots.txt again.
    """

    rules: RobotsRules
    retry_at: float | None = None
    stale: bool = False

    @property
    def final(self) -> bool:
        return self.retry_at is None

    @property
    def unreachable(self) -> bool:
        return self.rules.kind == "unreachable"


@dataclass(frozen=True, slots=True)
class RobotsPolicy:
    """The RFC 9309 status policy of the module docstring, with its config values."""

    agent: str
    cache_ttl: float
    max_bytes: int
    max_redirects: int
    tries: int
    retry_delay: float
    unreachable_retry: float = 3600.0
    max_stale: float = 86400.0

    @classmethod
    def from_config(cls, cfg: Config) -> RobotsPolicy:
        return cls(
            agent=product_token(cfg.fetch.user_agent),
            cache_ttl=cfg.robots.cache_ttl,
            max_bytes=cfg.robots.max_bytes,
            max_redirects=cfg.robots.max_redirects,
            tries=cfg.robots.tries,
            retry_delay=cfg.robots.retry_delay,
            unreachable_retry=cfg.robots.unreachable_retry,
            max_stale=cfg.robots.max_stale,
        )

    def from_fetch(
        self, status: int | None, body: bytes, now: float, attempt: int,
        retry_after: float | None = None, stale: RobotsRules | None = None,
        sitemaps: tuple[str, ...] = (),
    ) -> RobotsDecision:
        """The decision for try number ``attempt`` (from 1) that got ``status``.

        ``status`` is None when no whole response came (timeout, refused, reset,
        DNS, a body cut or undecodable). ``retry_after``: the answer's
        Retry-After, in seconds from ``now``, if any. ``stale``: the expired
        rules of this origin, if the caller still has them. ``sitemaps``: what the
        body's ``Sitemap:`` lines name, kept with rules parsed from it.
        """
        if attempt < 1:
            raise ValueError(f"attempt counts from 1, got {attempt}")
        expires = now + self.cache_ttl
        keep = expires + self.max_stale
        if status is not None and 200 <= status < 300:
            body = _clip(body, self.max_bytes)
            return RobotsDecision(RobotsRules.parse(body, self.agent, expires, keep, sitemaps))
        if status is not None and 300 <= status < 500 and status != 429:
            return RobotsDecision(RobotsRules("allow_all", self.agent, expires, keep))
        if attempt >= self.tries:
            wait = self.unreachable_retry
        else:
            wait = min(max(self.retry_delay * 2 ** (attempt - 1), retry_after or 0.0),
                       self.cache_ttl)
        if stale is not None and stale.usable_stale(now):
            retry_at = min(now + wait, stale.stale_until)
            return RobotsDecision(stale.restamped(retry_at), retry_at, stale=True)
        if attempt >= self.tries:
            return RobotsDecision(RobotsRules("unreachable", self.agent, now + wait))
        return RobotsDecision(RobotsRules("disallow_all", self.agent, now + wait), now + wait)

    def next_hop(self, url: str, location: str | None, hops: int) -> str | None:
        """Where a robots.txt redirect leads, or None to stop and hand the 3xx over.

        ``hops`` counts the redirects already followed; the target must be http(s).
        Whether a hop to another host is taken is the caller's (it is not).
        """
        if hops >= self.max_redirects or not location or not location.strip():
            return None
        try:
            target = urljoin(url, location.strip())
            scheme = urlsplit(target).scheme
        except ValueError:
            return None
        return target if scheme in ("http", "https") else None

