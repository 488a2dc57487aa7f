"""RSS and Atom feeds: the links of their items, read as a stream (hive.fetch.xmlstream).

This module owns what a fetched feed says. :class:`FeedReader` reads one
feed fed in pieces and yields a :class:`FeedItem` per item as it completes,
holding no more than one item's fields. (Discovery of feeds on HTML pages,
``<link rel=alternate type=application/rss+xml|atom+xml>``, is part of
hive.fetch.parse's walk: ``ExtractResult.feeds``.) Policy:

* **RSS 2.0** (and 0.9x): ``rss/channel/item``; its URL is ``link``, else a
  ``guid`` that is a permalink (``isPermaLink`` not "false"). Its date is
  ``pubDate`` (RFC 822).
* **RSS 1.0** (RDF): ``rdf:RDF/item`` and its ``link``, in the RSS 1.0 namespace.
* **Atom 1.0**: ``feed/entry``; its URL is the ``href`` of its first ``link``
  whose ``rel`` is absent or ``alternate``, resolved against the feed URL (an
  ``xml:base`` is not applied). Its date is ``updated``, else ``published``
  (RFC 3339, read as a W3C datetime).
* Bounds: at most ``MAX_ITEMS`` items (``truncated`` is ``max_items``), the
  decoded bytes the caller passes (``truncated`` is ``max_bytes``), and
  xmlstream's bounds on shape. An item without a usable URL is counted in
  ``refused`` by reason. Any other root element is an error; reading never raises.
"""

from __future__ import annotations

import email.utils
from collections import Counter
from dataclasses import dataclass

from hive.core.urls import canonicalize
from hive.errors import URLError
from hive.fetch.sitemaps import MAX_BYTES, w3c_datetime
from hive.fetch.xmlstream import Stop, StreamReader

MAX_ITEMS = 10_000  # real feeds carry tens of items; a few archives carry thousands
MAX_ELEMENTS = 500_000  # 50 per item of a full feed
MAX_FIELD = 128
ATOM = "http://www.w3.org/2005/Atom"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RSS1 = "http://purl.org/rss/1.0/"

# (root namespace, root name) -> (item depth, item "namespace name", field namespace)
_LAYOUTS = {
    ("", "rss"): (3, "item", ""),
    (RDF, "RDF"): (2, f"{RSS1} item", RSS1),
    (ATOM, "feed"): (2, f"{ATOM} entry", ATOM),
}


@dataclass(frozen=True, slots=True)
class FeedItem:
    """One item of a feed: its canonical URL and its date as epoch seconds, if any."""

    url: str
    published: float | None = None


def rfc822_datetime(text: str) -> float | None:
    """Epoch seconds of an RSS ``pubDate`` (RFC 822, as email dates); None if it is not one."""
    try:
        when = email.utils.parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return when.timestamp()


class FeedReader(StreamReader[FeedItem]):
    """Reads one feed fed in pieces (see the module policy).

    After reading: ``kind`` (``rss``, ``rdf``, ``atom`` or None), ``entries``
    (items yielded), ``refused`` (items dropped, by reason), ``truncated``, ``error``.
    """

    def __init__(
        self, url: str, *, max_items: int = MAX_ITEMS, max_bytes: int = MAX_BYTES,
        max_url_length: int = 2048,
    ) -> None:
        super().__init__(max_bytes=max_bytes, max_elements=MAX_ELEMENTS)
        self.url = url
        self.max_items = max_items
        self.max_url_length = max_url_length
        self.kind: str | None = None
        self.entries = 0
        self.refused: Counter[str] = Counter()
        self._item_depth = 0
        self._item_name = ""
        self._ns = ""
        self._fields: dict[str, str] = {}

    def start(self, depth: int, name: str, attrs: dict[str, str]) -> int:
        namespace, _, local = name.rpartition(" ")
        if depth == 1:
            layout = _LAYOUTS.get((namespace, local))
            if layout is None:
                raise Stop(f"not a feed: the root element is {local!r}")
            self.kind = {"RDF": "rdf", "feed": "atom"}.get(local, "rss")
            self._item_depth, self._item_name, self._ns = layout
            return 0
        if depth == self._item_depth and name == self._item_name:
            if self.entries + sum(self.refused.values()) >= self.max_items:
                raise Stop("max_items", truncated=True)
            self._fields = {}
        elif depth == self._item_depth + 1 and namespace == self._ns:
            if self.kind == "atom" and local == "link":
                rel = attrs.get("rel", "alternate").strip().lower()
                if rel == "alternate" and "link" not in self._fields:
                    self._fields["link"] = attrs.get("href", "")
            elif local in ("link", "guid"):
                if local == "guid" and attrs.get("isPermaLink", "").strip().lower() == "false":
                    return 0
                return self.max_url_length
            elif local in ("pubDate", "updated", "published"):
                return MAX_FIELD
        return 0

    def end(self, depth: int, name: str, text: str | None) -> None:
        if depth == self._item_depth + 1 and text is not None:
            local = name.rpartition(" ")[2]
            self._fields.setdefault(local, text)
        elif depth == self._item_depth and name == self._item_name:
            self._item(self._fields)
            self._fields = {}

    def _item(self, fields: dict[str, str]) -> None:
        raw = (fields.get("link") or fields.get("guid") or "").strip()
        if not raw:
            self.refused["no_link"] += 1
            return
        try:
            url = canonicalize(raw, self.url, self.max_url_length)
        except URLError as exc:
            self.refused[exc.reason] += 1
            return
        if self.kind == "rss":
            when = rfc822_datetime(fields["pubDate"]) if "pubDate" in fields else None
        else:
            stamp = fields.get("updated") or fields.get("published")
            when = w3c_datetime(stamp) if stamp else None
        self.entries += 1
        self.items.append(FeedItem(url, when))
