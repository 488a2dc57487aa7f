"""hive.fetch.sniff: what a page's response is read as, by its Content-Type or root element."""

from __future__ import annotations

import pytest

from hive.core.record import FEED, SITEMAP
from hive.fetch.sniff import SNIFF_BYTES, listing_kind

RSS = b'<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel></channel></rss>'


@pytest.mark.parametrize(("media", "body", "kind"), [
    ("application/rss+xml", b"anything", FEED),
    ("application/atom+xml", b"", FEED),
    ("text/xml", RSS, FEED),
    ("application/xml", b'\xef\xbb\xbf<!-- a --><?pi x?><feed xmlns="a">', FEED),
    ("application/rdf+xml", b"<rdf:RDF xmlns:rdf='x'>", FEED),
    ("text/xml", b"<!DOCTYPE urlset [<!ENTITY a 'b'>]>\n<urlset>", SITEMAP),
    (None, b"  <sitemapindex xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>", SITEMAP),
    ("application/xml", b"<sm:urlset xmlns:sm='x'>", SITEMAP),
    # Not listings: HTML, plain text, other XML, a root past the window.
    ("text/html", RSS, None),
    ("text/plain", RSS, None),
    ("application/xml", b"<svg xmlns='http://www.w3.org/2000/svg'>", None),
    ("application/xhtml+xml", b"<?xml version='1.0'?><html>", None),
    ("text/xml", b"<!--" + b"x" * SNIFF_BYTES + b"--><rss>", None),
    ("text/xml", b"", None),
    ("image/png", b"\x89PNG", None),
])
def test_listing_kind(media: str | None, body: bytes, kind: str | None) -> None:
    assert listing_kind(media, body) == kind


@pytest.mark.parametrize("body", [
    b" " * SNIFF_BYTES + b"<rss>", b" \n" * 1000 + b"x", b"<!--" * 600, b"<?" * 1000,
    b"<!DOCTYPE [" * 180, b" <!-- -->" * 300 + b"<", b"<?x?>" * 500,
])
def test_a_prolog_past_the_window_is_not_a_listing(body: bytes) -> None:
    """Each input is read in one pass (a regular expression over the prolog took seconds
    for 26 spaces and a stray byte, doubling with each space)."""
    assert listing_kind("text/xml", body) is None
