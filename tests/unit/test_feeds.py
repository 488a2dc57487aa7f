"""Feeds: RSS 2.0, RSS 1.0 and Atom item links, hostile input, and discovery on HTML pages."""

from __future__ import annotations

import gzip

from hive.fetch.feeds import MAX_ITEMS, FeedItem, FeedReader, rfc822_datetime
from hive.fetch.parse import MAX_FEEDS, extract_links
from hive.testweb.sitemaps import POSTS, SitemapWeb

FEED = "http://a.test/feed"


def read(body: bytes, **kwargs: int) -> tuple[list[FeedItem], FeedReader]:
    reader = FeedReader(FEED, **kwargs)
    return list(reader.read(body)), reader


def test_rss2_links_guids_and_dates() -> None:
    body = b"""<?xml version="1.0"?>
<!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN"
 "http://my.netscape.com/publish/formats/rss-0.91.dtd">
<rss version="2.0"><channel><title>a &nbsp; b</title><link>http://a.test/</link>
<item><link>http://a.test/1</link><guid>http://a.test/g1</guid>
<pubDate>Mon, 01 Jan 2024 00:00:00 GMT</pubDate></item>
<item><guid>http://a.test/2</guid><pubDate>whenever</pubDate></item>
<item><guid isPermaLink="false">tag:a.test,2024:3</guid></item>
<item><link>javascript:void(0)</link></item>
</channel></rss>"""
    items, reader = read(body)
    assert items == [FeedItem("http://a.test/1", 1704067200.0), FeedItem("http://a.test/2")]
    assert reader.kind == "rss" and reader.error is None
    assert reader.refused == {"no_link": 1, "scheme": 1}


def test_atom_alternate_links_resolved_against_the_feed() -> None:
    body = b"""<feed xmlns="http://www.w3.org/2005/Atom"><link href="/"/>
<entry><link rel="edit" href="/edit/1"/><link href="/post/1"/><link href="/post/other"/>
<published>2023-12-31T00:00:00Z</published><updated>2024-01-01T00:00:00Z</updated></entry>
<entry><link rel="alternate" href="http://b.test/2"/><published>2024-01-01</published></entry>
<entry><link rel="enclosure" href="/a.mp3"/></entry></feed>"""
    items, reader = read(body)
    assert items == [FeedItem("http://a.test/post/1", 1704067200.0),
                     FeedItem("http://b.test/2", 1704067200.0)]
    assert reader.kind == "atom" and reader.refused == {"no_link": 1}


def test_rss1_rdf_items() -> None:
    body = b"""<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
 xmlns="http://purl.org/rss/1.0/"><channel><link>http://a.test/</link></channel>
<item><link>http://a.test/r</link></item></rdf:RDF>"""
    items, reader = read(body)
    assert items == [FeedItem("http://a.test/r")] and reader.kind == "rdf"


def test_gzipped_feed_and_item_limit() -> None:
    body = ("<rss><channel>" + "".join(f"<item><link>/{i}</link></item>" for i in range(30))
            + "</channel></rss>").encode()
    items, reader = read(gzip.compress(body), max_items=20)
    assert len(items) == 20 and reader.truncated == "max_items"
    assert MAX_ITEMS >= 1000


def test_not_a_feed_and_broken_feeds() -> None:
    items, reader = read(b"<html><body>moved</body></html>")
    assert items == [] and reader.error == "not a feed: the root element is 'html'"
    items, reader = read(b"<rss><channel><item><link>/1</link></item><item><link>/2")
    assert items == [FeedItem("http://a.test/1")] and reader.error is not None
    items, reader = read(b"plain text")
    assert items == [] and reader.error == "not an XML document"


def test_entity_expansion_in_a_feed_is_refused() -> None:
    body = b"""<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY a "aaaaaaaaaa">
<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><rss><channel><item><link>/&b;</link>
</item></channel></rss>"""
    items, reader = read(body)
    assert items == [] and reader.error is not None and "DTD" in reader.error


def test_rfc822_dates() -> None:
    assert rfc822_datetime("Mon, 01 Jan 2024 01:00:00 +0100") == 1704067200.0
    assert rfc822_datetime("not a date") is None


def test_feed_discovery_on_html_pages() -> None:
    html = (b'<link rel="alternate" type="application/rss+xml" href="/feed.rss">'
            b'<link rel="Alternate" type="Application/Atom+XML" href="atom.xml">'
            b'<link rel="alternate" type="application/rss+xml" href="javascript:x">'
            b'<link rel="alternate" type="text/html" href="/fr/">'
            b'<link rel="stylesheet" type="application/rss+xml" href="/s.css">'
            b'<a href="/x">x</a>')
    result = extract_links("http://a.test/dir/", html, "text/html")
    assert result.feeds == ["http://a.test/feed.rss", "http://a.test/dir/atom.xml"]
    assert sorted(result.links) == ["http://a.test/fr/", "http://a.test/x"]
    assert result.refused == {"scheme": 1}
    nofollow = b'<meta name="robots" content="nofollow">' + html
    assert extract_links("http://a.test/dir/", nofollow, "text/html").feeds == []
    many = b"".join(b'<link rel="alternate" type="application/atom+xml" href="/f%d">' % i
                    for i in range(100))
    assert len(extract_links("http://a.test/", many, "text/html").feeds) == MAX_FEEDS


def test_testweb_feeds_host() -> None:
    web = SitemapWeb(port=8080)
    host = web.host("feeds")
    home = web.respond(host, "/")
    assert home is not None
    feeds = extract_links(web.url("feeds", "/"), home.body, home.content_type).feeds
    assert feeds == [web.url("feeds", "/feed.rss"), web.url("feeds", "/feed.atom")]
    for url in feeds:
        doc = web.respond(host, "/" + url.split("/", 3)[3])
        assert doc is not None
        reader = FeedReader(url)
        assert [item.url for item in reader.read(doc.body)] == web.listed("feeds")
        assert reader.entries == POSTS and reader.error is None
