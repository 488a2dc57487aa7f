"""What a page's response is read as: a feed or a sitemap, by its Content-Type or root element.

A URL first found as a link is queued as a page, and its response may be a feed or
a sitemap all the same (a feed linked with ``<a href>`` as well as announced, a
sitemap linked from a footer). How a URL was found must not stop it being read as
what it is (hive.frontier.seen), so the pipeline asks :func:`listing_kind` of
every page's response that is not HTML:

- ``application/rss+xml`` and ``application/atom+xml`` are feeds;
- any other XML type (``text/xml``, ``application/xml``, ``…+xml``) or none at all
  is read by its root element, within its first ``SNIFF_BYTES`` (after a byte order
  mark, the XML declaration, comments, processing instructions and a doctype):
  ``rss``, RSS 1.0's ``rdf:RDF`` and Atom's ``feed`` are feeds, ``urlset`` and
  ``sitemapindex`` sitemaps.

HTML is never sniffed, and neither is plain text (a text sitemap is a list of URLs
only because something named it one). The kinds returned are hive.core.record's.
"""

from __future__ import annotations

import re

from hive.core.record import FEED, SITEMAP

SNIFF_BYTES = 2048
FEED_TYPES = frozenset({"application/rss+xml", "application/atom+xml"})
_NAME = re.compile(rb"[A-Za-z_][\w.:-]*")
# What ends each kind of markup that may come before the root element.
_PROLOG = ((b"<?", b"?>"), (b"<!--", b"-->"), (b"<!", b">"))
_ROOTS = {b"rss": FEED, b"feed": FEED, b"rdf:rdf": FEED, b"urlset": SITEMAP,
          b"sitemapindex": SITEMAP}
_BOM = b"\xef\xbb\xbf"


def listing_kind(media: str | None, body: bytes) -> str | None:
    """FEED or SITEMAP if a response of this media type (lowercased, without parameters)
    and body is one, else None."""
    if media in FEED_TYPES:
        return FEED
    if media is not None and not (media.endswith("/xml") or media.endswith("+xml")):
        return None
    name = root_name(body[:SNIFF_BYTES])
    if name is None:
        return None
    name = name.lower()
    return _ROOTS.get(name) or _ROOTS.get(name.rpartition(b":")[2])


def root_name(head: bytes) -> bytes | None:
    """The root element's name (its prefix kept) if it starts within ``head``; one pass,
    each step past a piece of the prolog, so no input costs more than its length."""
    at = len(_BOM) if head.startswith(_BOM) else 0
    size = len(head)
    while at < size:
        while at < size and head[at] in b" \t\r\n":
            at += 1
        if head.startswith(b"<!DOCTYPE", at) or head.startswith(b"<!doctype", at):
            close, bracket = head.find(b">", at), head.find(b"[", at)
            if 0 <= bracket < close:  # an internal subset: it ends with "]>"
                close = head.find(b"]>", bracket)
                close = close + 1 if close >= 0 else -1
            if close < 0:
                return None
            at = close + 1
            continue
        for opening, closing in _PROLOG:
            if head.startswith(opening, at):
                close = head.find(closing, at + len(opening))
                if close < 0:
                    return None
                at = close + len(closing)
                break
        else:
            if not head.startswith(b"<", at):
                return None
            match = _NAME.match(head, at + 1)
            return match.group() if match is not None else None
    return None
