"""Sitemaps: formats, limits, hostile input, the scope rule and the level mapping."""

from __future__ import annotations

import gzip
import re
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hive import config
from hive.errors import ConfigError
from hive.fetch.sitemap_policy import level_adjustment, scope_refusal, sitemap_level
from hive.fetch.sitemaps import (
    MAX_ELEMENTS,
    MAX_URLS,
    ChildSitemap,
    PageEntry,
    SitemapReader,
    byte_cap,
    robots_sitemaps,
    sitemap_priority,
    w3c_datetime,
    within_depth,
)
from hive.fetch.xmlstream import MAX_DEPTH, MAX_TOKEN
from hive.testweb.sitemaps import BROKEN_AFTER, FRESH_AGE, SitemapWeb

SITEMAP = "http://a.test/sitemap.xml"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def read(body: bytes, url: str = SITEMAP, **kwargs: int) -> tuple[list[object], SitemapReader]:
    reader = SitemapReader(url, **kwargs)
    return list(reader.read(body)), reader


def urlset(inner: str) -> bytes:
    return f'<?xml version="1.0"?>\n<urlset {NS}>{inner}</urlset>'.encode()


def test_urlset_fields_and_extensions() -> None:
    body = urlset(
        '<url xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
        "<loc> http://A.test/x </loc><lastmod>2024-01-02T03:04:05+01:00</lastmod>"
        "<priority>1.5</priority><changefreq>Daily</changefreq>"
        "<image:image><image:loc>http://img.test/i.png</image:loc></image:image>"
        "<image:loc>http://img.test/j.png</image:loc></url>"
        "<url><loc>http://a.test/y</loc><priority>x</priority><changefreq>often</changefreq></url>"
    )
    entries, reader = read(body)
    assert entries == [
        PageEntry("http://a.test/x", 1704161045.0, 1.0, "daily"),
        PageEntry("http://a.test/y", None, None, None),
    ]
    assert reader.kind == "urlset" and reader.error is None and reader.truncated is None


def test_entries_without_a_usable_loc_are_counted() -> None:
    body = urlset("<url><loc>relative/x</loc></url><url></url><url><loc>mailto:a@b</loc></url>"
                  f"<url><loc>http://a.test/{'x' * 3000}</loc></url>")
    entries, reader = read(body)
    assert entries == []
    assert reader.refused == {"malformed": 1, "no_loc": 1, "scheme": 1, "too_long": 1}


def test_index_children_carry_their_depth() -> None:
    body = (f'<sitemapindex {NS}><sitemap><loc>http://a.test/s1.xml.gz</loc>'
            "<lastmod>2024-01-01</lastmod></sitemap></sitemapindex>").encode()
    entries, reader = read(body, depth=1)
    assert entries == [ChildSitemap("http://a.test/s1.xml.gz", 1704067200.0, 2)]
    assert reader.kind == "sitemapindex"
    child = entries[0]
    assert isinstance(child, ChildSitemap)
    assert within_depth(child, 2) and not within_depth(child, 1)


def test_gzip_fed_in_any_pieces_reads_the_same() -> None:
    body = urlset("".join(f"<url><loc>http://a.test/{i}</loc></url>" for i in range(500)))
    plain, _ = read(body)
    packed = gzip.compress(body[:1000]) + gzip.compress(body[1000:])  # two members
    reader = SitemapReader(SITEMAP)
    pieces = [packed[i : i + 7] for i in range(0, len(packed), 7)]
    got = [e for piece in pieces for e in reader.feed(piece)] + reader.close()
    assert got == plain and len(got) == 500 and reader.error is None


