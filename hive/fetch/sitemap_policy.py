"""What the crawl does with a sitemap's entries: which it may follow, and at what level (pure).

Two decisions, each one function:

* :func:`scope_refusal`, the sitemaps.org location rule: a sitemap speaks
  for URLs on its own scheme, host and port, at or below the directory it sits
  in (``http://a.test/catalog/sitemap.xml`` covers ``/catalog/…``, not
  ``/images/…``), which the same rule applies to the children of an index. Cross-submission: a URL
  elsewhere is allowed when the robots.txt of the URL's own origin names the
  sitemap, which proves its owner vouches for it. Anything else is refused
  with a reason (``sitemap_origin``, ``sitemap_path``): a sitemap on one host
  cannot inject URLs for another, nor a user directory for the whole site.
* :func:`sitemap_level`, the front-queue level of a listed URL: the
  configured ``base_level`` moved by the entry's ``priority`` (relative to the
  protocol's default 0.5, by up to ``priority_levels``), a ``lastmod`` within
  ``fresh_days`` (``fresh_levels`` up), and a ``changefreq`` of always, hourly
  or daily (``changefreq_levels`` up; yearly or never, as many down). The sum
  is bounded by ``max_adjust``: a site rates its pages against each other, not
  against other sites, so its own say moves a URL a little. The result is
  never level 1, which seeds and ``hive add`` hold, nor past the last level.
  A ``lastmod`` in the future is a claim, not freshness: it earns nothing.
"""

from __future__ import annotations

from collections.abc import Collection

from hive.config import SitemapsConfig
from hive.fetch.sitemaps import PageEntry

FREQUENT = frozenset({"always", "hourly", "daily"})
RARE = frozenset({"yearly", "never"})
TOP_LEVEL = 2  # level 1 belongs to seeds and `hive add`
DAY = 86400.0


def _origin_end(url: str) -> int:
    """Where a canonical URL's scheme://host[:port] ends (the index of its path's '/')."""
    start = url.find("://") + 3
    end = url.find("/", start)
    return len(url) if end < 0 else end


def scope_refusal(url: str, sitemap_url: str, named_by_target: Collection[str] = ()) -> str | None:
    """None if a sitemap at ``sitemap_url`` may list ``url`` (both canonical), else why not.

    ``named_by_target``: the sitemap URLs (canonical) that the robots.txt of
    ``url``'s origin names, for cross-submission.
    """
    if sitemap_url in named_by_target:
        return None
    origin = _origin_end(sitemap_url)
    if _origin_end(url) != origin or url[:origin] != sitemap_url[:origin]:
        return "sitemap_origin"
    query = sitemap_url.find("?", origin)
    directory = sitemap_url.rfind("/", origin, query if query >= 0 else len(sitemap_url))
    if directory < 0 or url.startswith(sitemap_url[: directory + 1]):
        return None
    return "sitemap_path"


def level_adjustment(entry: PageEntry, now: float, cfg: SitemapsConfig) -> int:
    """Levels an entry's own fields move it (negative: up), bounded by ``max_adjust``."""
    adjust = 0
    if entry.priority is not None:
        adjust -= round((entry.priority - 0.5) * 2 * cfg.priority_levels)
    if entry.lastmod is not None and 0 <= now - entry.lastmod <= cfg.fresh_days * DAY:
        adjust -= cfg.fresh_levels
    if entry.changefreq in FREQUENT:
        adjust -= cfg.changefreq_levels
    elif entry.changefreq in RARE:
        adjust += cfg.changefreq_levels
    return max(-cfg.max_adjust, min(cfg.max_adjust, adjust))


def sitemap_level(entry: PageEntry, now: float, cfg: SitemapsConfig, levels: int) -> int:
    """The front-queue level (a record's ``hint``) of a URL a sitemap lists."""
    level = cfg.base_level + level_adjustment(entry, now, cfg)
    return max(min(TOP_LEVEL, levels), min(levels, level))