def test_gzip_cut_short_or_corrupt_yields_what_parsed_and_an_error() -> None:
    body = gzip.compress(urlset("".join(f"<url><loc>http://a.test/{i}</loc></url>"
                                        for i in range(2000))))
    entries, reader = read(body[: len(body) // 2])
    assert 0 < len(entries) < 2000 and reader.error is not None
    entries, reader = read(body[:20] + b"\xff" * 50)
    assert entries == [] and reader.error is not None and "gzip" in reader.error


def test_text_sitemap() -> None:
    body = (b"\xef\xbb\xbf http://a.test/1\r\n\n\nhttp://a.test/2\nnot a url\n"
            + b"http://a.test/" + b"x" * 20000 + b"\nhttp://a.test/3")
    entries, reader = read(body)
    assert [e.loc for e in entries if isinstance(e, PageEntry)] == [
        "http://a.test/1", "http://a.test/2", "http://a.test/3"]
    assert reader.kind == "text" and reader.refused == {"malformed": 1, "too_long": 1}


@pytest.mark.parametrize(
    ("body", "fault"),
    [
        (b"<html><body>not found</body></html>", "root element is 'html'"),
        (b"", "empty"),
        (b"   \n ", "empty"),
        (urlset("<url><loc>http://a.test/1</loc></url><url><loc>http://a.test/2</lo")[:-9],
         "malformed XML"),
        (urlset("<url><loc>http://a.test/1</loc></url>&undefined;"), "malformed XML"),
    ],
)
def test_malformed_files_give_an_error_never_an_exception(body: bytes, fault: str) -> None:
    entries, reader = read(body)
    assert reader.error is not None and fault in reader.error
    assert entries in ([], [PageEntry("http://a.test/1")])


def test_limit_of_urls_per_file() -> None:
    body = urlset("".join(f"<url><loc>http://a.test/{i}</loc></url>" for i in range(MAX_URLS + 1)))
    entries, reader = read(body)
    assert len(entries) == MAX_URLS and reader.truncated == "max_urls" and reader.error is None
    text = "".join(f"http://a.test/{i}\n" for i in range(MAX_URLS + 1)).encode()
    entries, reader = read(text)
    assert len(entries) == MAX_URLS and reader.truncated == "max_urls"


def test_limit_of_bytes_per_file_plain_and_gzip_bomb() -> None:
    assert byte_cap(20 << 20) == 20 << 20 and byte_cap(1 << 40) == 50 * 1024 * 1024
    filler = " " * (2 << 20)
    body = urlset(f"<url><loc>http://a.test/1</loc></url>{filler}<url><loc>http://a.test/2</loc></url>")
    entries, reader = read(body, max_bytes=1 << 20)
    assert entries == [PageEntry("http://a.test/1")] and reader.truncated == "max_bytes"
    # 100 MiB of blanks gzip to ~100 KB; reading stops at the protocol's 50 MB.
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    packed = bomb.compress(urlset("<url><loc>http://a.test/1</loc></url>")[:-9])
    packed += b"".join(bomb.compress(b" " * (1 << 20)) for _ in range(100)) + bomb.flush()
    assert len(packed) < 200_000
    tracemalloc.start()
    entries, reader = read(packed)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert entries == [PageEntry("http://a.test/1")] and reader.truncated == "max_bytes"
    assert peak < 2 << 20


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
<!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">]>
<urlset><url><loc>http://a.test/&lol9;</loc></url></urlset>"""


def test_entity_expansion_is_refused() -> None:
    entries, reader = read(BILLION_LAUGHS)
    assert entries == [] and reader.error is not None and "DTD" in reader.error


def test_external_entities_are_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET")
    dtd = tmp_path / "evil.dtd"
    dtd.write_text(f'<!ENTITY x SYSTEM "{secret.as_uri()}">')
    xxe = (f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY x SYSTEM "{secret.as_uri()}">]>'
           "<urlset><url><loc>http://a.test/&x;</loc></url></urlset>").encode()
    entries, reader = read(xxe)
    assert entries == [] and reader.error is not None and "DTD" in reader.error
    # A DOCTYPE naming only an external DTD is accepted; the DTD is not read, and a loc
    # using an entity it would define is refused, not kept without it.
    external = (f'<?xml version="1.0"?><!DOCTYPE urlset SYSTEM "{dtd.as_uri()}">'
                "<urlset><url><loc>http://a.test/&x;</loc></url>"
                "<url><loc>http://a.test/ok</loc></url></urlset>").encode()
    entries, reader = read(external)
    assert entries == [PageEntry("http://a.test/ok")] and reader.error is None
    assert reader.refused == {"entity": 1}


def tiny_elements(count: int, nested: bool) -> Iterator[bytes]:
    yield b"<urlset>"
    piece = 10_000
    for _ in range(count // piece):
        yield (b"<a>" if nested else b"<a/>") * piece


def test_deep_nesting_stops_at_the_depth_bound() -> None:
    reader = SitemapReader(SITEMAP)
    assert list(reader.read(tiny_elements(1_000_000, nested=True))) == []
    assert reader.error == f"elements nested deeper than {MAX_DEPTH}"


def test_a_million_tiny_elements_stop_at_the_element_bound() -> None:
    reader = SitemapReader(SITEMAP)
    entries = list(reader.read(tiny_elements(MAX_ELEMENTS + 10_000, nested=False)))
    assert entries == [] and reader.error == f"more than {MAX_ELEMENTS} elements"


def test_a_token_expat_would_buffer_whole_is_refused() -> None:
    body = b'<urlset><url a="' + b"x" * (2 * MAX_TOKEN) + b'"/></urlset>'
    entries, reader = read(body)
    assert entries == [] and reader.error == f"a token longer than {MAX_TOKEN} bytes"


def sitemap_pieces(urls: int) -> Iterator[bytes]:
    """A urlset of ``urls`` entries (~110 bytes each) in pieces, as it would arrive."""
    yield f"<urlset {NS}>".encode()
    for start in range(0, urls, 500):
        yield "".join(f"<url><loc>http://a.test/p/{i}.html</loc>"
                      f"<lastmod>2024-01-01</lastmod><priority>0.5</priority></url>"
                      for i in range(start, min(urls, start + 500))).encode()
    yield b"</urlset>"


def peak_reading(urls: int) -> int:
    reader = SitemapReader(SITEMAP)
    tracemalloc.start()
    count = sum(1 for _ in reader.read(sitemap_pieces(urls)))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert count == urls and reader.error is None and reader.truncated is None
    return peak


def test_memory_does_not_grow_with_the_sitemap() -> None:
    """Ten times the URLs (1.1 MB of sitemap) cost no more than a piece's worth more memory
    (bench/bench_sitemaps.py measures a full 50,000-URL file)."""
    small, large = peak_reading(1_000), peak_reading(10_000)
    assert large < small + 256 * 1024


@given(st.binary(max_size=2000))
@settings(max_examples=200, deadline=None)
def test_no_input_makes_reading_raise(body: bytes) -> None:
    read(body)
    read(b"<urlset>" + body)
    read(gzip.compress(body)[: len(body) // 2 + 10])


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        ("2024", 1704067200.0),
        ("2024-02", 1706745600.0),
        ("2024-01-01", 1704067200.0),
        ("2024-01-01T01:00Z", 1704070800.0),
        ("2024-01-01T01:00:00.123+01:00", 1704067200.0),
        ("2024-01-01 01:00:00-0100", 1704074400.0),
        ("2024-01-01T01:00:00", 1704070800.0),
        ("2024-02-30", None),
        ("2024-13-01", None),
        ("yesterday", None),
        ("", None),
    ],
)
def test_w3c_datetime(text: str, epoch: float | None) -> None:
    assert w3c_datetime(text) == epoch


@pytest.mark.parametrize(
    ("text", "value"), [("0.8", 0.8), ("2", 1.0), ("-1", 0.0), ("nan", None), ("high", None)]
)
def test_priority_is_clamped(text: str, value: float | None) -> None:
    assert sitemap_priority(text) == value


def test_robots_sitemap_lines() -> None:
    body = (b"User-agent: *\nDisallow: /x\nSitemap: http://a.test/s.xml # main\n"
            b"  sitemap:/rel.xml\nSITEMAP: http://b.test/s.xml\nSitemap: http://a.test/s.xml\n"
            b"Sitemap: javascript:alert(1)\n")
    assert robots_sitemaps(body, "http://a.test/robots.txt") == [
        "http://a.test/s.xml", "http://a.test/rel.xml", "http://b.test/s.xml"]
    assert robots_sitemaps(body, "http://a.test/robots.txt", limit=1) == ["http://a.test/s.xml"]


@pytest.mark.parametrize(
    ("url", "sitemap", "named", "reason"),
    [
        ("http://a.test/catalog/x", "http://a.test/catalog/sitemap.xml", (), None),
        ("http://a.test/catalog/", "http://a.test/catalog/sitemap.xml", (), None),
        ("http://a.test/catalog", "http://a.test/catalog/sitemap.xml", (), "sitemap_path"),
        ("http://a.test/images/x", "http://a.test/catalog/sitemap.xml", (), "sitemap_path"),
        ("http://a.test/x", "http://a.test/sitemap.php?dir=/catalog/", (), None),
        ("http://a.test/x", "http://a.test", (), None),
        ("https://a.test/x", "http://a.test/sitemap.xml", (), "sitemap_origin"),
        ("http://a.test:8080/x", "http://a.test/sitemap.xml", (), "sitemap_origin"),
        ("http://a.testx/x", "http://a.test/sitemap.xml", (), "sitemap_origin"),
        ("http://b.test/x", "http://a.test/sitemap.xml", (), "sitemap_origin"),
        ("http://b.test/x", "http://a.test/sitemap.xml", ("http://a.test/sitemap.xml",), None),
        ("http://a.test/images/x", "http://a.test/catalog/sitemap.xml",
         ("http://a.test/catalog/sitemap.xml",), None),
    ],
)
def test_scope_rule(url: str, sitemap: str, named: tuple[str, ...], reason: str | None) -> None:
    assert scope_refusal(url, sitemap, frozenset(named)) == reason


NOW = 1_704_067_200.0


@pytest.mark.parametrize(
    ("entry", "level"),
    [
        (PageEntry("http://a.test/"), 3),
        (PageEntry("http://a.test/", priority=1.0), 2),
        (PageEntry("http://a.test/", priority=0.0), 4),
        (PageEntry("http://a.test/", priority=0.5), 3),
        (PageEntry("http://a.test/", NOW - 3600, 1.0, "hourly"), 2),  # capped at level 2
        (PageEntry("http://a.test/", NOW + 86400 * 365, None, None), 3),  # future: a claim
        (PageEntry("http://a.test/", NOW - 86400 * 30, None, "never"), 4),
        (PageEntry("http://a.test/", NOW - 86400 * 30, 0.0, "yearly"), 5),  # max_adjust
    ],
)
def test_level_mapping(entry: PageEntry, level: int) -> None:
    cfg = config.load()
    assert sitemap_level(entry, NOW, cfg.sitemaps, cfg.frontier.levels) == level


def test_level_mapping_bounds_follow_the_config() -> None:
    cfg = config.load(overrides=["sitemaps.base_level=8", "sitemaps.max_adjust=1",
                                 "sitemaps.priority_levels=5"])
    low = PageEntry("http://a.test/", priority=0.0)
    assert level_adjustment(low, NOW, cfg.sitemaps) == 1
    assert sitemap_level(low, NOW, cfg.sitemaps, cfg.frontier.levels) == 8


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("sitemaps.mode=always", "sitemaps.mode: must be one of robots, robots+default, off"),
        ("sitemaps.base_level=9", "sitemaps.base_level: must be at most frontier.levels (8)"),
        ("sitemaps.base_level=0", "sitemaps.base_level: must be at least 1"),
        ("sitemaps.max_files_per_host=0", "sitemaps.max_files_per_host: must be at least 1"),
        ("sitemaps.max_index_depth=-1", "sitemaps.max_index_depth: must not be negative"),
    ],
)
def test_config_is_validated(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        config.load(overrides=[override])


# The test web's sitemap hosts read as they say.
WEB = SitemapWeb(port=8080)


def fetch(kind: str, path: str) -> bytes:
    doc = WEB.respond(WEB.host(kind), path)
    assert doc is not None and doc.status == 200
    return doc.body


def crawl_sitemaps(kind: str, max_depth: int) -> tuple[list[str], list[str]]:
    """Listed URLs allowed and refused, from the host's robots.txt down (depth-bounded)."""
    robots_url = WEB.url(kind, "/robots.txt")
    named = robots_sitemaps(fetch(kind, "/robots.txt"), robots_url)
    queue = [(url, 0) for url in named]
    allowed, refused = [], []
    while queue:
        url, depth = queue.pop(0)
        host = url.split("/")[2].split(":")[0]
        doc = WEB.respond(host, "/" + url.split("/", 3)[3])
        assert doc is not None
        for entry in SitemapReader(url, depth).read(doc.body):
            if isinstance(entry, ChildSitemap):
                if within_depth(entry, max_depth) and scope_refusal(entry.loc, url) is None:
                    queue.append((entry.loc, entry.depth))
                continue
            target = entry.loc.split("/")[2].split(":")[0].removeprefix("sm-").split(".")[0]
            target_named = set(robots_sitemaps(fetch(target, "/robots.txt"), robots_url))
            (allowed if scope_refusal(entry.loc, url, target_named) is None
             else refused).append(entry.loc)
    return allowed, refused


def test_testweb_orphans_text_and_index() -> None:
    assert crawl_sitemaps("orphans", 2) == (WEB.listed("orphans"), [])
    assert crawl_sitemaps("text", 2) == (WEB.listed("text"), [])
    listed = WEB.listed("index")
    assert crawl_sitemaps("index", 2) == (listed[:9], WEB.refused_paths())
    assert crawl_sitemaps("index", 1) == (listed[:6], WEB.refused_paths())
    assert fetch("index", "/sitemap-a.xml.gz")[:2] == b"\x1f\x8b"


def test_testweb_cross_host_needs_the_target_to_name_the_sitemap() -> None:
    allowed, refused = crawl_sitemaps("cross", 2)
    assert allowed == [u for u in WEB.listed("cross") if "cross-named" in u]
    assert refused == [u for u in WEB.listed("cross") if "cross-unnamed" in u]


def test_testweb_broken_and_oversize() -> None:
    entries, reader = read(fetch("broken", "/sitemap.xml"), WEB.url("broken", "/sitemap.xml"))
    assert [e.loc for e in entries if isinstance(e, PageEntry)] == WEB.listed("broken")
    assert len(entries) == BROKEN_AFTER and reader.error is not None
    start = time.monotonic()
    entries, reader = read(fetch("oversize", "/sitemap.xml"), WEB.url("oversize", "/sitemap.xml"))
    assert len(entries) == MAX_URLS and reader.truncated == "max_urls", time.monotonic() - start


def test_testweb_fresh_host_dates_its_second_half_by_the_clock() -> None:
    """Only the fresh half is fresh under the default config, and only lastmod moves it."""
    now = 1_750_000_000.0
    web = SitemapWeb(port=8080, clock=lambda: now)
    doc = web.respond(web.host("fresh"), "/sitemap.xml")
    assert doc is not None
    items, reader = read(doc.body, web.url("fresh", "/sitemap.xml"))
    entries = [e for e in items if isinstance(e, PageEntry)]
    assert reader.error is None and [e.loc for e in entries] == web.listed("fresh")
    cfg = config.load(environ={}).sitemaps
    moved = [e for e in entries if level_adjustment(e, now, cfg) < 0]
    assert [e.loc for e in moved] == web.fresh() and len(moved) == len(entries) // 2
    assert {e.lastmod for e in moved} == {now - FRESH_AGE}


def test_the_test_web_states_the_protocols_limit_as_the_reader_does() -> None:
    from hive.fetch import sitemaps
    from hive.testweb import sitemaps as web_sitemaps

    assert web_sitemaps.MAX_URLS == sitemaps.MAX_URLS
